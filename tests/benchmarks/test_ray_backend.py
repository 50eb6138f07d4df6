"""The Ray backend: a local Ray with 2 CPUs, one actor killed mid-run, nothing lost or doubled."""

import pytest

ray = pytest.importorskip("ray")

from lmgym.benchmarks.backends.ray_backend import RayBackend  # noqa: E402
from lmgym.benchmarks.runner import NONDETERMINISTIC_FIELDS, read_rows, run_benchmark  # noqa: E402
from lmgym.benchmarks.suites import smoke_suite  # noqa: E402


def comparable(rows):
    return sorted(({k: v for k, v in r.items() if k not in NONDETERMINISTIC_FIELDS} for r in rows),
                  key=lambda r: r["key"])


def test_smoke_suite_on_ray_survives_a_killed_actor(tmp_path):
    spec = smoke_suite()
    run_benchmark(spec, tmp_path / "inprocess", quiet=True, plots=False)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        backend = RayBackend(workers=2)
        killed = []

        def kill_an_actor_once(row):
            if not killed:  # after the first row, while the actors hold their next jobs
                killed.append(backend.actors[0])
                ray.kill(backend.actors[0])

        run_benchmark(spec, tmp_path / "ray", backend=backend, quiet=True, plots=False, on_row=kill_an_actor_once)
    finally:
        ray.shutdown()
    assert killed and backend.retries >= 1
    rows = read_rows(tmp_path / "ray")
    lines = (tmp_path / "ray" / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == len(rows) == len(read_rows(tmp_path / "inprocess"))  # every episode once
    assert comparable(rows) == comparable(read_rows(tmp_path / "inprocess"))
