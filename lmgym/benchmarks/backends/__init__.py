"""Execution backends: where the episodes of a benchmark run, behind one interface.

A backend gets the spec once (`start`), then a list of jobs (`run`), and yields one result row
(`lmgym.benchmarks.rows`) per job in completion order; the runner alone writes rows to disk, so
a backend never needs to know about resume or files. `close` releases workers. Backends retry
jobs whose worker died, so every job yields exactly one row.

Every backend hands its workers chunks of jobs (`chunk_jobs`): one job each, except that an
agent that plays several episodes at once (``lm`` with ``batch_size``) gets its jobs in chunks
that a worker plays in lockstep batches, so batched agents batch on every backend.

* ``inprocess``: a loop in this process (the reference, and what tests debug with).
* ``processes``: a local process pool (`concurrent.futures`, spawn start), one
  `EpisodeWorker` per process.
* ``ray``: Ray actors, each holding an `EpisodeWorker`; ``address`` joins a cluster
  (extra ``lmgym[ray]``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterator

from lmgym.benchmarks.backends.worker import EpisodeWorker, chunk_jobs
from lmgym.benchmarks.rows import Job, all_jobs, job_key
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
        for chunk in chunk_jobs(jobs, self.worker.slots, workers=1):
            yield from self.worker.run(chunk)

    def close(self) -> None:
        worker = getattr(self, "worker", None)
        if worker is not None:
            worker.close()


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
