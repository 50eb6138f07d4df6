"""What every backend runs: one episode of the spec, as one result row.

An `EpisodeWorker` builds its envs and agents lazily from the spec and keeps them, so a worker
process or Ray actor pays an env's data loading once. Each job resets the env and the agent
with the job's seed, so a row does not depend on which worker ran it or what ran before.
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

import lmgym  # noqa: F401  registers the ids in a fresh worker process
from lmgym.agents.base import Agent
from lmgym.agents.registry import make_agent
from lmgym.agents.runner import run_episode
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


def _final_score(info_json: str) -> float | None:
    score = json.loads(info_json).get("score")
    return float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None


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
        "score": _final_score(last.get("info_json", "{}")),
    }


class EpisodeWorker:
    def __init__(self, spec: BenchmarkSpec):
        self.spec = spec
        self._envs: dict[int, gym.Env] = {}
        self._agents: dict[int, Agent] = {}

    def _env(self, index: int) -> gym.Env:
        if index not in self._envs:
            env = self.spec.envs[index]
            limit = {} if self.spec.max_steps is None else {"max_episode_steps": self.spec.max_steps}
            self._envs[index] = gym.make(env.id, **limit, **env.kwargs)
        return self._envs[index]

    def _agent(self, index: int) -> Agent:
        if index not in self._agents:
            agent = self.spec.agents[index]
            self._agents[index] = make_agent(agent.target, **agent.kwargs)
        return self._agents[index]

    def run(self, job: Job) -> dict[str, Any]:
        """Play one episode: its row, with the rollout under `ROLLOUT_FIELD` (None when the
        env or agent failed; such a row has ``error`` set)."""
        env_spec, agent_spec = self.spec.envs[job.env], self.spec.agents[job.agent]
        seed = self.spec.seed(job.episode)
        row: dict[str, Any] = {
            "key": job_key(self.spec, job), "env": env_spec.name, "env_id": env_spec.id,
            "agent": agent_spec.name, "episode": job.episode, "seed": seed,
            "task_index": job.episode if env_spec.sweep else None,
        }
        start = time.perf_counter()
        try:
            options = {"task_index": job.episode} if env_spec.sweep else None
            episode = run_episode(self._env(job.env), self._agent(job.agent), seed=seed, env_id=env_spec.id,
                                  options=options)
        except Exception as error:  # a broken env/agent is a result to report, not a crashed run
            row.update({"task": "", "return": 0.0, "won": False, "steps": 0, "invalid_actions": 0,
                        "truncated": False, "prompt_tokens": 0, "completion_tokens": 0, "score": None,
                        "error": f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-3)}",
                        ROLLOUT_FIELD: None})
        else:
            rollout = episode.to_dict()
            row.update({**episode_columns(rollout), "error": None, ROLLOUT_FIELD: rollout})
        row["seconds"] = round(time.perf_counter() - start, 6)
        return row

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
