"""Run an agent in an env for one episode and record it in the rollout format."""

from __future__ import annotations

import json
import time
from typing import Any

import gymnasium as gym

from lmgym.agents.base import Agent
from lmgym.rollouts import Episode, Step, split_info


def run_episode(
    env: gym.Env,
    agent: Agent,
    *,
    seed: int | None,
    env_id: str | None = None,
    options: dict[str, Any] | None = None,
    max_steps: int | None = None,
) -> Episode:
    """Reset `env` and `agent` with `seed`, act until the episode ends, return the `Episode`.

    `max_steps` is a safety net for unwrapped envs; registered envs end through their
    `TimeLimit`. The agent is seeded with the same `seed`, so a run is a function of it.
    """
    env_id = env_id or (env.spec.id if env.spec else type(env.unwrapped).__name__)
    observation, info = env.reset(seed=seed, options=options)
    agent.reset(seed=seed)
    episode = Episode(env_id=env_id, seed=seed, task=str(info.get("task", "")), agent=agent.name,
                      env_kwargs_json=json.dumps(env.spec.kwargs if env.spec else {}, sort_keys=True, default=str))
    while True:
        start = time.perf_counter()
        decision = agent.decide(observation, info)
        seconds = decision.seconds or (time.perf_counter() - start)
        next_observation, reward, terminated, truncated, info = env.step(decision.action)
        typed, info_json = split_info(info)
        episode.steps.append(Step(
            observation=observation, action=decision.action, reward=float(reward),
            terminated=bool(terminated), truncated=bool(truncated), reasoning=decision.reasoning,
            completion=decision.completion, spans=list(decision.spans), info_json=info_json,
            prompt_tokens=decision.prompt_tokens, completion_tokens=decision.completion_tokens,
            seconds=seconds, **typed,
        ))
        observation = next_observation
        if terminated or truncated or (max_steps is not None and len(episode.steps) >= max_steps):
            episode.final_observation = observation
            return episode
