"""The benchmark row: every row, of an episode or of an error, has the columns of `Row`."""

import gymnasium as gym

import lmgym  # noqa: F401
from lmgym.agents import RandomAgent, run_episode
from lmgym.benchmarks.rows import Job, Row, episode_columns, job_key, job_row
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec

SPEC = BenchmarkSpec("rows", (EnvSpec("lmgym/KeyDoor-v0", sweep=False),), (AgentSpec("random"),), episodes=2,
                     base_seed=5)


def test_an_episode_row_and_an_error_row_have_the_same_columns():
    job = Job(0, 0, 1)
    rollout = run_episode(gym.make("lmgym/KeyDoor-v0"), RandomAgent(), seed=SPEC.seed(1)).to_dict()
    row = job_row(SPEC, job, rollout, seconds=0.25)
    assert set(row) == set(Row.__annotations__)
    assert row["key"] == job_key(SPEC, job) == "lmgym/KeyDoor-v0|random|1" and row["seed"] == 6
    assert {k: row[k] for k in episode_columns(rollout)} == episode_columns(rollout) and row["error"] is None
    try:
        raise RuntimeError("the engine broke")
    except RuntimeError as error:
        failed = job_row(SPEC, job, None, seconds=0.0, error=error)
    assert set(failed) == set(Row.__annotations__)
    assert failed["error"].startswith("RuntimeError: the engine broke\n") and "Traceback" in failed["error"]
    assert (failed["steps"], failed["won"], failed["return"], failed["score"]) == (0, False, 0.0, None)
