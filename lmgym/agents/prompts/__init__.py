"""ReAct prompts per env family: the instructions, few-shot demonstrations, and the transcript.

Each family has a YAML file beside this module (data, not code paths): the instructions that
state the env's action grammar, where its few-shot demonstrations come from (an env id whose
*training* tasks are played by a demonstrator: seeds from ``seeds_from`` on, far from the
``0..N`` seeds benchmarks evaluate on), whether the admissible actions are shown, whether a
model's action is snapped to the closest admissible one, and which verbs take free text (never
snapped: ``finish[...]`` answers, ``search[...]`` queries).

A transcript is rendered as chat messages, so one function serves every model (SmolLM2's chat
template, an endpoint's chat API, the layout of the tiny models trained here, which is the
same conversation with ``[SEP]``/``[EOS]`` around the model's turns)::

    system     instructions (+ "Here are examples" and the demonstrations as plain text)
    (or, with ``demos``, each demonstration as earlier user/assistant turns of its own)
    user       Task: <task>\\nObservation: <first observation>\\n
    assistant  Thought: ...\\nAction: ...
    user       Observation: <next observation>\\n
    ...

`render_messages` cuts the history from the left (the newest observation is never cut):
`lmgym.agents.lm.LMAgent` chooses how many of the oldest turns to drop, and the SFT dataset
builders (`lmgym.training.transcripts`) render training transcripts with the same function, so a model
is prompted exactly as it was trained.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lmgym.envs.registry import family_of
from lmgym.rollouts import format_completion

PROMPTS_DIR = Path(__file__).resolve().parent
OMITTED = "(earlier steps omitted)\n"


@dataclass(frozen=True)
class Demonstrations:
    """Where a family's few-shot examples come from: `agent` playing training tasks of `env`."""

    env: str
    agent: str = "teacher"
    seeds_from: int = 1_000_000
    count: int = 2
    max_steps: int = 12
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FamilyPrompt:
    family: str
    instructions: str
    examples: Demonstrations | None
    show_actions: bool = False
    snap: bool = True
    free_form_verbs: tuple[str, ...] = ()
    max_new_tokens: int = 64


@functools.lru_cache(maxsize=None)
def load_family_prompt(family: str) -> FamilyPrompt:
    """The prompt of `family` (``"ALFWorld"``, ...), the default one where it has none."""
    path = PROMPTS_DIR / f"{family.lower()}.yaml"
    if not path.exists():
        path = PROMPTS_DIR / "default.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    examples = data.pop("examples", None)
    data["free_form_verbs"] = tuple(data.get("free_form_verbs") or ())
    return FamilyPrompt(examples=Demonstrations(**examples) if examples else None, **data)


def prompt_for(env_id: str | None) -> FamilyPrompt:
    return load_family_prompt(family_of(env_id) if env_id else "default")


@dataclass
class Turn:
    """One step of a transcript: what the agent read, and what it wrote."""

    observation: str
    completion: str = ""
    actions: tuple[str, ...] = ()  # the admissible actions shown with the observation, if any


def user_text(turn: Turn, *, task: str | None, omitted: bool = False) -> str:
    head = f"Task: {task}\n" if task is not None else ""
    listed = f"Admissible actions: {', '.join(turn.actions)}\n" if turn.actions else ""
    return f"{head}{OMITTED if omitted else ''}Observation: {turn.observation.strip()}\n{listed}"


def render_messages(system: str, task: str, turns: list[Turn], first_kept: int = 0,
                    demos: tuple[dict[str, str], ...] = ()) -> list[dict[str, str]]:
    """Chat messages for a transcript whose last turn has no completion yet.

    Turns before `first_kept` are dropped (an ``(earlier steps omitted)`` line says so); the
    task always stays, in the first user message. `demos` (demonstrations as chat messages,
    `demonstration_messages`) come between the system message and the episode.
    """
    messages = [{"role": "system", "content": system}] if system else []
    messages.extend(demos)
    for index in range(first_kept, len(turns)):
        turn = turns[index]
        first = index == first_kept
        messages.append({"role": "user", "content": user_text(turn, task=task if first else None,
                                                               omitted=first and first_kept > 0)})
        if turn.completion:
            messages.append({"role": "assistant", "content": turn.completion})
    return messages


@dataclass(frozen=True)
class PromptProfile:
    """How a transcript is prompted: what a checkpoint trained on it records (``react_prompt``
    in its meta) so `lmgym.agents.lm.LMAgent` prompts it the same way."""

    instructions: bool = False
    few_shot: int = 0
    show_actions: bool = False
    max_prompt_tokens: int = 384

    @classmethod
    def from_meta(cls, react_prompt: dict[str, Any]) -> "PromptProfile":
        """The profile a checkpoint's meta (``react_prompt``, as `lmgym.training.lm` writes it) records."""
        return cls(instructions=react_prompt["instructions"], few_shot=react_prompt["few_shot"],
                   show_actions=react_prompt.get("show_actions", False),
                   max_prompt_tokens=react_prompt["max_prompt_tokens"])


#: Tokens a chat template adds around each message (roles, delimiters): an allowance, not exact.
MESSAGE_OVERHEAD = 6


def observation_tokens(count, turn: Turn) -> int:
    """The budget a turn's observation (and listed actions) takes, by the tokenizer's `count`."""
    return count(turn.observation) + MESSAGE_OVERHEAD + sum(count(a) + 1 for a in turn.actions)


def completion_tokens(count, completion: str) -> int:
    return count(completion) + MESSAGE_OVERHEAD


