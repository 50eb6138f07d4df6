"""Agents by name, so benchmark specs and the command line can say ``random`` or ``ppo``.

A name is a key of `AGENTS` (``"random"``, ``"expert"``, ``"ppo"``, ``"teacher"``) or any ``"module:Class"``
path; `make_agent` imports it lazily and calls it with the spec's kwargs, so research agents
plug in with `register_agent` (or by path) without the runner knowing them.
"""

from __future__ import annotations

from typing import Any

from lmgym.agents.base import Agent
from lmgym.entrypoints import load_entry_point

AGENTS: dict[str, str] = {
    "random": "lmgym.agents.base:RandomAgent",
    "expert": "lmgym.agents.base:ExpertAgent",
    "ppo": "lmgym.agents.ppo_agent:PPOAgent",
    "teacher": "lmgym.agents.teacher:TeacherAgent",
    "lm": "lmgym.agents.lm:LMAgent",
    "preact": "lmgym.agents.preact:PReActAgent",
    "dllm-react": "lmgym.agents.preact:DiffusionReActAgent",
    # PromptEdit prompt search at a budget of generator calls (lmgym.agents.prompt_search, lmgym.agents.aod);
    # specs name random-edits "random" ({name: random, kind: random-edits}): the generic random agent knows no budget
    "static": "lmgym.agents.prompt_search.simple:StaticPrompt",
    "random-edits": "lmgym.agents.prompt_search.simple:RandomEdits",
    "hill-climb": "lmgym.agents.prompt_search.simple:HillClimb",
    "evoprompt-ga": "lmgym.agents.prompt_search.evoprompt:EvoPromptGA",
    "evoprompt-de": "lmgym.agents.prompt_search.evoprompt:EvoPromptDE",
    "promptbreeder": "lmgym.agents.prompt_search.promptbreeder:PromptBreeder",
    "opro": "lmgym.agents.prompt_search.opro:OPRO",
    "gepa": "lmgym.agents.prompt_search.gepa:GEPA",
    "aod-editor": "lmgym.agents.aod:AoDEditor",
    "aod-ppo": "lmgym.agents.aod:AoDPolicy",
    "aod-scalar": "lmgym.agents.aod:AoDScalar",
    # KV-communicating teams over one backbone (lmgym.agents.kvteam)
    "single": "lmgym.agents.kvteam:SingleAgent",
    "textmas": "lmgym.agents.kvteam:TextMASAgent",
    "latentmas": "lmgym.agents.kvteam:LatentMASAgent",
    "diffmas": "lmgym.agents.kvteam:DiffMASAgent",
}


def register_agent(name: str, target: str) -> None:
    """Register ``name`` for the class at ``"module:Class"``."""
    if ":" not in target:
        raise ValueError(f"agent target must look like 'module:Class', got {target!r}")
    AGENTS[name] = target


def resolve_agent(kind: str) -> type[Agent]:
    """The class a registered name or ``"module:Class"`` path names."""
    if kind not in AGENTS and ":" not in kind:
        raise KeyError(f"unknown agent {kind!r}; registered: {sorted(AGENTS)} (or give 'module:Class')")
    return load_entry_point(kind, aliases=AGENTS, what="agent")


def make_agent(kind: str, **kwargs: Any) -> Agent:
    return resolve_agent(kind)(**kwargs)
