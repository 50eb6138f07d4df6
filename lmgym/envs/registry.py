"""Every lmgym environment id, registered with Gymnasium on ``import lmgym``.

Entry points are strings, so registering imports no family code: a data-backed env loads
its data only when made. `ENVS` also records what `lmgym list` prints and what the test
matrix needs to know (which data folder an id reads, which optional extra it needs).

Ids follow ``lmgym/<Family>[-<Variant>]-v<N>``; anything that changes results bumps N.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

NAMESPACE = "lmgym"


@dataclass(frozen=True)
class EnvEntry:
    id: str
    entry_point: str
    description: str
    max_episode_steps: int
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: Sub-folder of LMGYM_DATA the env reads (None: runs with no data at all).
    requires_data: str | None = None
    #: Import names of optional packages the env needs (checked by tests and `lmgym list`).
    requires_modules: tuple[str, ...] = ()
    #: Share of seeded episodes the env's own expert must win (the test matrix checks it);
    #: below 1.0 only where the env says why (e.g. WebShop's search can miss the product).
    expert_min_success: float = 1.0


ENVS: dict[str, EnvEntry] = {}


def register_env(entry: EnvEntry) -> None:
    ENVS[entry.id] = entry
    if entry.id not in gym.registry:
        gym.register(
            id=entry.id,
            entry_point=entry.entry_point,
            max_episode_steps=entry.max_episode_steps,
            kwargs=dict(entry.kwargs),
        )


def _register_all() -> None:
    # --- KeyDoor: the tiny procedural env that exercises the whole stack --------------
    register_env(EnvEntry(
        "lmgym/KeyDoor-v0", "lmgym.envs.keydoor:KeyDoorEnv",
        "Find a key in a few rooms and unlock the vault (procedural, learnable in seconds)",
        max_episode_steps=30,
    ))
    register_env(EnvEntry(
        "lmgym/KeyDoor-Large-v0", "lmgym.envs.keydoor:KeyDoorEnv",
        "KeyDoor on a 3x3 house with distractor items",
        max_episode_steps=60, kwargs={"size": 3, "num_distractors": 3},
    ))


_register_all()