def transcript_budget(count, system: str, task: str, max_prompt_tokens: int) -> int:
    """What is left for the turns once the system message and the task line are counted."""
    return max_prompt_tokens - count(system) - count(task) - 2 * MESSAGE_OVERHEAD


def advance_window(lengths: list[int], first_kept: int, budget: int) -> int:
    """The first turn a transcript keeps, given each turn's tokens and the transcript's budget.

    Nothing moves while the kept turns fit. When they overflow, the cut jumps ahead until they
    fill at most 3/4 of the budget, so the next turns keep the same beginning (a session's KV
    cache stays valid) instead of moving the cut every step. The newest turn is always kept.
    """
    newest = len(lengths) - 1
    if sum(lengths[first_kept:]) <= budget:
        return first_kept
    while first_kept < newest and sum(lengths[first_kept:]) > 0.75 * budget:
        first_kept += 1
    return first_kept


def messages_as_text(messages: list[dict[str, str]]) -> str:
    """A transcript as plain text (how demonstrations appear inside the system message)."""
    return "".join(m["content"] if m["role"] != "assistant" else m["content"] + "\n" for m in messages)


def system_text(prompt: FamilyPrompt, *, instructions: bool, few_shot: int,
                demos: tuple[str, ...] | None = None) -> str:
    """The system message: instructions, then `few_shot` demonstrations of training tasks
    (the family's, or the given `demos`)."""
    parts = [prompt.instructions.strip() + "\n"] if instructions else []
    if demos is None:
        demos = demonstrations(prompt.family, few_shot) if few_shot else ()
    if demos:
        parts.append("Here are examples.\n")
        parts.extend(f"Example {k + 1}:\n{demo}" for k, demo in enumerate(demos))
        parts.append("Now it is your turn.\n")
    return "\n".join(parts)


def demonstrations(family: str, count: int) -> tuple[str, ...]:
    """`count` demonstrations of the family's training tasks, rendered as text transcripts."""
    return tuple(messages_as_text(list(demo)) for demo in demonstration_messages(family, count))


@functools.lru_cache(maxsize=None)
def demonstration_messages(family: str, count: int) -> tuple[tuple[dict[str, str], ...], ...]:
    """`count` demonstrations of the family's training tasks, each as its chat messages.

    The demonstrator plays seeds ``seeds_from, seeds_from + 1, ...`` and the first `count`
    episodes that it wins within ``max_steps`` are kept (short ones keep prompts short).
    """
    import gymnasium as gym

    from lmgym.agents.registry import make_agent
    from lmgym.agents.runner import run_episode

    spec = load_family_prompt(family).examples
    if spec is None:
        raise ValueError(f"family {family!r} has no few-shot demonstrations; use few_shot=0")
    env = gym.make(spec.env, **spec.kwargs)
    agent = make_agent(spec.agent)
    demos: list[tuple[dict[str, str], ...]] = []
    for seed in range(spec.seeds_from, spec.seeds_from + 50 * count):
        episode = run_episode(env, agent, seed=seed, env_id=spec.env, max_steps=spec.max_steps)
        if episode.won and episode.length <= spec.max_steps:
            turns = [Turn(step.observation, step.completion or format_completion(step.reasoning, step.action)[0])
                     for step in episode.steps]
            demos.append(tuple(render_messages("", episode.task, turns)))
            if len(demos) == count:
                break
    env.close()
    if len(demos) < count:
        raise RuntimeError(f"{spec.agent} won only {len(demos)} of the {family} demonstration seeds tried")
    return tuple(demos)


@functools.lru_cache(maxsize=None)
def react_paper_demonstrations(alfworld_folder: Path, task_type: str, count: int = 2) -> tuple[str, ...]:
    """The ReAct paper's own ALFWorld few-shot transcripts for `task_type`, in our turn format.

    ``react_prompts/alfworld_3prompts.json`` (ysymyth/ReAct) holds ``react_<type>_<k>``
    transcripts: ``> think: ...`` lines (answered ``OK.``) and ``> command`` lines followed by
    the observation. A thought becomes the ``Thought:`` of the next command; the older
    ``put X in/on Y`` grammar is kept (the env accepts it).
    """
    names = {"pick_and_place_simple": "put", "pick_clean_then_place_in_recep": "clean",
             "pick_heat_then_place_in_recep": "heat", "pick_cool_then_place_in_recep": "cool",
             "pick_two_obj_and_place": "puttwo", "look_at_obj_in_light": "examine"}
    path = alfworld_folder / "react_prompts" / "alfworld_3prompts.json"
    if not path.exists():
        raise FileNotFoundError(f"the ReAct paper's ALFWorld prompts are not at {path} (ysymyth/ReAct prompts/)")
    prompts = json.loads(path.read_text())
    demos = []
    for k in range(count):
        raw = prompts[f"react_{names[task_type]}_{k}"].strip().split("\n")
        intro, task_line = raw[0], raw[1]
        task = task_line.removeprefix("Your task is to: ")
        turns, thoughts, observation = [], [], intro
        for index, line in enumerate(raw[2:], start=2):
            if line.startswith("> think:"):
                thoughts.append(line.removeprefix("> think:").strip())
            elif line.startswith("> "):
                turns.append(Turn(observation, format_completion(" ".join(thoughts), line[2:].strip())[0]))
                thoughts = []
                observation = raw[index + 1] if index + 1 < len(raw) else ""
        demos.append(messages_as_text(render_messages("", task, turns)))
    return tuple(demos)
