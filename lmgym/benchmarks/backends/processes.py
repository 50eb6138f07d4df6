"""Local process pool backend: one `EpisodeWorker` per process, spawned (not forked).

Spawn, because the parent may hold torch or Ray threads that a fork would copy mid-state.
A worker process that dies (killed, out of memory) breaks the pool; the backend starts a new
pool and resubmits the jobs without a row, at most `max_restarts` times.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Iterator

from lmgym.benchmarks.backends import Backend
from lmgym.benchmarks.backends.worker import EpisodeWorker, Job
from lmgym.benchmarks.spec import BenchmarkSpec

_WORKER: EpisodeWorker | None = None


def _init(spec: BenchmarkSpec) -> None:
    global _WORKER
    # One thread per worker: the workers are the parallelism, and the machine is shared.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    _WORKER = EpisodeWorker(spec)


def _run(job: Job) -> dict[str, Any]:
    assert _WORKER is not None, "worker process was not initialised"
    return _WORKER.run(job)


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
        self._new_pool()

    def _new_pool(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        self.pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_init, initargs=(self.spec,))
        # Wait until every process is up, so throughput measurements exclude start-up.
        for future in [self.pool.submit(_ready) for _ in range(self.workers)]:
            future.result()

    def run(self, jobs: list[Job]) -> Iterator[dict[str, Any]]:
        pending = dict.fromkeys(jobs)  # ordered set of jobs without a row yet
        while pending:
            futures: dict[Future, Job] = {self.pool.submit(_run, job): job for job in pending}
            try:
                while futures:
                    done, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for future in done:
                        job = futures.pop(future)
                        row = future.result()
                        del pending[job]
                        yield row
            except BrokenProcessPool:
                self.restarts += 1
                if self.restarts > self.max_restarts:
                    raise
                self._new_pool()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
