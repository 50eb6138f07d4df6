"""The runner keeps what happened: each episode's transcript in the rollout format, linked from its row."""

import json

import pytest

from lmgym.agents.base import Decision, RandomAgent
from lmgym.benchmarks.rows import episode_columns
from lmgym.benchmarks.cli import run as bench_cli
from lmgym.benchmarks.runner import TRANSCRIPTS_FILE, read_rows, run_benchmark
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec
from lmgym.io import read_jsonl
from lmgym.rollouts import Episode

SPEC = BenchmarkSpec("tr", (EnvSpec("lmgym/KeyDoor-v0"),), (AgentSpec("random"), AgentSpec("expert")),
                     episodes=3, base_seed=4)



class TokenCountingAgent(RandomAgent):
    """The random agent, reporting 3 prompt and 2 completion tokens per step (as an LM agent would)."""

    def decide(self, observation, info):
        decision = super().decide(observation, info)
        return Decision(decision.action, decision.reasoning, prompt_tokens=3, completion_tokens=2)


def test_each_row_links_its_transcript_in_the_rollout_format(tmp_path):
    run_benchmark(SPEC, tmp_path, quiet=True, plots=False)
    rows = {r["key"]: r for r in read_rows(tmp_path)}
    transcripts = list(read_jsonl(tmp_path / TRANSCRIPTS_FILE))
    assert sorted(t["key"] for t in transcripts) == sorted(rows)
    for transcript in transcripts:
        row = rows[transcript["key"]]
        assert row["transcript"] == TRANSCRIPTS_FILE and "rollout" not in row
        episode = Episode.from_dict(transcript)  # the rollout format, read back by its own reader
        assert (episode.env_id, episode.agent, episode.seed) == (row["env_id"], row["agent"], row["seed"])
        # The row's counts are the transcript's: the table and the steps cannot disagree.
        assert {k: row[k] for k in episode_columns(transcript)} == episode_columns(transcript)
        assert all(step["completion"] and step["spans"] for step in transcript["steps"])
    expert = next(t for t in transcripts if t["agent"] == "expert")
    assert expert["won"] and expert["steps"][-1]["action"] == "enter vault"


def test_transcripts_load_as_a_hugging_face_table(tmp_path):
    datasets = pytest.importorskip("datasets")
    run_benchmark(SPEC, tmp_path, quiet=True, plots=False)
    table = datasets.load_dataset("json", data_files=str(tmp_path / TRANSCRIPTS_FILE), split="train")
    assert len(table) == 6 and {"key", "steps", "env_id", "won"} <= set(table.column_names)


def test_no_transcripts_flag_and_the_token_columns(tmp_path, capsys):
    assert bench_cli(["smoke", "--envs", "lmgym/KeyDoor-v0", "--agents", "test_transcripts:TokenCountingAgent",
                      "--episodes", "2", "--out", str(tmp_path), "--quiet", "--no-plots", "--no-transcripts"]) == 0
    assert not (tmp_path / TRANSCRIPTS_FILE).exists()
    assert all(row["transcript"] is None for row in read_rows(tmp_path))
    printed = capsys.readouterr().out
    assert "transcripts.jsonl" not in printed and f"lmgym view {tmp_path}" in printed
    [cell] = json.loads((tmp_path / "summary.json").read_text())["cells"]
    assert cell["prompt_tokens_per_episode"] == 3 * cell["mean_steps"]
    assert cell["completion_tokens_per_episode"] == 2 * cell["mean_steps"]
    table = (tmp_path / "summary.md").read_text().splitlines()
    assert "prompt tokens/episode | completion tokens/episode" in table[2]
    assert f"| {3 * cell['mean_steps']:.1f} | {2 * cell['mean_steps']:.1f} |" in table[4]


def test_transcripts_are_the_same_from_every_backend_apart_from_seconds(tmp_path):
    from lmgym.benchmarks.backends.processes import ProcessBackend

    def without_seconds(out):
        by_key = {t["key"]: t for t in read_jsonl(out / TRANSCRIPTS_FILE)}
        for transcript in by_key.values():
            for timed in (transcript, *transcript["steps"]):
                timed.pop("seconds")
        return by_key

    run_benchmark(SPEC, tmp_path / "a", quiet=True, plots=False)
    run_benchmark(SPEC, tmp_path / "b", backend=ProcessBackend(workers=2), quiet=True, plots=False)
    assert without_seconds(tmp_path / "a") == without_seconds(tmp_path / "b")
