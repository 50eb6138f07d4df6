"""P-ReAct: a masked-diffusion search agent that decodes its tool call first (DLLM-Searcher).

DLLM-Searcher (arXiv:2602.07035, IlluminatingFish/DLLM-Searcher) observes that a diffusion LM
need not write a ReAct turn left to right: if the tool call's delimiters are written on the
canvas before decoding and the call's positions get a confidence bonus, the call is committed
within the first denoising steps, and the search can run while the rest of the turn (the
reasoning) is still being denoised. Its released engine pre-fills ``<tool_call>`` at position
63 and ``</tool_call>`` at 126 of each 128-token block and adds 0.5 to the confidence of
positions 63..127 (jetengine/engine/scheduler.py, strategy ``toolcall_pre_rl``), but calls the
tool only after the turn ends; here the call is dispatched the moment its span is committed.

Every turn has one fixed response layout (`TurnLayout`), the one the model is trained on
(`lmgym.training.agentic_sft`)::

    [ reasoning ... EOS EOS ][ <tool_call> verb argument EOS EOS </tool_call> ]
      reason_tokens             call_tokens (delimiters at both ends)

EOS fills what a region's text leaves free (LLaDA pads answers with EOS the same way). The call
is written ``search Fan Reinreth`` (verb, space, argument) rather than ``search[Fan Reinreth]``:
with a byte-level BPE the argument's first word then tokenizes as it does in the page it was
read from (`` Fan``, not ``[Fan``), so copying a name is copying tokens. `action_of` turns it
back into the env's grammar.

Two modes behind one class, the whole turn one diffusion block (Fast-dLLM threshold decoding,
`lmgym.models.diffusion.fast_generate`):

* ``serial`` (agent ``dllm-react``): ReAct; decode the whole turn, then the env's ``step``
  runs the search (and pays the tool latency).
* ``parallel`` (agent ``preact``): the delimiters pre-filled and +0.5 on the call region
  (`Priority.for_span`); when the call region has no mask left its search is dispatched on
  ``env.unwrapped.tools`` in a worker thread while the reasoning keeps denoising; the turn
  then waits for the result, and ``env.step`` commits the action, reusing the fetched page
  (`lmgym.envs.hotpotqa.tools`: a search fetched by a tool call is not charged twice). Only
  searches are dispatched: the env charges latency for nothing else (a lookup reads the page
  already fetched).

Each decision records, in seconds from the start of the turn, ``dispatched_s`` (None when no
call was dispatched), ``returned_s`` and ``decoded_s``, and the forward pass after which the
call was committed (``call_committed_pass``) among ``forward_passes``.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from lmgym.agents.base import Agent, Decision
from lmgym.models import zoo
from lmgym.models.tokenizer import chat_prompt_ids
from lmgym.react import Span, Turn, render_messages

OPEN, CLOSE = "<tool_call>", "</tool_call>"
#: Where `lmgym.training.agentic_sft` (``--install``) puts the HotPotQA-Gen model.
DEFAULT_CHECKPOINT = "react/hotpotqa-preact"
MODES = ("parallel", "serial")


def call_text(action: str) -> str:
    """``search[Fan Reinreth]`` -> ``search Fan Reinreth`` (text without brackets stays as is)."""
    if "[" in action and action.rstrip().endswith("]"):
        verb, argument = action.rstrip()[:-1].split("[", 1)
        return f"{verb.strip()} {argument.strip()}"
    return action.strip()


def action_of(call: str) -> str:
    """``search Fan Reinreth`` -> ``search[Fan Reinreth]``: the env's grammar (`call_text` inverted)."""
    verb, _, argument = call.strip().partition(" ")
    return f"{verb}[{argument.strip()}]" if verb else ""


