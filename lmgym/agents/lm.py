"""Any language model as a ReAct agent: prompts per family, history, action parsing, batching.

``LMAgent`` (registered as agent ``lm``) writes a ``Thought: ...`` line and an ``Action: ...``
line each step (ReAct: Yao et al. 2023, arXiv:2210.03629; the format is `lmgym.react`), from a
prompt of the family's instructions and grammar (its `ReActPrompt`,
``lmgym/envs/<family>/prompt.py``), few-shot demonstrations of training tasks
(`lmgym.agents.demonstrations`, played once), then the episode's transcript. The model is any
`TextBackend` (`lmgym.models.backends`): a local Hugging Face folder (``model="smollm2"`` for the
bundled SmolLM2-135M-Instruct), a masked-diffusion checkpoint, or an OpenAI-compatible endpoint
(``base_url=...``)::

    lmgym rollout lmgym/ALFWorld-Gen-v0 --agent "lm(model=smollm2)" --episodes 5 --out runs/lm.jsonl
    AgentSpec("smollm2", "lm", {"model": "smollm2", "few_shot": 2, "batch_size": 8})

History: the whole transcript, cut from the left to ``max_prompt_tokens`` (``history="tokens"``,
the default), or the last ``history_turns`` turns (``history="turns"``); the instructions, the
demonstrations and the task are always kept. When the transcript outgrows its budget the cut
jumps a quarter of the budget ahead, so a session's KV cache stays valid for the next turns
rather than being re-encoded after every step.

Actions: the text of the first ``Action:`` line (the turn ends there; `lmgym.react.parse_completion`);
where the env lists admissible actions it is snapped to the closest one (rapidfuzz's ``ratio`` at
least ``snap_cutoff``), except for the family's free-text verbs (``finish[...]``, ``search[...]``).
The raw completion stays in the rollout; ``Decision.extra`` records ``format_error`` (no
``Action:`` line), ``snapped``, ``raw_action`` and ``cached_tokens``.

A checkpoint trained here by `lmgym.training.lm` records the prompt it was trained with in its
meta (``react_prompt``): the agent then uses exactly that (instructions on or off, no few-shot,
the same budget) unless told otherwise. The names of `FAMILY_MODELS` stand for a model installed
per family, chosen by each episode's env: ``model="tiny-ar"`` / ``"tiny-mdlm"`` the tiny ReAct
model (`examples/train_tiny_react.py`), ``"tiny-rl"`` the family's best one after multi-turn RL
(`lmgym.training.grpo`, studies/rl.py), ``"smollm2-sft"`` SmolLM2-135M-Instruct fine-tuned (LoRA)
on the family's teacher episodes and ``"smollm2-rl"`` that model after GRPO (studies/ladder.py,
docs/ladder.md; their adapters play on llama.cpp, merged into the base once: `merged_gguf`),
so one agent entry of a benchmark spec
plays every family with its own model.

``batch_size`` > 1 lets `lmgym.agents.runner.run_episodes` (and the benchmark runner) keep that
many episodes in lockstep, one backend call per step for all of them.

Token-in/token-out: where the backend gives token ids (``hf``, ``llamacpp``), each `Decision`
carries the ids of the prompt and of the turn's completion (cut with the turn where the model
wrote past its action line, by the backend's `token_prefix`), and with ``logprobs=True`` the
log-probability of each written token; the runner writes them into the rollout's steps
(`lmgym.rollouts.Step`) for RL trainers. A backend that gives none (an endpoint) leaves them empty.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np

from lmgym.agents.base import Agent, Decision
from lmgym.agents.demonstrations import family_demonstrations, react_paper_demonstrations
from lmgym.envs.alfworld.games import data_folder as alfworld_folder
from lmgym.envs.registry import family_of, family_prompt
from lmgym.models import zoo
from lmgym.models.backends import SamplingParams, TextBackend, make_text_backend
from lmgym.react import (DEFAULT_PROMPT, Demonstration, ReActPrompt, Turn, advance_window, completion_tokens,
                         observation_tokens, parse_completion, render_messages, system_text, transcript_budget)

#: Model names that stand for a model installed per env family: the zoo name (``{family}``: the
#: family, lower case) and the command that installs it. The one home of these aliases: the
#: tiny ReAct models (`examples/train_tiny_react.py`), the best of them after multi-turn RL
#: (studies/rl.py), and the reference ladder's fine-tuned SmolLM2 (studies/ladder.py, docs/ladder.md).
FAMILY_MODELS = {
    "tiny-ar": ("react/{family}-ar", "python examples/train_tiny_react.py --env <a {Family} env> --install"),
    "tiny-mdlm": ("react/{family}-mdlm", "python examples/train_tiny_react.py --env <a {Family} env> --install"),
    "tiny-rl": ("react/{family}-rl", "python studies/rl.py --families {family} --install"),
    "smollm2-sft": ("ladder/{family}-smollm2-sft", "python studies/ladder.py --family {family} --rung smollm2-sft"),
    "smollm2-rl": ("ladder/{family}-smollm2-rl", "python studies/ladder.py --family {family} --rung smollm2-rl"),
}


def installed_family_model(alias: str, family: str) -> Path:
    """The zoo folder `alias` (a key of `FAMILY_MODELS`) stands for in `family`; a family with
    none raises `lmgym.models.zoo.ModelNotInstalled`, one line naming the command that builds it."""
    name, command = FAMILY_MODELS[alias]
    return zoo.path(name.format(family=family.lower()), rebuild=command.format(family=family.lower(), Family=family))



def merged_gguf(folder: Path) -> Path:
    """llama.cpp's file for the LoRA checkpoint `folder`: the adapter merged into its base
    (``"smollm2"``, or the base folder its meta names), written once as an f16 GGUF into the
    cache (`lmgym.data.cache_dir`), named by a hash of the folder's files."""
    import hashlib
    import json

    from lmgym.data import cache_dir

    key = hashlib.sha256(json.dumps(zoo.describe(folder)["files"], sort_keys=True).encode()).hexdigest()[:16]
    out = cache_dir() / "gguf" / f"{folder.name}-{key}.gguf"
    if not out.is_file():
        import torch

        from lmgym.models.checkpoints import load_checkpoint
        from lmgym.models.export import write_gguf

        model, tokenizer, _ = load_checkpoint(folder, dtype=torch.float32)  # the base with the adapter on top
        write_gguf(model, tokenizer, out, dtype="f16", name=folder.name)
    return out


