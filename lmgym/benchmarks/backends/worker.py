"""What every backend runs: one episode of the spec, as one result row.

An `EpisodeWorker` builds its envs and agents lazily from the spec and keeps them, so a worker
process or Ray actor pays an env's data loading once. Each job resets the env and the agent
with the job's seed, so a row does not depend on which worker ran it or what ran before.

An agent that plays several episodes at once (``max_slots > 1``, e.g. ``lm`` with
``batch_size``) gets its jobs in groups: `run_many` keeps one env per slot and plays the group
through `lmgym.agents.runner.run_episodes`, one model call per step for every live episode.
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import dataclass
from collections.abc import Iterator
from typing import Any

import gymnasium as gym

import lmgym  # noqa: F401  registers the ids in a fresh worker process
from lmgym.agents.base import Agent
from lmgym.agents.registry import make_agent
from lmgym.agents.runner import run_episode, run_episodes
from lmgym.benchmarks.spec import BenchmarkSpec


@dataclass(frozen=True)
class Job:
    env: int  # index into spec.envs
    agent: int  # index into spec.agents
    episode: int  # k: seed base_seed + k, and task k when the env sweeps


#: The key under which `EpisodeWorker.run` returns the episode's rollout (`Episode.to_dict()`)
#: beside its row; the runner takes it out before the row is written.
ROLLOUT_FIELD = "rollout"


def job_key(spec: BenchmarkSpec, job: Job) -> str:
    """The identity of a row: resume and de-duplication compare these."""
    return f"{spec.envs[job.env].name}|{spec.agents[job.agent].name}|{job.episode}"


def all_jobs(spec: BenchmarkSpec) -> list[Job]:
    """Every episode of the spec, env by env, episode by episode, agent by agent."""
    return [Job(e, a, k) for e, env in enumerate(spec.envs) for k in range(spec.episodes_in(env))
            for a, agent in enumerate(spec.agents) if spec.plays(env, agent)]


#: Task metrics a row copies from the episode's last info, where the env reports them:
#: ``score`` (WebShop's purchase reward, HotPotQA's F1, PromptEdit's reward) and HotPotQA's ``em``,
#: ``f1`` and ``cover_em``.
SCORE_KEYS = ("score", "em", "f1", "cover_em")


def _final_scores(info_json: str) -> dict[str, float | None]:
    info = json.loads(info_json)
    return {key: float(info[key]) if isinstance(info.get(key), (int, float)) and not isinstance(info.get(key), bool)
            else None for key in SCORE_KEYS}


def episode_columns(rollout: dict[str, Any]) -> dict[str, Any]:
    """The row columns of one episode in the rollout format (`lmgym.rollouts.Episode.to_dict`).

    Computed from the steps alone (missing step fields take their `Step` defaults), so a
    rollout file written by any lmgym agent or wrapper summarises like a benchmark row.
    """
    steps = rollout.get("steps") or []
    last = steps[-1] if steps else {}
    return {
        "task": rollout.get("task", ""), "return": float(sum(s.get("reward", 0.0) for s in steps)),
        "won": bool(last.get("won", False)), "steps": len(steps),
        "invalid_actions": sum(not s.get("action_valid", True) for s in steps),
        "truncated": bool(last.get("truncated", False)),
        "prompt_tokens": sum(s.get("prompt_tokens", 0) for s in steps),
        "completion_tokens": sum(s.get("completion_tokens", 0) for s in steps),
        "format_errors": sum(bool(json.loads(s.get("agent_json") or "{}").get("format_error")) for s in steps),
        **_final_scores(last.get("info_json", "{}")),
    }


class EpisodeWorker:
    def __init__(self, spec: BenchmarkSpec):
        self.spec = spec
        self._envs: dict[int, gym.Env] = {}
        self._slot_envs: dict[tuple[int, int], gym.Env] = {}
        self._agents: dict[int, Agent] = {}

    def _env(self, index: int) -> gym.Env:
        if index not in self._envs:
            env = self.spec.envs[index]
            limit = {} if self.spec.max_steps is None else {"max_episode_steps": self.spec.max_steps}
            self._envs[index] = gym.make(env.id, **limit, **env.make_kwargs)
        return self._envs[index]

    def _agent(self, index: int) -> Agent:
        if index not in self._agents:
            agent = self.spec.agents[index]
            self._agents[index] = make_agent(agent.target, **agent.kwargs)
        return self._agents[index]

    def slots(self, job: Job) -> int:
        """Episodes the job's agent plays at once."""
        return max(1, int(getattr(self._agent(job.agent), "max_slots", 1)))

    def _row(self, job: Job) -> dict[str, Any]:
        env_spec, agent_spec = self.spec.envs[job.env], self.spec.agents[job.agent]
        return {"key": job_key(self.spec, job), "env": env_spec.name, "env_id": env_spec.id,
                "agent": agent_spec.name, "episode": job.episode, "seed": self.spec.seed(job.episode),
                "task_index": job.episode if env_spec.sweep else None}

    def _options(self, job: Job) -> dict[str, Any] | None:
        return {"task_index": job.episode} if self.spec.envs[job.env].sweep else None

    @staticmethod
    def _finish(row: dict[str, Any], episode) -> dict[str, Any]:
        rollout = episode.to_dict()
        row.update({**episode_columns(rollout), "error": None, ROLLOUT_FIELD: rollout})
        return row

    @staticmethod
    def _fail(row: dict[str, Any], error: Exception) -> dict[str, Any]:
        row.update({"task": "", "return": 0.0, "won": False, "steps": 0, "invalid_actions": 0,
                    "truncated": False, "prompt_tokens": 0, "completion_tokens": 0, "format_errors": 0,
                    **dict.fromkeys(SCORE_KEYS),
                    "error": f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-3)}", ROLLOUT_FIELD: None})
        return row

    def run(self, job: Job) -> dict[str, Any]:
        """Play one episode: its row, with the rollout under `ROLLOUT_FIELD` (None when the
        env or agent failed; such a row has ``error`` set).

        ``seconds`` is the episode alone: making the env and the agent (data loading, models)
        happens before the clock starts, once per worker.
        """
        row = self._row(job)
        start = time.perf_counter()
        try:
            env, agent = self._env(job.env), self._agent(job.agent)
            start = time.perf_counter()
            episode = run_episode(env, agent, seed=row["seed"], env_id=self.spec.envs[job.env].id,
                                  options=self._options(job))
        except Exception as error:  # a broken env/agent is a result to report, not a crashed run
            self._fail(row, error)
        else:
            self._finish(row, episode)
        row["seconds"] = round(time.perf_counter() - start, 6)
        return row

    def run_many(self, jobs: list[Job]) -> Iterator[dict[str, Any]]:
        """Play jobs of one (env, agent) pair together, in lockstep; rows as episodes finish."""
        if len(jobs) == 1 or self.slots(jobs[0]) == 1:
            yield from (self.run(job) for job in jobs)
            return
        first = jobs[0]
        envs = [self._slot_env(first.env, slot) for slot in range(min(self.slots(first), len(jobs)))]
        rows = [self._row(job) for job in jobs]
        done = set()
        try:
            for k, episode in run_episodes(envs, self._agent(first.agent), [row["seed"] for row in rows],
                                           env_id=self.spec.envs[first.env].id,
                                           options=[self._options(job) for job in jobs]):
                done.add(k)
                rows[k]["seconds"] = round(episode.seconds, 6)
                yield self._finish(rows[k], episode)
        except Exception as error:  # the unfinished episodes of the group are reported, not lost
            for k, row in enumerate(rows):
                if k not in done:
                    row["seconds"] = 0.0
                    yield self._fail(row, error)

    def _slot_env(self, index: int, slot: int) -> gym.Env:
        """The env of slot `slot` of a batched agent (slot 0 is the worker's usual env)."""
        if slot == 0:
            return self._env(index)
        key = (index, slot)
        if key not in self._slot_envs:
            env = self.spec.envs[index]
            limit = {} if self.spec.max_steps is None else {"max_episode_steps": self.spec.max_steps}
            self._slot_envs[key] = gym.make(env.id, **limit, **env.make_kwargs)
        return self._slot_envs[key]

    def close(self) -> None:
        for env in [*self._envs.values(), *self._slot_envs.values()]:
            env.close()
        self._envs.clear()
        self._slot_envs.clear()
        for agent in self._agents.values():
            agent.close()
        self._agents.clear()
