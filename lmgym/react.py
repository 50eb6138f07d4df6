"""The ReAct turn format in one place: render a transcript, parse a turn, window the history.

ReAct (Yao et al. 2023, arXiv:2210.03629): each turn the model reads an observation and writes
a line of reasoning and an action::

    Thought: <reasoning>
    Action: <action>

A transcript is rendered as chat messages, so one function serves every model (SmolLM2's chat
template, an endpoint's chat API, the layout of the tiny models trained here, which is the
same conversation with ``[SEP]``/``[EOS]`` around the model's turns)::

    system     instructions (+ "Here are examples" and the demonstrations as plain text)
    (or each demonstration as earlier user/assistant turns of its own)
    user       Task: <task>\\nObservation: <first observation>\\n
    assistant  Thought: ...\\nAction: ...
    user       Observation: <next observation>\\n
    ...

Text only: no torch, no env. Env families describe themselves with a `ReActPrompt` (their
instructions and grammar, ``lmgym/envs/<family>/prompt.py``); `lmgym.agents.lm.LMAgent` prompts
with these functions and the SFT data builders (`lmgym.training.transcripts`) render training
transcripts with the same ones and the same history windows, so a model is prompted exactly as
it was trained. Demonstrations are given to the renderer, never produced by it
(`lmgym.agents.demonstrations` plays them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

REASON_PREFIX = "Thought: "
ACTION_PREFIX = "Action: "
#: The line that opens a transcript whose earliest turns were cut.
OMITTED = "(earlier steps omitted)\n"


# --- one turn: what the model writes, and reading it back -------------------------------------


@dataclass
class Span:
    kind: str  # "reason" or "act"
    start: int  # character offsets into the completion, end exclusive
    end: int


def format_completion(reasoning: str, action: str) -> tuple[str, list[Span]]:
    """Render a ReAct completion ``Thought: ...\\nAction: ...`` and its spans."""
    text, spans = "", []
    if reasoning:
        start = len(REASON_PREFIX)
        text = f"{REASON_PREFIX}{reasoning}\n"
        spans.append(Span("reason", start, start + len(reasoning)))
    start = len(text) + len(ACTION_PREFIX)
    text += f"{ACTION_PREFIX}{action}"
    spans.append(Span("act", start, start + len(action)))
    return text, spans


@dataclass
class ParsedCompletion:
    reasoning: str
    action: str  # the text after the first "Action:" (the whole last line when there is none)
    spans: list[Span]
    has_action: bool  # False: the completion breaks the Thought/Action format
    turn_end: int  # characters of the text that make up the turn


def parse_completion(text: str) -> ParsedCompletion:
    """Read a model's ReAct turn: the reasoning after ``Thought:`` and the action on the first
    ``Action:`` line (prefixes matched case-insensitively), with their character spans.

    ``turn_end`` is where that action line ends: what a model writes after it (another
    thought, an imagined observation) is not part of its turn.

    A completion without an ``Action:`` line is a format error; its last non-empty line is
    taken as the action (models often answer with the bare command), and the span says so.
    """
    lower = text.lower()
    marker = lower.find(ACTION_PREFIX.strip().lower())
    if marker >= 0:
        start = marker + len(ACTION_PREFIX.strip())
        line_end = text.find("\n", start)
        end = turn_end = len(text) if line_end < 0 else line_end
        while start < end and text[start] in " >":  # "Action: > go to desk 1" (ReAct's ALFWorld style)
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        has_action, head = True, text[:marker]
    else:
        lines = [(m, m + len(line)) for m, line in _line_starts(text) if line.strip()]
        start, end = lines[-1] if lines else (0, 0)
        turn_end = len(text)
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        has_action, head = False, text[:start]
    spans = []
    thought = head.lower().find(REASON_PREFIX.strip().lower())
    r_start = thought + len(REASON_PREFIX.strip()) if thought >= 0 else 0
    r_end = len(head.rstrip())
    while r_start < r_end and head[r_start].isspace():
        r_start += 1
    if r_end > r_start:
        spans.append(Span("reason", r_start, r_end))
    spans.append(Span("act", start, end))
    return ParsedCompletion(text[r_start:r_end] if r_end > r_start else "", text[start:end], spans, has_action, turn_end)


def _line_starts(text: str):
    offset = 0
    for line in text.split("\n"):
        yield offset, line
        offset += len(line) + 1


# --- what a family tells the model ----------------------------------------------------------


@dataclass(frozen=True)
class DemonstrationSource:
    """Where a family's few-shot examples come from: agent `agent` (a registered name) playing
    *training* tasks of env `env`, seeds from `seeds_from` on (far from the ``0..N`` seeds
    benchmarks evaluate on), keeping won episodes of at most `max_steps` steps."""

    env: str
    agent: str = "teacher"
    seeds_from: int = 1_000_000
    count: int = 2
    max_steps: int = 12


@dataclass(frozen=True)
class ReActPrompt:
    """A family's ReAct prompt: its instructions (which state the env's action grammar), where its
    demonstrations come from, whether the admissible actions are listed under each observation,
    whether a model's action is snapped to the closest admissible one, which verbs take free text
    (never snapped: ``finish[...]`` answers, ``search[...]`` queries) and the answer length."""

    family: str
    instructions: str
    demonstrations: DemonstrationSource | None = None
    show_actions: bool = False
    snap: bool = True
    free_form_verbs: tuple[str, ...] = ()
    max_new_tokens: int = 64


#: The prompt of a family without one: the turn format, and the env's admissible actions listed.
DEFAULT_PROMPT = ReActPrompt(
    family="default",
    instructions=("Solve the task by acting in the environment. Each turn, read the observation, then write one "
                  "line of reasoning and one action:\nThought: <your reasoning>\nAction: <one action>\n"),
    show_actions=True, max_new_tokens=96,
)


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


# --- transcripts as chat messages -----------------------------------------------------------


@dataclass
class Turn:
    """One step of a transcript: what the agent read, and what it wrote."""

    observation: str
    completion: str = ""
    actions: tuple[str, ...] = ()  # the admissible actions shown with the observation, if any


@dataclass(frozen=True)
class Demonstration:
    """A solved episode shown to the model before its own: its task and its turns."""

    task: str
    turns: tuple[Turn, ...]

    def messages(self) -> list[dict[str, str]]:
        return render_messages("", self.task, list(self.turns))

    def text(self) -> str:
        """The demonstration as plain text (how it appears inside a system message)."""
        return messages_as_text(self.messages())


def _user_text(turn: Turn, *, task: str | None, omitted: bool = False) -> str:
    head = f"Task: {task}\n" if task is not None else ""
    listed = f"Admissible actions: {', '.join(turn.actions)}\n" if turn.actions else ""
    return f"{head}{OMITTED if omitted else ''}Observation: {turn.observation.strip()}\n{listed}"


def render_messages(system: str, task: str, turns: list[Turn], first_kept: int = 0,
                    demonstrations: Sequence[Demonstration] = ()) -> list[dict[str, str]]:
    """Chat messages for a transcript whose last turn has no completion yet.

    Turns before `first_kept` are dropped (an ``(earlier steps omitted)`` line says so); the
    task always stays, in the first user message. `demonstrations` come between the system
    message and the episode, each as its own user/assistant turns.
    """
    messages = [{"role": "system", "content": system}] if system else []
    for demonstration in demonstrations:
        messages.extend(demonstration.messages())
    for index in range(first_kept, len(turns)):
        turn = turns[index]
        first = index == first_kept
        messages.append({"role": "user", "content": _user_text(turn, task=task if first else None,
                                                                omitted=first and first_kept > 0)})
        if turn.completion:
            messages.append({"role": "assistant", "content": turn.completion})
    return messages


def messages_as_text(messages: list[dict[str, str]]) -> str:
    """A transcript as plain text (how demonstrations appear inside the system message)."""
    return "".join(m["content"] if m["role"] != "assistant" else m["content"] + "\n" for m in messages)


def system_text(prompt: ReActPrompt, *, instructions: bool, demonstrations: Sequence[Demonstration] = ()) -> str:
    """The system message: the family's instructions (if `instructions`), then `demonstrations`
    as text, numbered."""
    parts = [prompt.instructions.strip() + "\n"] if instructions else []
    if demonstrations:
        parts.append("Here are examples.\n")
        parts.extend(f"Example {k + 1}:\n{demo.text()}" for k, demo in enumerate(demonstrations))
        parts.append("Now it is your turn.\n")
    return "\n".join(parts)


# --- token budgets and the history window ----------------------------------------------------

#: Tokens a chat template adds around each message (roles, delimiters): an allowance, not exact.
MESSAGE_OVERHEAD = 6
#: A tokenizer's count of a text's tokens.
Counter = Callable[[str], int]


def observation_tokens(count: Counter, turn: Turn) -> int:
    """The budget a turn's observation (and listed actions) takes, by the tokenizer's `count`."""
    return count(turn.observation) + MESSAGE_OVERHEAD + sum(count(a) + 1 for a in turn.actions)


def completion_tokens(count: Counter, completion: str) -> int:
    return count(completion) + MESSAGE_OVERHEAD


def transcript_budget(count: Counter, system: str, task: str, max_prompt_tokens: int,
                      demonstrations: Sequence[Demonstration] = ()) -> int:
    """What is left for the turns once the system message, the demonstrations given as turns
    and the task line are counted."""
    shown = [message for demo in demonstrations for message in demo.messages()]
    return (max_prompt_tokens - count(system + messages_as_text(shown)) - count(task)
            - (2 + len(shown)) * MESSAGE_OVERHEAD)


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