@dataclass
class _Model:
    """A backend and how its model is prompted (what it was trained with, unless overridden)."""

    backend: TextBackend
    few_shot: int | None
    instructions: bool
    show_actions: bool | None
    max_prompt_tokens: int
    max_new_tokens: int | None

    @classmethod
    def build(cls, backend: TextBackend, trained: dict[str, Any], overrides: dict[str, Any]) -> "_Model":
        def pick(key, default):
            return overrides[key] if overrides[key] is not None else trained.get(key, default)

        context = getattr(backend, "max_context", None)
        return cls(backend, pick("few_shot", 0 if trained else None), pick("instructions", True),
                   pick("show_actions", None),
                   pick("max_prompt_tokens", min(4096, context - 128) if context else 4096),
                   trained.get("max_new_tokens"))


@dataclass
class _Slot:
    """One episode's conversation."""

    prompt: ReActPrompt
    model: _Model
    system: str
    seed: int | None
    session: tuple[int, int]
    rng: np.random.Generator
    task: str | None = None
    few_shot: int = 0
    demos: tuple[Demonstration, ...] = ()  # demonstrations as chat turns before the episode
    turns: list[Turn] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)  # tokens of each rendered turn
    first_kept: int = 0


def snap_action(action: str, admissible: list[str], *, free_form_verbs: tuple[str, ...], cutoff: float) -> tuple[str, bool]:
    """The admissible action closest to `action` (exact, case-insensitive, then fuzzy), and
    whether it was changed. Free-text verbs and lists the env does not give stay as written."""
    if not admissible or action in admissible:
        return action, False
    verb = action.split("[", 1)[0].strip().lower()
    if "[" in action and verb in free_form_verbs:
        return action, False
    lowered = {a.lower(): a for a in admissible}
    if action.lower() in lowered:
        return lowered[action.lower()], True
    from rapidfuzz import fuzz, process, utils

    match = process.extractOne(action, admissible, scorer=fuzz.ratio, processor=utils.default_process,
                               score_cutoff=cutoff)
    return (match[0], True) if match else (action, False)


