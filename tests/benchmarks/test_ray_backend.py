"""The Ray backend on a local Ray with 2 CPUs (one session for the module): one actor killed
mid-run, nothing lost or doubled; a batched agent's episodes played in lockstep by the actors."""

import os
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from lmgym.benchmarks.backends.ray_backend import RayBackend  # noqa: E402
from lmgym.benchmarks.runner import NONDETERMINISTIC_FIELDS, read_rows, run_benchmark  # noqa: E402
from lmgym.benchmarks.suites import smoke_suite  # noqa: E402
from test_batched_executors import calls, spec as batched_spec  # noqa: E402


def comparable(rows):
    return sorted(({k: v for k, v in r.items() if k not in NONDETERMINISTIC_FIELDS} for r in rows),
                  key=lambda r: r["key"])


@pytest.fixture(scope="module")
def local_ray():
    # The workers Ray starts inherit this environment: they import this folder's agent modules
    # and this checkout's lmgym, as the driver does.
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent), *(p for p in sys.path if p)])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    if saved is None:
        del os.environ["PYTHONPATH"]
    else:
        os.environ["PYTHONPATH"] = saved


def test_smoke_suite_on_ray_survives_a_killed_actor(tmp_path, local_ray):
    spec = smoke_suite()
    run_benchmark(spec, tmp_path / "inprocess", quiet=True, plots=False)
    backend = RayBackend(workers=2)
    killed = []

    def kill_an_actor_once(row):
        if not killed:  # after the first row, while the actors hold their next jobs
            killed.append(backend.actors[0])
            ray.kill(backend.actors[0])

    run_benchmark(spec, tmp_path / "ray", backend=backend, quiet=True, plots=False, on_row=kill_an_actor_once)
    assert killed and backend.retries >= 1
    rows = read_rows(tmp_path / "ray")
    lines = (tmp_path / "ray" / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == len(rows) == len(read_rows(tmp_path / "inprocess"))  # every episode once
    assert comparable(rows) == comparable(read_rows(tmp_path / "inprocess"))


def test_the_ray_executor_batches_with_the_rows_of_one_episode_at_a_time(tmp_path, local_ray):
    run_benchmark(batched_spec(1), tmp_path / "one", quiet=True, plots=False)
    run_benchmark(batched_spec(4), tmp_path / "four", backend=RayBackend(workers=2), quiet=True, plots=False)
    assert comparable(read_rows(tmp_path / "one")) == comparable(read_rows(tmp_path / "four"))
    four = calls(tmp_path / "four")
    assert max(c["batch"] for c in four) == 4  # 8 episodes, 2 actors: 4 in lockstep in each
    assert os.getpid() not in {c["pid"] for c in four}
