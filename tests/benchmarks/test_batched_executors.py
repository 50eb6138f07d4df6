"""Batched agents batch on every executor: a worker process plays its share of an agent's
episodes in lockstep, and the rows are those of one episode at a time (Ray: test_ray_backend)."""

import json
import os
from pathlib import Path

from lmgym.benchmarks.backends.processes import ProcessBackend
from lmgym.benchmarks.backends.worker import chunk_jobs
from lmgym.benchmarks.rows import Job
from lmgym.benchmarks.runner import NONDETERMINISTIC_FIELDS, TRANSCRIPTS_FILE, read_rows, run_benchmark
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec
from lmgym.io import read_jsonl


def spec(batch_size: int) -> BenchmarkSpec:
    return BenchmarkSpec("batched", (EnvSpec("lmgym/KeyDoor-v0"),),
                         (AgentSpec("random"), AgentSpec("lockstep", "lockstep_agents:LockstepRandom",
                                                         {"batch_size": batch_size})), episodes=8)


def comparable(out: Path) -> list[dict]:
    return sorted(({k: v for k, v in r.items() if k not in NONDETERMINISTIC_FIELDS} for r in read_rows(out)),
                  key=lambda r: r["key"])


def calls(out: Path) -> list[dict]:
    """The ``agent_json`` of every step of the lockstep agent (its call sizes and processes)."""
    return [json.loads(step["agent_json"]) for rollout in read_jsonl(out / TRANSCRIPTS_FILE)
            if "|lockstep|" in rollout["key"] for step in rollout["steps"]]


def test_batched_chunks_split_an_agents_episodes_over_the_workers():
    jobs = [Job(0, agent, k) for k in range(10) for agent in (0, 1)]
    chunks = chunk_jobs(jobs, slots=lambda agent: 4 if agent == 1 else 1, workers=2)
    assert chunks[:10] == [[Job(0, 0, k)] for k in range(10)]  # one by one, in order
    assert chunks[10:] == [[Job(0, 1, k) for k in range(5)], [Job(0, 1, k) for k in range(5, 10)]]
    assert chunk_jobs(jobs[1::2], slots=lambda agent: 4, workers=4)[0] == [Job(0, 1, k) for k in range(4)]


def test_the_process_executor_batches_with_the_rows_of_one_episode_at_a_time(tmp_path):
    run_benchmark(spec(1), tmp_path / "one", backend=ProcessBackend(workers=2), quiet=True, plots=False)
    run_benchmark(spec(4), tmp_path / "four", backend=ProcessBackend(workers=2), quiet=True, plots=False)
    assert comparable(tmp_path / "one") == comparable(tmp_path / "four") and len(read_rows(tmp_path / "one")) == 16
    one, four = calls(tmp_path / "one"), calls(tmp_path / "four")
    assert {c["batch"] for c in one} == {1}
    assert max(c["batch"] for c in four) == 4  # 8 episodes, 2 workers: 4 in lockstep in each
    assert os.getpid() not in {c["pid"] for c in four}  # played in the worker processes
