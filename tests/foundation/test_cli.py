import subprocess
import sys

import pytest

from lmgym.cli import main
from lmgym.rollouts import read_episodes


def test_list_prints_every_registered_id(capsys):
    from lmgym.envs.registry import ENVS

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for env_id in ENVS:
        assert env_id in out


def test_play_ends_cleanly_on_end_of_input():
    result = subprocess.run([sys.executable, "-m", "lmgym", "play", "lmgym/KeyDoor-v0"], input="go north\n",
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "Traceback" not in result.stderr


def test_rollout_writes_episodes(tmp_path):
    out = tmp_path / "r.jsonl"
    assert main(["rollout", "lmgym/KeyDoor-v0", "--agent", "expert", "--episodes", "3", "--out", str(out), "--quiet"]) == 0
    episodes = list(read_episodes(out))
    assert [e.seed for e in episodes] == [0, 1, 2] and all(e.won for e in episodes)


@pytest.mark.parametrize("argv", [["play", "lmgym/NoSuchEnv-v0"], ["rollout", "lmgym/KeyDoor-v0"], ["frobnicate"]])
def test_bad_command_lines_give_an_error_not_a_traceback(argv):
    result = subprocess.run([sys.executable, "-m", "lmgym", *argv], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
