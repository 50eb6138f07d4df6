"""The agent's random stream is independent of the env's (`lmgym.agents.runner.agent_seed`).

Before the rule, `run_episode` reset the env and the agent with the same seed, and
`RandomAgent`'s generator was the env's `np_random` stream: over 2,000 HotPotQA seeds the task
drawn (of 588) and the random agent's first action (of 12) correlated at 0.997.
"""

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import lmgym  # noqa: F401
from lmgym.agents import RandomAgent, run_episode
from lmgym.agents.runner import agent_seed
from lmgym.data import DataNotFoundError
from lmgym.envs.core import TextEnv
from lmgym.envs.splits import task_id

SEEDS = range(2000)


class DrawsATask(TextEnv):
    """A task drawn from np_random (of 588) and 12 admissible actions, as HotPotQA's first step."""

    def _reset(self, options):
        self.task_index = int(self.np_random.integers(588))
        self.task_id = task_id(self.task_index)
        return "question", {"task": str(self.task_index), "admissible_actions": [f"a{i:02d}" for i in range(12)]}

    def _step(self, action):
        return "answer", 0.0, True, {"task": str(self.task_index), "action_valid": True}


def _correlation(seeds, first_task_and_action) -> float:
    pairs = np.array([first_task_and_action(s) for s in seeds], dtype=float)  # (n, 2)
    return float(np.corrcoef(pairs.T)[0, 1])


def test_the_task_drawn_and_the_random_agents_first_action_are_uncorrelated():
    env, agent = DrawsATask(), RandomAgent()

    def first(seed):
        episode = run_episode(env, agent, seed=seed, env_id="probe")
        return env.task_index, int(episode.steps[0].action[1:])

    # 2,000 independent pairs: |r| above 0.1 has probability below 1e-5
    assert abs(_correlation(SEEDS, first)) < 0.1


def test_agent_seed_is_a_different_stream_from_the_same_number():
    env_draws = [np.random.default_rng(s).random() for s in SEEDS]  # what gymnasium seeds np_random with
    agent_draws = [np.random.default_rng(agent_seed(s)).random() for s in SEEDS]
    assert abs(np.corrcoef(env_draws, agent_draws)[0, 1]) < 0.1
    assert len({agent_seed(s) for s in SEEDS}) == len(SEEDS) and all(agent_seed(s) >= 0 for s in SEEDS)
    assert agent_seed(None) is None


def test_agent_seed_is_the_same_in_every_process():
    code = "from lmgym.agents.runner import agent_seed; print([agent_seed(s) for s in (0, 1, 2**40)])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "3"}).stdout
    assert out.strip() == str([agent_seed(s) for s in (0, 1, 2**40)])


class RecordsItsFirstChoice(RandomAgent):
    def decide(self, observation, info):
        decision = super().decide(observation, info)
        self.first_choice = info["admissible_actions"].index(decision.action)
        return decision


def test_hotpotqa_first_question_and_random_first_action_are_uncorrelated():
    try:
        env = gym.make("lmgym/HotPotQA-v0")
    except DataNotFoundError as error:
        pytest.skip(f"HotPotQA data missing: {str(error).splitlines()[0]}")
    agent = RecordsItsFirstChoice()
    questions = {q.id: k for k, q in enumerate(env.unwrapped.questions)}

    def first(seed):
        run_episode(env, agent, seed=seed, env_id="lmgym/HotPotQA-v0", max_steps=1)
        return questions[env.unwrapped.question.id], agent.first_choice

    assert abs(_correlation(SEEDS, first)) < 0.1
