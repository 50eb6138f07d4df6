"""The shared training loop on a toy regression: the schedule, the log's keys and rows, totals
and seconds over attempts, and an interrupted run that resumes exactly."""

import math

import pytest
import torch

from lmgym.io import atomic_folder, atomic_write_json, read_jsonl
from lmgym.models.checkpoints import META_FILE, OPTIMIZER_FILE, read_meta
from lmgym.training.loop import LoopConfig, learning_rate, resume_from, run_loop


def test_the_schedule_warms_up_then_decays_to_the_floor():
    cfg = LoopConfig(lr=1.0, warmup=4, steps=14, lr_floor=0.1)
    assert [learning_rate(cfg, k) for k in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert learning_rate(cfg, 9) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 2)))  # half way
    assert learning_rate(cfg, 14) == pytest.approx(0.1) and learning_rate(cfg, 40) == pytest.approx(0.1)
    constant = LoopConfig(lr=0.3, warmup=0, steps=10, lr_floor=1.0)
    assert {learning_rate(constant, k) for k in range(12)} == {0.3}


def run(out, steps=6, **options):
    """y = 2x by a linear layer; every step reports 3 tokens and its loss."""
    cfg = LoopConfig(out=str(out), steps=steps, lr=0.1, warmup=2, log_every=2, quiet=True, **options)
    model = torch.nn.Linear(1, 1)
    torch.manual_seed(0)
    torch.nn.init.normal_(model.weight)
    torch.nn.init.zeros_(model.bias)  # not the layer's own draw, which depends on what ran before in the process
    if resumed := resume_from(cfg):
        model.load_state_dict(torch.load(resumed / "model.pt"))

    def step(k, generator):
        x = torch.randn(8, 1, generator=generator)
        loss = torch.nn.functional.mse_loss(model(x), 2 * x)
        loss.backward()
        return {"train/loss": loss.item(), "train/k": float(k), "train/tokens": 3}

    def save(folder, meta, optimizer):
        with atomic_folder(folder) as tmp:
            torch.save(model.state_dict(), tmp / "model.pt")
            atomic_write_json(tmp / META_FILE, meta)
            torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)

    meta = {"toy": True, "train_panels": []}  # a toy regression: no env's tasks
    row = run_loop(cfg, list(model.parameters()), step, save, meta, averaged=("train/k",), totals=("train/tokens",))
    return row, model.state_dict()


def test_rows_hold_the_loops_keys_averages_and_totals(tmp_path):
    row, _ = run(tmp_path)
    rows = list(read_jsonl(tmp_path / "metrics.jsonl"))
    assert [r["train/step"] for r in rows] == [2, 4, 6] and rows[-1] == row
    assert [r["train/k"] for r in rows] == [0.5, 2.5, 4.5]  # the mean over the steps since the previous row
    assert [r["train/tokens"] for r in rows] == [6, 12, 18]
    assert {"train/loss", "train/lr", "train/grad_norm", "time/seconds", "time/tokens_per_second"} <= set(row)
    assert rows[-1]["train/loss"] < rows[0]["train/loss"]
    meta = read_meta(tmp_path / "checkpoint")
    assert meta["toy"] and meta["step"] == 6 and meta["totals"] == {"train/tokens": 18} and meta["train_seconds"] > 0
    assert run(tmp_path)[0] == {}  # finished: nothing left to train, nothing logged twice
    assert len(list(read_jsonl(tmp_path / "metrics.jsonl"))) == 3


def test_a_fresh_run_in_a_relative_folder_starts_from_step_zero(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative OUT that does not exist yet (not a zoo name to look up)
    assert resume_from(LoopConfig(out="runs/fresh")) is None
    row, _ = run("runs/fresh", steps=2)
    assert row["train/step"] == 2 and resume_from(LoopConfig(out="runs/fresh")) is not None


def test_an_interrupted_run_resumes_exactly_and_counts_every_attempt(tmp_path, interrupt_training):
    _, whole = run(tmp_path / "whole")
    with interrupt_training(5):  # steps 1-5 ran (rows at 2 and 4, a checkpoint at 4), the sixth never starts
        run(tmp_path / "cut", save_every=4)
    assert read_meta(tmp_path / "cut" / "checkpoint")["step"] == 4
    row, resumed = run(tmp_path / "cut", save_every=4)
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
    assert [r["train/step"] for r in read_jsonl(tmp_path / "cut" / "metrics.jsonl")] == [2, 4, 6]
    assert row["train/tokens"] == 18  # 12 saved at step 4, then steps 5 and 6 again


def test_a_meta_without_train_panels_is_refused(tmp_path):
    model = torch.nn.Linear(1, 1)
    with pytest.raises(ValueError, match="names no train_panels"):
        run_loop(LoopConfig(out=str(tmp_path), steps=1, quiet=True), list(model.parameters()),
                 lambda k, g: {"train/loss": 0.0}, lambda *a, **k: None, {"toy": True})
    assert not (tmp_path / "metrics.jsonl").exists()
