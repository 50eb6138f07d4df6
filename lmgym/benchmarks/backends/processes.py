"""Local process pool backend: one `EpisodeWorker` per process, spawned (not forked).

Spawn, because the parent may hold torch or Ray threads that a fork would copy mid-state.
Each task is a chunk of jobs (`chunk_jobs`: one job, or a batched agent's share of its
episodes, played in lockstep). A worker process that dies (killed, out of memory) breaks the
pool; the backend starts a new pool and resubmits the chunks without rows, at most
`max_restarts` times.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Iterator

from lmgym.benchmarks.backends import Backend
from lmgym.benchmarks.backends.worker import EpisodeWorker, chunk_jobs
from lmgym.benchmarks.rows import Job
from lmgym.benchmarks.spec import BenchmarkSpec

_WORKER: EpisodeWorker | None = None


def _init(spec: BenchmarkSpec) -> None:
    global _WORKER
    # One thread per worker: the workers are the parallelism, and the machine is shared.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    _WORKER = EpisodeWorker(spec)


def _run(jobs: list[Job]) -> list[dict[str, Any]]:
    assert _WORKER is not None, "worker process was not initialised"
    return list(_WORKER.run(jobs))


def _slots(agent: int) -> int:
    assert _WORKER is not None, "worker process was not initialised"
    return _WORKER.slots(agent)


def _ready() -> int:
    return os.getpid()


class ProcessBackend(Backend):
    name = "processes"

    def __init__(self, workers: int = 2, max_restarts: int = 3):
        self.workers = workers
        self.max_restarts = max_restarts
        self.restarts = 0
        self.pool: ProcessPoolExecutor | None = None

    def start(self, spec: BenchmarkSpec) -> None:
        self.spec = spec
        self._slots: dict[int, int] = {}
        self._new_pool()

    def _new_pool(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        self.pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_init, initargs=(self.spec,))
        # Wait until every process is up, so throughput measurements exclude start-up.
        for future in [self.pool.submit(_ready) for _ in range(self.workers)]:
            future.result()

    def slots(self, agent: int) -> int:
        """Episodes agent `agent` plays at once, as a worker that made it says (asked once)."""
        if agent not in self._slots:
            self._slots[agent] = self.pool.submit(_slots, agent).result()
        return self._slots[agent]

    def run(self, jobs: list[Job]) -> Iterator[dict[str, Any]]:
        pending = [tuple(chunk) for chunk in chunk_jobs(jobs, self.slots, self.workers)]  # chunks without rows yet
        while pending:
            futures: dict[Future, tuple[Job, ...]] = {self.pool.submit(_run, list(chunk)): chunk for chunk in pending}
            try:
                while futures:
                    done, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for future in done:
                        chunk = futures.pop(future)
                        rows = future.result()
                        pending.remove(chunk)
                        yield from rows
            except BrokenProcessPool:
                self.restarts += 1
                if self.restarts > self.max_restarts:
                    raise
                self._new_pool()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