class LMAgent(Agent):
    """A language model acting through ReAct turns (see the module docstring).

    Args:
        model: ``"smollm2"``, a local folder, the model name an endpoint serves, or
            a name of `FAMILY_MODELS` (``"tiny-ar"``, ``"tiny-rl"``, ``"smollm2-sft"``, ...: the model
            installed for the env's family).
        backend: ``"hf"``, ``"diffusion"``, ``"openai"``, a `TextBackend`, or None to pick from
            ``model`` and ``base_url`` (`lmgym.models.backends.make_text_backend`).
        base_url: an OpenAI-compatible endpoint (``http://127.0.0.1:8000/v1``).
        backend_kwargs: more arguments for the backend (device, dtype, threads, api_key_env, ...).
        few_shot: demonstrations in the prompt (None: 0 for a checkpoint trained here, else the
            family's count, or all the given `demonstrations`).
        instructions: state the task format and grammar in a system message (None: as trained, or True).
        history: ``"tokens"`` or ``"turns"``; max_prompt_tokens: the transcript's budget (None:
            what the backend's context leaves, at most 4096); history_turns: turns kept for "turns".
        max_new_tokens: per turn (None: a trained checkpoint's answer length, else the family's).
        temperature, top_p: sampling (0: greedy).
        snap, snap_cutoff: snap actions to the admissible list (None: the family's choice).
        show_actions: list the admissible actions under each observation (None: the family's).
        demonstrations: ``"family"`` (the family's demonstrator on training tasks, played once:
            `lmgym.agents.demonstrations.family_demonstrations`), for ALFWorld ``"react-paper"``
            (the ReAct paper's two transcripts of the episode's task type,
            ``LMGYM_DATA/alfworld/react_prompts``; older ``put`` grammar, accepted by the env), or
            your own `lmgym.react.Demonstration` list (`demonstration_of` makes one from a rollout).
        demonstration_turns: put the demonstrations before the episode as earlier
            user/assistant turns instead of as text in the system message. A small instruct
            model follows the Thought/Action format from turns it has "written" (SmolLM2-135M on
            HotPotQA-Gen: format-error rate 1.00 with demonstrations in the system message,
            docs/preact.md).
        batch_size: episodes played at once by `run_episodes`.
        logprobs: record each written token's log-probability under the model (token ids are
            recorded whenever the backend gives them).
    """

    name = "lm"

    def __init__(self, model: str = "smollm2", backend: str | TextBackend | None = None, *,
                 base_url: str | None = None, backend_kwargs: dict[str, Any] | None = None,
                 few_shot: int | None = None, instructions: bool | None = None,
                 history: Literal["tokens", "turns"] = "tokens", max_prompt_tokens: int | None = None,
                 history_turns: int = 8, max_new_tokens: int | None = None, temperature: float = 0.0,
                 top_p: float = 1.0, snap: bool | None = None, snap_cutoff: float = 80.0,
                 show_actions: bool | None = None,
                 demonstrations: Literal["family", "react-paper"] | Sequence[Demonstration] = "family",
                 demonstration_turns: bool = False, batch_size: int = 1, logprobs: bool = False,
                 name: str | None = None):
        if not isinstance(model, (str, Path)) or not str(model):
            raise ValueError(f"model must be 'smollm2', a local folder or an endpoint's model name, got {model!r}")
        if history not in ("tokens", "turns"):
            raise ValueError(f"history must be 'tokens' or 'turns', got {history!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if isinstance(demonstrations, str):
            if demonstrations not in ("family", "react-paper"):
                raise ValueError(f"demonstrations must be 'family', 'react-paper' or a list of Demonstration, "
                                 f"got {demonstrations!r}")
        else:
            demonstrations = tuple(demonstrations)
            if not all(isinstance(d, Demonstration) for d in demonstrations):
                raise ValueError("demonstrations must be 'family', 'react-paper' or a list of lmgym.react.Demonstration")
        if demonstration_turns and demonstrations == "react-paper":
            raise ValueError("demonstration_turns=True takes the family's or your demonstrations, not 'react-paper'")
        self.demonstrations, self.demonstration_turns = demonstrations, demonstration_turns
        self.model, self.backend_choice, self.base_url = str(model), backend, base_url
        self.backend_kwargs = dict(backend_kwargs or {})
        self.overrides = {"few_shot": few_shot, "instructions": instructions, "show_actions": show_actions,
                          "max_prompt_tokens": max_prompt_tokens}
        self.max_new_tokens = max_new_tokens
        self.history, self.history_turns = history, history_turns
        self.temperature, self.top_p, self.logprobs = temperature, top_p, logprobs
        self.snap, self.snap_cutoff = snap, snap_cutoff
        self.max_slots = batch_size
        if name:
            self.name = name
        self._models: dict[str, _Model] = {}
        self._slots: dict[int, _Slot] = {}
        self._episodes = 0
        if self.model not in FAMILY_MODELS:  # load now: a bad folder or endpoint fails at construction
            self._model_for(None)
        super().reset(seed=None)

    @property
    def backend(self) -> TextBackend:
        """The backend of the model last used (the only one unless ``model`` is a family alias)."""
        return next(reversed(self._models.values())).backend

    def _model_for(self, env_id: str | None) -> "_Model":
        """The model that plays `env_id`: ``model`` itself, or for a name of
        `FAMILY_MODELS` the model installed for the env's family."""
        folder = self.model
        if self.model in FAMILY_MODELS:
            if env_id is None:
                raise ValueError(f"model {self.model!r} is chosen per env family: reset the agent with an env_id")
            folder = str(installed_family_model(self.model, family_of(env_id)))
        if folder not in self._models:
            kwargs = dict(self.backend_kwargs)
            if not isinstance(self.backend_choice, TextBackend):
                # a LoRA adapter plays on llama.cpp, merged into its base; other backends load the folder itself
                from lmgym.models.checkpoints import is_lora_checkpoint  # torch: imported when a model loads

                lora = self.backend_choice in (None, "llamacpp") and is_lora_checkpoint(folder)
                kwargs["model"] = str(merged_gguf(Path(folder))) if lora else folder
                if self.base_url:
                    kwargs["base_url"] = self.base_url
            self._models[folder] = _Model.build(make_text_backend(self.backend_choice, **kwargs), trained_prompt(folder),
                                                self.overrides)
        return self._models[folder]

    # -- episodes -----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, env_id: str | None = None) -> None:
        super().reset(seed=seed, env_id=env_id)
        self.reset_slot(0, seed=seed, env_id=env_id)

    def reset_slot(self, slot: int, *, seed: int | None = None, env_id: str | None = None) -> None:
        if not 0 <= slot < self.max_slots:
            raise ValueError(f"slot {slot} outside 0..{self.max_slots - 1}")
        old = self._slots.get(slot)
        if old is not None:
            old.model.backend.end_session(old.session)
        model = self._model_for(env_id)
        prompt = family_prompt(family_of(env_id)) if env_id else DEFAULT_PROMPT
        few_shot = model.few_shot if model.few_shot is not None else self._default_few_shot(prompt)
        demos: tuple[Demonstration, ...] = ()
        if self.demonstrations == "react-paper":  # they depend on the task type: wait for the first observation
            if prompt.family != "ALFWorld":
                raise ValueError(f"demonstrations='react-paper' exists for ALFWorld only, not {prompt.family}")
            system = ""
        elif self.demonstration_turns:
            demos = self._demonstrations(prompt, few_shot)
            system = system_text(prompt, instructions=model.instructions)
        else:
            system = system_text(prompt, instructions=model.instructions,
                                 demonstrations=self._demonstrations(prompt, few_shot))
        self._episodes += 1
        self._slots[slot] = _Slot(prompt, model, system, seed, (slot, self._episodes), np.random.default_rng(seed),
                                  few_shot=few_shot, demos=demos)

    def _default_few_shot(self, prompt: ReActPrompt) -> int:
        if not isinstance(self.demonstrations, str):
            return len(self.demonstrations)
        return prompt.demonstrations.count if prompt.demonstrations else 0

    def _demonstrations(self, prompt: ReActPrompt, few_shot: int) -> tuple[Demonstration, ...]:
        """The first `few_shot` of the given demonstrations, or the family's."""
        if isinstance(self.demonstrations, str):
            return family_demonstrations(prompt, few_shot)
        if few_shot > len(self.demonstrations):
            raise ValueError(f"few_shot={few_shot} but only {len(self.demonstrations)} demonstrations were given")
        return self.demonstrations[:few_shot]

    def decide(self, observation: str, info: dict[str, Any]) -> Decision:
        return self.decide_slots([0], [observation], [info])[0]

    def decide_slots(self, slots: list[int], observations: list[str], infos: list[dict[str, Any]]) -> list[Decision]:
        start = time.perf_counter()
        for slot in slots:
            if slot not in self._slots:  # used without reset: an episode of an unknown env
                self.reset_slot(slot, seed=None, env_id=self.env_id)
        states = [self._slots[slot] for slot in slots]
        for state, observation, info in zip(states, observations, infos):
            self._observe(state, observation, info)
        completions: list[Any] = [None] * len(states)
        for model in {id(s.model): s.model for s in states}.values():  # one call per model
            rows = [i for i, s in enumerate(states) if s.model is model]
            group = [states[i] for i in rows]
            max_new = self.max_new_tokens or model.max_new_tokens or max(s.prompt.max_new_tokens for s in group)
            params = SamplingParams(max_new_tokens=max_new, temperature=self.temperature, top_p=self.top_p,
                                    stop=("\nObservation:",), logprobs=self.logprobs)
            seeds = [int(s.rng.integers(2**31)) if s.seed is not None else None for s in group]
            answers = model.backend.complete([render_messages(s.system, s.task, s.turns, s.first_kept, s.demos)
                                              for s in group],
                                             params, seeds=seeds, sessions=[s.session for s in group])
            for i, answer in zip(rows, answers):
                completions[i] = answer
        decisions = []
        for state, info, completion in zip(states, infos, completions):
            parsed = parse_completion(completion.text)
            text = completion.text[:parsed.turn_end].rstrip()
            snap = self.snap if self.snap is not None else state.prompt.snap
            action, snapped = (snap_action(parsed.action, list(info.get("admissible_actions") or ()),
                                           free_form_verbs=state.prompt.free_form_verbs, cutoff=self.snap_cutoff)
                               if snap else (parsed.action, False))
            state.turns[-1].completion = text
            state.lengths[-1] += completion_tokens(state.model.backend.count_tokens, text)
            kept = turn_tokens(state.model.backend, completion, text)
            tokens = {} if kept is None else {
                "prompt_token_ids": list(completion.prompt_token_ids or ()),
                "completion_token_ids": list(completion.completion_token_ids[:kept]),
                "token_logprobs": list((completion.token_logprobs or ())[:kept])}
            decisions.append(Decision(
                action=action, reasoning=parsed.reasoning, completion=text, spans=parsed.spans,
                prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
                seconds=time.perf_counter() - start,
                extra={"format_error": not parsed.has_action, "snapped": snapped, "raw_action": parsed.action,
                       "cached_tokens": completion.cached_tokens, "finish_reason": completion.finish_reason},
                **tokens))
        return decisions

    def _observe(self, state: _Slot, observation: str, info: dict[str, Any]) -> None:
        """Add the new observation as a turn, and cut the history to its budget."""
        if state.task is None:
            state.task = str(info.get("task", ""))
            if self.demonstrations == "react-paper":
                demos = react_paper_demonstrations(alfworld_folder(), str(info.get("task_type")),
                                                   state.few_shot) if state.few_shot else ()
                state.system = system_text(state.prompt, instructions=state.model.instructions,
                                           demonstrations=demos)
        show = state.model.show_actions if state.model.show_actions is not None else state.prompt.show_actions
        turn = Turn(observation, actions=tuple(info.get("admissible_actions") or ()) if show else ())
        state.turns.append(turn)
        state.lengths.append(observation_tokens(state.model.backend.count_tokens, turn))
        if self.history == "turns":
            state.first_kept = max(state.first_kept, len(state.turns) - self.history_turns)
            return
        budget = transcript_budget(state.model.backend.count_tokens, state.system, state.task,
                                   state.model.max_prompt_tokens, state.demos)
        state.first_kept = advance_window(state.lengths, state.first_kept, budget)

    def close(self) -> None:
        for model in self._models.values():
            model.backend.close()


def turn_tokens(backend: TextBackend, completion: Any, text: str) -> int | None:
    """How many of the completion's token ids write `text`, the turn (a prefix of
    ``completion.text``): all of them when the turn is the whole completion, else the backend's
    `token_prefix`. None where the ids are unknown (the backend gives none, or cannot align a cut)."""
    ids = completion.completion_token_ids
    if ids is None:
        return None
    if text == completion.text:
        return len(ids)
    return backend.token_prefix(ids, text)


def trained_prompt(model: Any) -> dict[str, Any]:
    """The prompt settings a checkpoint trained on `lmgym.training.transcripts` data records (empty otherwise)."""
    if not isinstance(model, (str, Path)) or not (Path(model).is_dir() or zoo.is_installed(str(model))):
        return {}
    from lmgym.models.checkpoints import read_meta

    return dict(read_meta(model).get("react_prompt") or {})