@dataclass(frozen=True)
class TurnLayout:
    """The fixed token layout of one turn: a reasoning region, then the call region."""

    reason_tokens: int = 64
    call_tokens: int = 32

    @property
    def length(self) -> int:
        return self.reason_tokens + self.call_tokens

    def text(self, reasoning: str, action: str) -> str:
        """The turn as text (how earlier turns appear in the prompt)."""
        return f"{reasoning}{OPEN} {call_text(action)}{CLOSE}"

    def encode(self, tokenizer, reasoning: str, action: str) -> list[int] | None:
        """The turn's ``length`` ids in the layout, or None when a region's text does not fit."""
        fill = tokenizer.eos_token_id
        reason = tokenizer.encode(reasoning, add_special_tokens=False)
        opening, closing = delimiter_ids(tokenizer)
        call = tokenizer.encode(" " + call_text(action), add_special_tokens=False)
        free = self.call_tokens - len(opening) - len(call) - len(closing)
        if len(reason) > self.reason_tokens or free < 0:
            return None
        return reason + [fill] * (self.reason_tokens - len(reason)) + opening + call + [fill] * free + closing

    def decode(self, tokenizer, ids: list[int]) -> tuple[str, str | None]:
        """(reasoning, call text) of a decoded turn; the call is None when the delimiters are missing.

        Parsed from the text, not the positions, so a serially decoded turn that put its
        delimiters elsewhere still reads as what it says.
        """
        special = set(tokenizer.all_special_ids)
        text = tokenizer.decode([i for i in ids if i not in special], skip_special_tokens=False)
        head, found, tail = text.partition(OPEN)
        if not found:
            return text.strip(), None
        call, closed, _ = tail.partition(CLOSE)
        return head.strip(), call.strip() if closed else None

    def call_span(self) -> tuple[int, int]:
        """[start, end) of the call region within the turn."""
        return self.reason_tokens, self.length

    def priority(self, tokenizer, bias: float = 0.5):
        """P-ReAct's steering: delimiters pre-filled, ``bias`` on the call region (DLLM-Searcher: 0.5)."""
        from lmgym.models.diffusion import Priority

        opening, closing = delimiter_ids(tokenizer)
        start, end = self.call_span()
        return Priority.for_span(1, self.length, start, end, bias=bias, open_ids=opening, close_ids=closing)


def delimiter_ids(tokenizer) -> tuple[list[int], list[int]]:
    return (tokenizer.encode(OPEN, add_special_tokens=False), tokenizer.encode(CLOSE, add_special_tokens=False))


def turn_prompt(tokenizer, task: str, turns: list[Turn], max_tokens: int) -> list[int]:
    """Prompt ids of the turn after ``turns`` (whose last one has no completion yet).

    Chat messages through the tokenizer's chat template, earliest turns dropped whole until the
    prompt fits ``max_tokens`` (the task always stays), then cut from the left if one turn alone
    is too long. Training (`lmgym.training.agentic_sft`) builds its contexts with this function.
    """
    def encode(first_kept: int) -> list[int]:
        return chat_prompt_ids(tokenizer, render_messages("", task, turns, first_kept))

    first_kept, ids = 0, encode(0)
    while len(ids) > max_tokens and first_kept < len(turns) - 1:
        first_kept += 1
        ids = encode(first_kept)
    return ids[-max_tokens:]


@dataclass
class _Episode:
    task: str | None = None
    turns: list[Turn] = field(default_factory=list)
    generator: torch.Generator | None = None


