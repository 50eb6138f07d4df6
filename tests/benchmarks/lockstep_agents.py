"""A batched agent without a model, named by "module:Class" in the executor tests.

It lives in an importable module (not a test file) so spawned worker processes and Ray actors
find it: pytest puts this folder on sys.path, and the tests pass it on.
"""

import os

import numpy as np

from lmgym.agents.base import Agent, Decision


class LockstepRandom(Agent):
    """Uniform over the admissible actions, like the random agent, in up to `batch_size`
    episodes at once: each slot draws from its own episode's seed, so an episode is the same
    whatever runs beside it. Each decision records the size of the call it was made in and
    the process that made it (``Decision.extra``: the step's ``agent_json``)."""

    name = "lockstep-random"

    def __init__(self, batch_size: int = 1):
        self.max_slots = batch_size
        self.rngs: dict[int, np.random.Generator] = {}

    def reset_slot(self, slot, *, seed=None, env_id=None):
        self.rngs[slot] = np.random.default_rng(seed)

    def reset(self, *, seed=None, env_id=None):
        self.reset_slot(0, seed=seed, env_id=env_id)

    def decide_slots(self, slots, observations, infos):
        decisions = []
        for slot, info in zip(slots, infos):
            actions = info.get("admissible_actions") or [""]
            action = actions[int(self.rngs[slot].integers(len(actions)))]
            decisions.append(Decision(action, extra={"batch": len(slots), "pid": os.getpid()}))
        return decisions

    def decide(self, observation, info):
        return self.decide_slots([0], [observation], [info])[0]
