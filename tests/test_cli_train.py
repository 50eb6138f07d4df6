"""`lmgym train`: it lists every trainer, each trainer's --help is its config, and a tiny run
returns 0 with a checkpoint (it used to end in a TypeError)."""

import json
from pathlib import Path

import pytest

from lmgym.cli import TRAINERS, main
from lmgym.models.checkpoints import read_meta

TRAINING = Path(__file__).resolve().parents[1] / "lmgym" / "training"


def test_lmgym_train_lists_every_trainer(capsys):
    # a module of lmgym/training with a main() is a trainer, and the command offers it
    scripts = {f"lmgym.training.{p.stem}" for p in TRAINING.glob("*.py") if "\ndef main(" in p.read_text()}
    assert scripts == set(TRAINERS.values())
    for argv in (["train"], ["train", "--help"]):
        assert main(argv) == 0
        listing = capsys.readouterr().out
        assert all(f"  {name} " in listing for name in TRAINERS), listing


@pytest.mark.parametrize("name", sorted(TRAINERS))
def test_each_trainer_help_is_its_config(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", name, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert f"lmgym train {name}" in text and "--steps" in text and "--seed" in text


def test_lmgym_train_lm_returns_0_and_writes_a_checkpoint(tmp_path, capsys):
    data = tmp_path / "records.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"a {c} box", "completion": c}) + "\n" for c in ("red", "blue")))
    out = tmp_path / "run"
    code = main(["train", "lm", "--data", str(data), "--out", str(out), "--steps", "2", "--batch-size", "2",
                 "--vocab-size", "280", "--hidden-size", "16", "--num-layers", "1", "--num-heads", "2", "--quiet"])
    assert code == 0
    assert read_meta(out / "checkpoint")["step"] == 2 and (out / "checkpoint" / "model.safetensors").is_file()
    assert "step 2: loss" in capsys.readouterr().out


def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys):
    assert main(["train", "lm", "--data", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"lmgym train lm: error: --data {tmp_path / 'missing.jsonl'}: no such file"
    with pytest.raises(SystemExit) as exit_info:  # the CLI's one-line error for a name it does not know
        main(["train", "nonesuch"])
    assert exit_info.value.code == 2 and "the trainers: lm, distill" in capsys.readouterr().err
