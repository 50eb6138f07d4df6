"""lmgym train grpo under `accelerate launch` with two CPU processes (gloo): both ranks end with
the same weights, and with the weights and metrics of one process trained on the same batch,
data parallel (``--multi_gpu``) and sharded (``--use_fsdp --fsdp_version 2``: torch's FSDP2).

Both flags go through accelerate's torchrun launcher; on a machine without GPUs its processes
join a gloo group on the CPU (accelerate's ``--cpu`` starts one process unless it goes
through mpirun)."""

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lmgym.models.checkpoints import load_checkpoint, read_meta
from lmgym.training.grpo import GRPOConfig, train
from test_grpo import keydoor_policy  # noqa: F401  (the fixture: a tiny KeyDoor policy that wins some episodes)

#: One iteration (two PPO epochs) on two tasks, played one episode at a time (no batching), so
#: the two ranks' tasks are exactly the single process's tasks.
OPTIONS = {"env": "lmgym/KeyDoor-v0", "steps": 2, "ppo_epochs": 2, "tasks": 2, "group": 4, "max_turns": 6,
           "max_new_tokens": 12, "rollout_batch": 1, "lr": 1e-2, "quiet": True}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rows(folder: Path) -> list[dict]:
    timing = ("time/seconds", "time/env_steps_per_second", "time/tokens_per_second")
    return [{k: v for k, v in json.loads(line).items() if k not in timing}
            for line in (folder / "metrics.jsonl").read_text().splitlines()]


def parameters(folder: Path) -> dict[str, torch.Tensor]:
    model, _, _ = load_checkpoint(folder)
    return {name: p.detach() for name, p in model.named_parameters()}


#: FSDP2 with one group per decoder layer (accelerate's transformer policy: the tiny Llama's 2
#: layers, then the root with the embeddings and head).
FSDP = ["--use_fsdp", "--fsdp_version=2", "--fsdp_auto_wrap_policy=TRANSFORMER_BASED_WRAP"]


@pytest.mark.skipif(shutil.which("accelerate", path=os.path.dirname(sys.executable)) is None,
                    reason="needs accelerate's launcher")
@pytest.mark.parametrize("launch, options, distributed", [
    (["--multi_gpu"], OPTIONS, {"strategy": "ddp", "processes": 2}),
    # three tasks: rank 0 plays two (48 turns, 3 micro-batches), rank 1 one (2 micro-batches, then an
    # idle pass, so the ranks' FSDP collectives match; measured: every episode here runs 6 turns)
    (FSDP, {**OPTIONS, "tasks": 3}, {"strategy": "fsdp", "processes": 2, "fsdp_groups": 3}),
], ids=["ddp", "fsdp"])
def test_two_ranks_match_one_process(keydoor_policy, tmp_path, launch, options, distributed):
    train(GRPOConfig(model=str(keydoor_policy), out=str(tmp_path / "one"), **options))
    flags = [f"--{key.replace('_', '-')}" + ("" if value is True else f"={value}") for key, value in options.items()]
    launcher = os.path.join(os.path.dirname(sys.executable), "accelerate")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([launcher, "launch", *launch, "--num_processes=2", "--num_machines=1", "--mixed_precision=no",
                           "--dynamo_backend=no", f"--main_process_port={free_port()}", "-m", "lmgym.training.grpo",
                           f"--model={keydoor_policy}", f"--out={tmp_path / 'two'}", *flags],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # the run ends by checking that the ranks hold bit-identical weights (grpo.assert_ranks_agree;
    # under FSDP the full weights each rank gathers from the shards)
    one, rank0, rank1 = tmp_path / "one", tmp_path / "two", tmp_path / "two" / "rank1"
    assert read_meta(rank0 / "checkpoint")["distributed"] == distributed
    single, first = parameters(one / "checkpoint"), parameters(rank0 / "checkpoint")
    # equal up to float rounding (sums in another order), which Adam's m / sqrt(v) can lift to
    # 1e-6 on a weight whose gradient is near 0 (measured, updates 2e-2: ddp 2 of 30k weights above
    # 1e-6; fsdp 1 of 34k, 2.2e-6 at most)
    assert all(torch.allclose(single[name], first[name], atol=1e-5) for name in single)
    assert not all(torch.equal(single[name], p) for name, p in parameters(keydoor_policy).items())  # it trained
    assert rows(rank0) == rows(rank1)
    for ours, theirs in zip(rows(one), rows(rank0), strict=True):
        assert ours.keys() == theirs.keys()
        assert all(ours[key] == pytest.approx(theirs[key], rel=1e-5, abs=1e-7) for key in ours), (ours, theirs)