class PReActAgent(Agent):
    """A masked-diffusion ReAct search agent, serial or P-ReAct (see the module docstring).

    Args:
        model: a masked-diffusion folder trained in the turn layout (default: the installed
            HotPotQA-Gen model, `DEFAULT_CHECKPOINT`), or any LLaDA-style folder.
        mode: ``"parallel"`` (P-ReAct) or ``"serial"`` (ReAct).
        threshold: Fast-dLLM's confidence threshold (each step commits the top token and every
            masked token at least this confident).
        bias: confidence added to the call region in parallel mode (DLLM-Searcher: 0.5).
        temperature: 0 is greedy; > 0 samples (each episode's stream from its seed).
        reason_tokens, call_tokens: the layout (None: the checkpoint's, else 64 and 32).
        max_prompt_tokens: the prompt budget (None: the checkpoint's, else 320).
        cache: Fast-dLLM cache inside the turn (``"prefix"``: the prompt's keys computed once).
        threads: torch CPU threads while decoding.
    """

    name = "preact"

    def __init__(self, model: str | Path | None = None, mode: Literal["parallel", "serial"] = "parallel", *,
                 threshold: float = 0.9, bias: float = 0.5, temperature: float = 0.0,
                 reason_tokens: int | None = None, call_tokens: int | None = None,
                 max_prompt_tokens: int | None = None, cache: str = "prefix", threads: int | None = 1,
                 device: str | None = None, name: str | None = None):
        from lmgym.models.backends.diffusion import DiffusionBackend
        from lmgym.models.checkpoints import read_meta

        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        rebuild = "python examples/train_preact.py --install"
        folder = zoo.path(DEFAULT_CHECKPOINT, rebuild=rebuild) if not model else zoo.resolve(model)
        if not folder.is_dir():
            raise FileNotFoundError(f"no P-ReAct model at {folder}; build one with {rebuild}")
        trained = dict(read_meta(folder).get("preact_layout") or {})
        self.layout = TurnLayout(reason_tokens or trained.get("reason_tokens", 64),
                                 call_tokens or trained.get("call_tokens", 32))
        self.max_prompt_tokens = max_prompt_tokens or trained.get("max_prompt_tokens", 320)
        self.backend = DiffusionBackend(folder, cache=cache, threads=threads, device=device)
        self.mode, self.threshold, self.bias, self.temperature = mode, threshold, bias, temperature
        self.cache = cache
        self.name = name or ("preact" if mode == "parallel" else "dllm-react")
        self._envs: dict[int, Any] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="preact-tool")
        self._episode = _Episode()
        super().reset(seed=None)

    def use_env(self, slot: int, env) -> None:
        self._envs[slot] = env

    def reset(self, *, seed: int | None = None, env_id: str | None = None) -> None:
        super().reset(seed=seed, env_id=env_id)
        generator = torch.Generator(device=self.backend.device).manual_seed(seed) if seed is not None else None
        self._episode = _Episode(generator=generator)

    def decide(self, observation: str, info: dict[str, Any]) -> Decision:
        start = time.perf_counter()
        episode = self._episode
        if episode.task is None:
            episode.task = str(info.get("task", ""))
        episode.turns.append(Turn(observation))
        tokenizer = self.backend.tokenizer
        prompt = turn_prompt(tokenizer, episode.task, episode.turns, self.max_prompt_tokens)
        tools = getattr(getattr(self._envs.get(0), "unwrapped", None), "tools", None)
        if self.mode == "parallel" and tools is None:
            raise ValueError("parallel mode dispatches searches on env.unwrapped.tools: run it in a HotPotQA env "
                             "through lmgym.agents.runner (which hands the agent its env)")
        call_start, call_end = self.layout.call_span()
        prompt_len = len(prompt)
        timing: dict[str, Any] = {"dispatched_s": None, "returned_s": None, "call_committed_pass": None}
        future: Future | None = None

        def on_step(x: torch.Tensor, passes: int) -> None:
            nonlocal future
            if timing["call_committed_pass"] is not None:
                return
            region = x[0, prompt_len + call_start:prompt_len + call_end]
            if (region == self.backend.mask_id).any():
                return
            timing["call_committed_pass"] = passes
            _, call = self.layout.decode(tokenizer, region.tolist())
            action = action_of(call) if call else ""
            if self.mode == "parallel" and action.startswith("search[") and action[7:-1].strip():
                timing["dispatched_s"] = time.perf_counter() - start
                future = self._pool.submit(tools.search, action[7:-1].strip())

        ids = torch.tensor([prompt], dtype=torch.long, device=self.backend.device)
        saved_threads = torch.get_num_threads()
        if self.backend.threads:
            torch.set_num_threads(self.backend.threads)
        try:
            out = self._generate(ids, on_step, episode.generator)
        finally:
            torch.set_num_threads(saved_threads)
        timing["decoded_s"] = time.perf_counter() - start
        answer = out.sequences[0, prompt_len:].tolist()
        reasoning, call = self.layout.decode(tokenizer, answer)
        action = action_of(call) if call else ""
        if future is not None:
            future.result()  # the page is now memoised: env.step reuses it
            timing["returned_s"] = time.perf_counter() - start
        completion = self.layout.text(reasoning, action)
        episode.turns[-1].completion = completion
        act_start = len(reasoning) + len(OPEN) + 1
        return Decision(
            action=action, reasoning=reasoning, completion=completion,
            spans=[Span("reason", 0, len(reasoning)), Span("act", act_start, act_start + len(call_text(action)))],
            prompt_tokens=prompt_len, completion_tokens=self.layout.length, seconds=time.perf_counter() - start,
            extra={**timing, "format_error": call is None, "forward_passes": out.forward_passes, "mode": self.mode})

    def _generate(self, ids: torch.Tensor, on_step, generator):
        from lmgym.models.diffusion import fast_generate

        priority = self.layout.priority(self.backend.tokenizer, self.bias) if self.mode == "parallel" else None
        length = self.layout.length
        return fast_generate(self.backend.model, ids, None, steps=length, gen_length=length, block_length=length,
                             temperature=self.temperature, mask_id=self.backend.mask_id, threshold=self.threshold,
                             cache=self.cache, priority=priority, on_step=on_step, generator=generator)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.backend.close()


class DiffusionReActAgent(PReActAgent):
    """The same model decoding each turn whole, then calling the tool (ReAct): agent ``dllm-react``."""

    name = "dllm-react"

    def __init__(self, model: str | Path | None = None, **kwargs: Any):
        kwargs.setdefault("mode", "serial")
        super().__init__(model, **kwargs)
