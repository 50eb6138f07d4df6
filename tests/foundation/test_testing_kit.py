"""The registry checks of lmgym.testing can fail: an env that ignores its seed is caught."""

import gymnasium as gym
import pytest
from gymnasium import spaces

from lmgym import testing


class FixedStartEnv(gym.Env):
    """Always the same first observation; the step outcome depends on the seed or not."""

    def __init__(self, seed_matters: bool):
        self.seed_matters = seed_matters
        self.observation_space = spaces.Text(max_length=100)
        self.action_space = spaces.Text(max_length=100)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "start", {"admissible_actions": ["go"]}

    def step(self, action):
        outcome = int(self.np_random.integers(1000)) if self.seed_matters else 0
        return f"outcome{outcome}", 0.0, False, False, {"admissible_actions": ["go"]}


for name, seed_matters in (("SeedBlind", False), ("FixedStart", True)):
    if f"lmgym-test/{name}-v0" not in gym.registry:
        gym.register(f"lmgym-test/{name}-v0", entry_point=FixedStartEnv, max_episode_steps=5,
                     kwargs={"seed_matters": seed_matters})


def test_seeds_differ_catches_an_env_that_ignores_its_seed():
    with pytest.raises(AssertionError, match="same first observation and the same 3 steps"):
        testing.check_seeds_differ("lmgym-test/SeedBlind-v0")


def test_seeds_differ_accepts_a_fixed_start_whose_steps_follow_the_seed():
    testing.check_seeds_differ("lmgym-test/FixedStart-v0")
