"""`TeacherAgent` (agent ``teacher``): the observation-grounded demonstrator of each family.

The privileged experts (agent ``expert``) read the env's hidden state: where every object is,
which product the goal was built from, the gold answer. A model trained on their text learns
to guess. A teacher acts and reasons only on what an agent is shown: the observations so far
and the public info keys (`PUBLIC_INFO_KEYS`: task, admissible actions, action validity,
won). This agent passes it nothing else, so that holds by construction, and
tests/agents/test_teacher.py checks it by stripping every other key from the env's info.

Each family's teacher is text-only logic beside its expert (no torch):

* ALFWorld: `lmgym.envs.alfworld.teacher` (search priors from the train games; ALFWorld-Gen
  ids use the generator's priors);
* WebShop: `lmgym.envs.webshop.teacher` (ranks results and options by the pages' words);
* HotPotQA: `lmgym.envs.hotpotqa.teacher` (reads the pages it searched and answers with a
  span of one of their sentences; on HotPotQA-Gen it reads the generator's known templates).

Its reasoning lines are short and regular: they are what SFT and distillation train on.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from lmgym.agents.base import Agent, Decision
from lmgym.entrypoints import load_entry_point
from lmgym.envs.core import INFO_KEYS
from lmgym.envs.registry import env_name

#: The only info keys a teacher may read: the ones every env publishes to every agent.
PUBLIC_INFO_KEYS = INFO_KEYS

#: Env-name prefix (the id without ``lmgym/`` and version) -> (teacher class, kwargs).
#: The longest matching prefix wins, so ``ALFWorld-Gen-Unseen`` takes the ``ALFWorld-Gen`` entry.
TEACHERS: dict[str, tuple[str, dict[str, Any]]] = {
    "ALFWorld": ("lmgym.envs.alfworld.teacher:ALFWorldTeacher", {"priors": "train"}),
    "ALFWorld-Gen": ("lmgym.envs.alfworld.teacher:ALFWorldTeacher", {"priors": "gen"}),
    "WebShop": ("lmgym.envs.webshop.teacher:WebShopTeacher", {}),
    "HotPotQA": ("lmgym.envs.hotpotqa.teacher:HotPotQATeacher", {"reader": "heuristic"}),
    "HotPotQA-Gen": ("lmgym.envs.hotpotqa.teacher:HotPotQATeacher", {"reader": "gen"}),
}


def public_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """`info` restricted to `PUBLIC_INFO_KEYS` (what a teacher is allowed to read)."""
    return {key: info[key] for key in PUBLIC_INFO_KEYS if key in info}


def teacher_for(env_id: str | None):
    """A fresh teacher for the env `env_id` names (ValueError when no family has one)."""
    name = env_name(env_id or "")
    matches = [prefix for prefix in TEACHERS if name == prefix or name.startswith(prefix + "-")]
    if not matches:
        raise ValueError(f"no grounded teacher for env {env_id!r}; teachers exist for "
                         f"{', '.join(sorted(TEACHERS))} (lmgym/agents/teacher.py)")
    target, kwargs = TEACHERS[max(matches, key=len)]
    return load_entry_point(target, what="teacher")(**kwargs)


class TeacherAgent(Agent):
    """Acts from observations and public info only, one reasoning line per step."""

    name = "teacher"

    def __init__(self) -> None:
        self.teacher = None
        self.reset(seed=None)

    def reset(self, *, seed: int | None = None, env_id: str | None = None) -> None:
        super().reset(seed=seed, env_id=env_id)
        # The teachers are deterministic: the seed is unused, the env id picks the family.
        self.teacher = teacher_for(env_id) if env_id is not None else None

    def decide(self, observation: str, info: dict[str, Any]) -> Decision:
        if self.teacher is None:
            raise RuntimeError("TeacherAgent needs reset(env_id=...) first (run_episode passes it)")
        start = time.perf_counter()
        action, reasoning = self.teacher.act(observation, public_info(info))
        return Decision(action, reasoning=reasoning, seconds=time.perf_counter() - start)
