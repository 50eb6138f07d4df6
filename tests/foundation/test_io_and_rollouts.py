import json

import datasets
import gymnasium as gym
import pytest

import lmgym  # noqa: F401
from lmgym.agents import ExpertAgent, RandomAgent, run_episode
from lmgym.io import append_jsonl, atomic_folder, atomic_write_json, read_jsonl, repair_jsonl, rewind_log
from lmgym.react import format_completion
from lmgym.rollouts import Episode, read_episodes, write_episode, write_episodes


def test_partial_last_line_is_dropped_then_repaired(tmp_path):
    path = tmp_path / "log.jsonl"
    append_jsonl(path, {"k": 1})
    append_jsonl(path, {"k": 2})
    with open(path, "ab") as f:  # a crash in the middle of a third append
        f.write(b'{"k": 3, "trunc')
    assert [r["k"] for r in read_jsonl(path)] == [1, 2]
    assert repair_jsonl(path) == len(b'{"k": 3, "trunc')
    append_jsonl(path, {"k": 4})
    assert [r["k"] for r in read_jsonl(path)] == [1, 2, 4]



def test_rewind_log_drops_the_steps_a_resumed_run_logs_again(tmp_path):
    path = tmp_path / "metrics.jsonl"
    rewind_log(path, 0)  # no log yet: nothing to do, nothing created
    assert not path.exists()
    for step in (1, 2, 3, 4):  # a run saved at step 2, then killed after logging step 4
        append_jsonl(path, {"train/step": step, "train/loss": 1.0 / step})
    rewind_log(path, 2)
    assert [r["train/step"] for r in read_jsonl(path)] == [1, 2]
    rewind_log(path, 0)  # restarted from scratch (no checkpoint was saved)
    assert list(read_jsonl(path)) == []

_APPENDER = """
import sys
from lmgym.io import append_jsonl
path, name = sys.argv[1], sys.argv[2]
for k in range(60):
    append_jsonl(path, {"writer": name, "k": k, "pad": "x" * 400_000})
"""


def test_two_processes_appending_to_one_file_keep_every_line(tmp_path):
    # Each append used to repair the file first, without a lock: a writer could cut off the
    # line the other was still writing.
    import subprocess
    import sys

    path = tmp_path / "shared.jsonl"
    writers = [subprocess.Popen([sys.executable, "-c", _APPENDER, str(path), name]) for name in ("a", "b")]
    assert [w.wait(timeout=300) for w in writers] == [0, 0]
    rows = list(read_jsonl(path))
    assert sorted((r["writer"], r["k"]) for r in rows) == sorted((n, k) for n in "ab" for k in range(60))
    assert all(len(r["pad"]) == 400_000 for r in rows)
    assert path.read_bytes().count(b"\n") == 120


def test_atomic_writes_get_the_usual_file_mode(tmp_path):
    import os

    umask = os.umask(0)
    os.umask(umask)
    atomic_write_json(tmp_path / "summary.json", {"a": 1})
    assert (tmp_path / "summary.json").stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0o600
    os.chmod(tmp_path / "summary.json", 0o640)
    atomic_write_json(tmp_path / "summary.json", {"a": 2})  # a rewrite keeps the file's own mode
    assert (tmp_path / "summary.json").stat().st_mode & 0o777 == 0o640


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    atomic_write_json(tmp_path / "a" / "s.json", {"x": [1, 2]})
    assert json.loads((tmp_path / "a" / "s.json").read_text()) == {"x": [1, 2]}
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["s.json"]


def test_atomic_write_keeps_the_old_file_when_serialising_fails(tmp_path):
    path = tmp_path / "s.json"
    atomic_write_json(path, {"v": 1})
    with pytest.raises(TypeError):
        atomic_write_json(path, {"v": object()})
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_atomic_folder_replaces_the_old_folder_and_leaves_nothing_beside_it(tmp_path):
    target = tmp_path / "runs" / "checkpoint"
    for version in ("1", "2"):
        with atomic_folder(target) as tmp:
            assert tmp.parent == target.parent and tmp != target
            (tmp / "v.txt").write_text(version)
            if version == "1":
                (tmp / "only-in-1.txt").write_text("")
        assert sorted(p.name for p in target.iterdir()) == (["only-in-1.txt", "v.txt"] if version == "1" else ["v.txt"])
        assert (target / "v.txt").read_text() == version
        assert [p.name for p in target.parent.iterdir()] == ["checkpoint"]


def test_atomic_folder_keeps_the_old_folder_when_writing_fails(tmp_path):
    target = tmp_path / "checkpoint"
    with atomic_folder(target) as tmp:
        (tmp / "v.txt").write_text("old")
    (tmp_path / ".checkpoint.old").mkdir()  # left by a swap that was killed half-way
    with pytest.raises(RuntimeError):
        with atomic_folder(target) as tmp:
            (tmp / "v.txt").write_text("new")
            raise RuntimeError("interrupted")
    assert (target / "v.txt").read_text() == "old"
    with atomic_folder(target) as tmp:
        (tmp / "v.txt").write_text("new")
    assert (target / "v.txt").read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["checkpoint"]


def test_completion_spans_cover_reasoning_and_action():
    text, spans = format_completion("the key is north", "go north")
    assert text == "Thought: the key is north\nAction: go north"
    assert [(s.kind, text[s.start:s.end]) for s in spans] == [("reason", "the key is north"), ("act", "go north")]
    text, spans = format_completion("", "look")
    assert text == "Action: look" and [(s.kind, text[s.start:s.end]) for s in spans] == [("act", "look")]


def test_episode_round_trip_and_summary_fields(tmp_path):
    env = gym.make("lmgym/KeyDoor-v0")
    episode = run_episode(env, ExpertAgent(), seed=5)
    path = tmp_path / "r.jsonl"
    write_episode(path, episode)
    row = json.loads(path.read_text())
    assert row["won"] is True and row["return"] == 1.0 and row["length"] == len(episode.steps)
    assert row["env_id"] == "lmgym/KeyDoor-v0" and row["seed"] == 5 and row["agent"] == "expert"
    (back,) = read_episodes(path)
    assert back == Episode.from_dict(row) and back.to_dict() == row


def test_rollout_file_loads_as_a_hugging_face_dataset(tmp_path):
    env = gym.make("lmgym/KeyDoor-Large-v0")
    path = tmp_path / "r.jsonl"
    write_episodes(path, [run_episode(env, agent, seed=s) for agent in (ExpertAgent(), RandomAgent()) for s in range(3)])
    table = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache"))
    assert table.num_rows == 6
    assert set(table["agent"]) == {"expert", "random"}
    first = table[0]["steps"][0]
    assert first["spans"][-1]["kind"] == "act"
    assert first["completion"][first["spans"][-1]["start"]:first["spans"][-1]["end"]] == first["action"]
