"""Run an agent in an env for one episode and record it in the rollout format."""

from __future__ import annotations

import json
import time
from typing import Any

import gymnasium as gym
import numpy as np

from lmgym.agents.base import Agent
from lmgym.rollouts import Episode, Step, split_info


def agent_seed(seed: int | None) -> int | None:
    """The agent's seed for the episode whose env is reset with `seed`.

    The env keeps `seed` itself (so ``env.reset(seed=s)`` replays a benchmark episode), and the
    agent draws from the first child of ``numpy.random.SeedSequence(seed)``: spawned sequences
    are statistically independent of their parent's stream (numpy's SeedSequence docs), so an
    agent's random choices are not tied to the task the env drew with the same number.
    """
    if seed is None:
        return None
    child = np.random.SeedSequence(seed).spawn(1)[0]
    return int(child.generate_state(1, np.uint64)[0] >> np.uint64(1))  # a non-negative int64


def run_episode(
    env: gym.Env,
    agent: Agent,
    *,
    seed: int | None,
    env_id: str | None = None,
    options: dict[str, Any] | None = None,
    max_steps: int | None = None,
) -> Episode:
    """Reset `env` with `seed` and `agent` with `agent_seed(seed)`, act until the episode ends.

    `max_steps` is a safety net for unwrapped envs; registered envs end through their
    `TimeLimit`. The run is a function of `seed`; the agent's stream is independent of the env's.
    """
    env_id = env_id or (env.spec.id if env.spec else type(env.unwrapped).__name__)
    observation, info = env.reset(seed=seed, options=options)
    agent.reset(seed=agent_seed(seed), env_id=env_id)
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
