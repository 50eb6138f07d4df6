"""Ray backend: actors each holding an `EpisodeWorker` (extra ``lmgym[ray]``).

``RayBackend(address="ray://head:10001")`` (or ``auto``) runs on a cluster; without an
address it starts a local Ray with `num_cpus` CPUs. Each actor gets one chunk of jobs at a
time (`chunk_jobs`: one job, or a batched agent's share of its episodes, played in lockstep),
so a lost actor costs at most one chunk: the backend replaces the actor and requeues that
chunk, up to `max_retries` times per chunk. `retries` counts the replacements (the fault test
reads it).
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any, Iterator

from lmgym.benchmarks.backends import Backend
from lmgym.benchmarks.backends.worker import EpisodeWorker, chunk_jobs
from lmgym.benchmarks.rows import Job
from lmgym.benchmarks.spec import BenchmarkSpec


class _Actor:
    """The body of a Ray actor: an `EpisodeWorker` behind a remote `run` and `slots`."""

    def __init__(self, spec: BenchmarkSpec):
        self.worker = EpisodeWorker(spec)

    def run(self, jobs: list[Job]) -> list[dict[str, Any]]:
        return list(self.worker.run(jobs))

    def slots(self, agent: int) -> int:
        return self.worker.slots(agent)


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
        self._slots: dict[int, int] = {}

    def slots(self, agent: int) -> int:
        """Episodes agent `agent` plays at once, as the first actor that made it says (asked once)."""
        import ray

        if agent not in self._slots:
            self._slots[agent] = ray.get(self.actors[0].slots.remote(agent))
        return self._slots[agent]

    def run(self, jobs: list[Job]) -> Iterator[dict[str, Any]]:
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        queue = deque(tuple(chunk) for chunk in chunk_jobs(jobs, self.slots, self.workers))
        attempts: dict[tuple[Job, ...], int] = {}
        in_flight: dict[Any, tuple[int, tuple[Job, ...]]] = {}  # object ref -> (actor slot, chunk)

        def dispatch(slot: int) -> None:
            if queue:
                chunk = queue.popleft()
                in_flight[self.actors[slot].run.remote(list(chunk))] = (slot, chunk)

        for slot in range(len(self.actors)):
            dispatch(slot)
        while in_flight:
            [ref], _ = ray.wait(list(in_flight), num_returns=1)
            slot, chunk = in_flight.pop(ref)
            try:
                rows = ray.get(ref)
            except (RayActorError, ActorUnavailableError):
                attempts[chunk] = attempts.get(chunk, 0) + 1
                if attempts[chunk] > self.max_retries:
                    raise
                self.retries += 1
                self.actors[slot] = self._remote.remote(self.spec_ref)
                queue.appendleft(chunk)
                dispatch(slot)
                continue
            dispatch(slot)
            yield from rows

    def close(self) -> None:
        import ray

        if ray.is_initialized():
            for actor in self.actors:
                ray.kill(actor)
        self.actors = []
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False
