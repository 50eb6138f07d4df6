"""Agents that fail on purpose, named by "module:Class" in the runner tests.

They live in an importable module (not a test file) so spawned worker processes and
subprocesses find them: pytest puts this folder on sys.path, and the tests pass it on.
"""

import os
import signal
from pathlib import Path

from lmgym.agents.base import RandomAgent
from lmgym.agents.runner import agent_seed


class KillProcessOnce(RandomAgent):
    """The random agent, except that the first time it plays the episode of `seed` it SIGKILLs
    its own process (agents are reset with `agent_seed` of the episode seed).

    A marker file records that the kill happened, so the run after the crash goes through.
    """

    name = "random"

    def __init__(self, seed: int, marker: str):
        self.kill_seed = agent_seed(seed)
        self.marker = Path(marker)
        super().__init__()  # calls reset(seed=None)

    def reset(self, *, seed=None, env_id=None):
        super().reset(seed=seed, env_id=env_id)
        if seed == self.kill_seed and not self.marker.exists():
            self.marker.write_text("killed\n")
            os.kill(os.getpid(), signal.SIGKILL)


class RaisesAtSeed(RandomAgent):
    """The random agent, except that it raises in every episode with seed `seed`."""

    def __init__(self, seed: int):
        super().__init__()
        self.episode_seed = seed
        self.bad_seed = agent_seed(seed)

    def reset(self, *, seed=None, env_id=None):
        super().reset(seed=seed, env_id=env_id)
        self.current_seed = seed

    def decide(self, observation, info):
        if self.current_seed == self.bad_seed:
            raise RuntimeError(f"agent broke on seed {self.episode_seed}")
        return super().decide(observation, info)


class RaisesOnce(RandomAgent):
    """The random agent, except that the first episode of `seed` it ever plays raises (a marker
    file remembers it), so a resumed run retries that episode and succeeds."""

    def __init__(self, seed: int, marker: str):
        self.bad_seed = agent_seed(seed)
        self.marker = Path(marker)
        super().__init__()  # calls reset(seed=None)

    def reset(self, *, seed=None, env_id=None):
        super().reset(seed=seed, env_id=env_id)
        if seed == self.bad_seed and not self.marker.exists():
            self.marker.write_text("raised\n")
            raise RuntimeError("a one-off failure")


class BrokenEnv:
    """An env entry point that raises when made: a suite must show it as an error, not drop it."""

    def __init__(self, **kwargs):
        raise OSError("the engine's shared library failed to load")
