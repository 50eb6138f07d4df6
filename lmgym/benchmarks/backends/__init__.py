"""Execution backends: where the episodes of a benchmark run, behind one interface.

A backend gets the spec once (`start`), then a list of jobs (`run`), and yields one result row
per job in completion order; the runner alone writes rows to disk, so a backend never needs
to know about resume or files. `close` releases workers. Backends retry jobs whose worker
died, so every job yields exactly one row.

* ``inprocess``: a loop in this process (the reference, and what tests debug with).
* ``processes``: a local process pool (`concurrent.futures`, spawn start), one
  `EpisodeWorker` per process.
* ``ray``: Ray actors, each holding an `EpisodeWorker`; ``address`` joins a cluster
  (extra ``lmgym[ray]``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterator

from lmgym.benchmarks.backends.worker import EpisodeWorker, Job, all_jobs, job_key
from lmgym.benchmarks.spec import BenchmarkSpec


class Backend(ABC):
    name = "backend"

    @abstractmethod
    def start(self, spec: BenchmarkSpec) -> None:
        """Prepare workers for `spec` (start processes, actors)."""

    @abstractmethod
    def run(self, jobs: list[Job]) -> Iterator[dict[str, Any]]:
        """Yield one row per job, in completion order."""

    def close(self) -> None:
        """Release the workers; safe to call twice."""


class InProcessBackend(Backend):
    name = "inprocess"

    def start(self, spec: BenchmarkSpec) -> None:
        self.worker = EpisodeWorker(spec)

    def run(self, jobs: list[Job]) -> Iterator[dict[str, Any]]:
        for group in group_jobs(jobs, self.worker.slots):
            yield from self.worker.run_many(group)

    def close(self) -> None:
        worker = getattr(self, "worker", None)
        if worker is not None:
            worker.close()


def group_jobs(jobs: list[Job], slots) -> Iterator[list[Job]]:
    """Jobs one by one in the order given, except that all jobs of an (env, agent) pair whose
    agent plays ``slots(job) > 1`` episodes at once form one group (played last, in lockstep,
    each slot starting the next episode as soon as its last one ends)."""
    batched: dict[tuple[int, int], list[Job]] = {}
    for job in jobs:
        if slots(job) == 1:
            yield [job]
        else:
            batched.setdefault((job.env, job.agent), []).append(job)
    yield from batched.values()


def make_backend(name: str, *, workers: int = 2, address: str | None = None) -> Backend:
    """A backend by name: ``inprocess``, ``processes`` or ``ray``."""
    if name == "inprocess":
        return InProcessBackend()
    if name == "processes":
        from lmgym.benchmarks.backends.processes import ProcessBackend

        return ProcessBackend(workers=workers)
    if name == "ray":
        from lmgym.benchmarks.backends.ray_backend import RayBackend

        return RayBackend(workers=workers, address=address)
    raise ValueError(f"unknown backend {name!r}; choose inprocess, processes or ray")


__all__ = ["Backend", "EpisodeWorker", "InProcessBackend", "Job", "all_jobs", "job_key", "make_backend"]
