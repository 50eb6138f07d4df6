"""Ray backend: actors each holding an `EpisodeWorker` (extra ``lmgym[ray]``).

``RayBackend(address="ray://head:10001")`` (or ``auto``) runs on a cluster; without an
address it starts a local Ray with `num_cpus` CPUs. Each actor gets one job at a time, so a
lost actor costs at most one episode: the backend replaces the actor and requeues that job,
up to `max_retries` times per job. `retries` counts the replacements (the fault test reads it).
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any, Iterator

from lmgym.benchmarks.backends import Backend
from lmgym.benchmarks.backends.worker import EpisodeWorker, Job
from lmgym.benchmarks.spec import BenchmarkSpec


class _Actor:
    """The body of a Ray actor: an `EpisodeWorker` behind a remote `run`."""

    def __init__(self, spec: BenchmarkSpec):
        self.worker = EpisodeWorker(spec)

    def run(self, job: Job) -> dict[str, Any]:
        return self.worker.run(job)


class RayBackend(Backend):
    name = "ray"

    def __init__(self, workers: int = 2, address: str | None = None, num_cpus: int | None = None,
                 max_retries: int = 3):
        self.workers = workers
        self.address = address
        self.num_cpus = num_cpus
        self.max_retries = max_retries
        self.retries = 0
        self.actors: list[Any] = []
        self._started_ray = False

    def start(self, spec: BenchmarkSpec) -> None:
        import ray

        if not ray.is_initialized():
            # Workers read real data through LMGYM_DATA: pass the driver's value on.
            env_vars = {k: os.environ[k] for k in ("LMGYM_DATA", "OMP_NUM_THREADS") if k in os.environ}
            ray.init(address=self.address, num_cpus=None if self.address else (self.num_cpus or self.workers),
                     include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env_vars})
            self._started_ray = True
        self._remote = ray.remote(num_cpus=1, max_restarts=0)(_Actor)
        self.spec_ref = ray.put(spec)
        self.actors = [self._remote.remote(self.spec_ref) for _ in range(self.workers)]

    def run(self, jobs: list[Job]) -> Iterator[dict[str, Any]]:
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        queue = deque(jobs)
        attempts: dict[Job, int] = {}
        in_flight: dict[Any, tuple[int, Job]] = {}  # object ref -> (actor slot, job)

        def dispatch(slot: int) -> None:
            if queue:
                job = queue.popleft()
                in_flight[self.actors[slot].run.remote(job)] = (slot, job)

        for slot in range(len(self.actors)):
            dispatch(slot)
        while in_flight:
            [ref], _ = ray.wait(list(in_flight), num_returns=1)
            slot, job = in_flight.pop(ref)
            try:
                row = ray.get(ref)
            except (RayActorError, ActorUnavailableError):
                attempts[job] = attempts.get(job, 0) + 1
                if attempts[job] > self.max_retries:
                    raise
                self.retries += 1
                self.actors[slot] = self._remote.remote(self.spec_ref)
                queue.appendleft(job)
                dispatch(slot)
                continue
            dispatch(slot)
            yield row

    def close(self) -> None:
        import ray

        if ray.is_initialized():
            for actor in self.actors:
                ray.kill(actor)
        self.actors = []
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False
