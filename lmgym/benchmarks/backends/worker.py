"""What every backend runs: a chunk of the spec's jobs, as result rows (`lmgym.benchmarks.rows`).

An `EpisodeWorker` builds its envs and agents lazily from the spec and keeps them, so a worker
process or Ray actor pays an env's data loading once. Each job resets the env and the agent
with the job's seed, so a row does not depend on which worker ran it or what ran before.

A chunk holds jobs of one (env, agent) pair (`chunk_jobs`). An agent that plays several
episodes at once (``max_slots > 1``, e.g. ``lm`` with ``batch_size``) plays its chunk through
`lmgym.agents.runner.run_episodes`, one env per slot and one model call per step for every
live episode, on every backend; any other agent plays it one episode at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym

import lmgym  # noqa: F401  registers the ids in a fresh worker process
from lmgym.agents.base import Agent
from lmgym.agents.registry import make_agent
from lmgym.agents.runner import run_episodes
from lmgym.benchmarks.rows import ROLLOUT_FIELD, Job, job_row
from lmgym.benchmarks.spec import BenchmarkSpec


def chunk_jobs(jobs: list[Job], slots: Callable[[int], int], workers: int) -> list[list[Job]]:
    """The chunks a backend hands its workers: each job alone, in the order given, except that
    the jobs of an (env, agent) pair whose agent plays ``slots(agent index) > 1`` episodes at
    once are cut into at most `workers` chunks of at least that many jobs (placed last), each
    played in lockstep by one worker, a slot starting the next episode when its last one ends."""
    chunks, batched = [], {}
    for job in jobs:
        if slots(job.agent) == 1:
            chunks.append([job])
        else:
            batched.setdefault((job.env, job.agent), []).append(job)
    for group in batched.values():
        size = max(slots(group[0].agent), -(-len(group) // max(1, workers)))
        chunks += [group[start:start + size] for start in range(0, len(group), size)]
    return chunks


class EpisodeWorker:
    def __init__(self, spec: BenchmarkSpec):
        self.spec = spec
        self._envs: dict[tuple[int, int], gym.Env] = {}
        self._agents: dict[int, Agent] = {}

    def _env(self, index: int, slot: int = 0) -> gym.Env:
        """The env of spec entry `index` for slot `slot` of a batched agent (one per slot)."""
        if (index, slot) not in self._envs:
            env = self.spec.envs[index]
            limit = {} if self.spec.max_steps is None else {"max_episode_steps": self.spec.max_steps}
            self._envs[index, slot] = gym.make(env.id, **limit, **env.make_kwargs)
        return self._envs[index, slot]

    def _agent(self, index: int) -> Agent:
        if index not in self._agents:
            agent = self.spec.agents[index]
            self._agents[index] = make_agent(agent.target, **agent.kwargs)
        return self._agents[index]

    def slots(self, agent: int) -> int:
        """Episodes agent `agent` (an index into spec.agents) plays at once; 1 when it cannot be
        made (its jobs then report why as error rows)."""
        try:
            return max(1, int(getattr(self._agent(agent), "max_slots", 1)))
        except Exception:  # noqa: BLE001  the error belongs to the rows, where `run` records it
            return 1

    def run(self, jobs: list[Job]) -> Iterator[dict[str, Any]]:
        """Play a chunk of jobs of one (env, agent) pair; yield each row as its episode ends, the
        rollout under `ROLLOUT_FIELD` (None in an error row).

        ``seconds`` is the episode alone: making the env and the agent (data loading, models)
        happens once per worker, before any clock starts.
        """
        together = self.slots(jobs[0].agent) > 1
        for group in [jobs] if together else [[job] for job in jobs]:
            yield from self._play(group)

    def _play(self, jobs: list[Job]) -> Iterator[dict[str, Any]]:
        """Rows of `jobs`, played in lockstep when there are several; an env or agent that raises
        gives error rows for the episodes that had not ended (a result to report, not a crash)."""
        first, done = jobs[0], set()
        try:
            agent = self._agent(first.agent)
            envs = [self._env(first.env, slot) for slot in range(min(self.slots(first.agent), len(jobs)))]
            sweep = self.spec.envs[first.env].sweep
            for k, episode in run_episodes(envs, agent, [self.spec.seed(job.episode) for job in jobs],
                                           env_id=self.spec.envs[first.env].id,
                                           options=[{"task_index": job.episode} if sweep else None for job in jobs]):
                done.add(k)
                rollout = episode.to_dict()
                yield {**job_row(self.spec, jobs[k], rollout, episode.seconds), ROLLOUT_FIELD: rollout}
        except Exception as error:
            for k, job in enumerate(jobs):
                if k not in done:
                    yield {**job_row(self.spec, job, None, 0.0, error), ROLLOUT_FIELD: None}

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
        for agent in self._agents.values():
            agent.close()
        self._agents.clear()
