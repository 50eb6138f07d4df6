"""Agents by name, so benchmark specs and the command line can say ``random`` or ``ppo``.

A name is a key of `AGENTS` (``"random"``, ``"expert"``, ``"ppo"``) or any ``"module:Class"``
path; `make_agent` imports it lazily and calls it with the spec's kwargs, so research agents
plug in with `register_agent` (or by path) without the runner knowing them.
"""

from __future__ import annotations

import importlib
from typing import Any

from lmgym.agents.base import Agent

AGENTS: dict[str, str] = {
    "random": "lmgym.agents.base:RandomAgent",
    "expert": "lmgym.agents.base:ExpertAgent",
    "ppo": "lmgym.agents.ppo_agent:PPOAgent",
}


def register_agent(name: str, target: str) -> None:
    """Register ``name`` for the class at ``"module:Class"``."""
    if ":" not in target:
        raise ValueError(f"agent target must look like 'module:Class', got {target!r}")
    AGENTS[name] = target


def resolve_agent(kind: str) -> type[Agent]:
    """The class a registered name or ``"module:Class"`` path names."""
    target = AGENTS.get(kind, kind)
    if ":" not in target:
        raise KeyError(f"unknown agent {kind!r}; registered: {sorted(AGENTS)} (or give 'module:Class')")
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if cls is None:
        raise KeyError(f"module {module_name!r} has no class {class_name!r}")
    return cls


def make_agent(kind: str, **kwargs: Any) -> Agent:
    return resolve_agent(kind)(**kwargs)
