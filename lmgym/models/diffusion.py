"""Masked-diffusion sampling: the LLaDA reference sampler, and a fast one beside it.

`generate` follows the reverse process of LLaDA (Nie et al. 2025, "Large Language Diffusion
Models", arXiv:2502.09992, sec. 2.4 and Appendix B) with the semantics of its reference sampler
(ML-GSAI/LLaDA ``generate.py``) exactly:

* the canvas is ``[prompt | MASK x gen_length]``;
* the answer is filled in ``gen_length / block_length`` blocks, left to right
  (semi-autoregressive remasking, Appendix B.3); each block gets ``steps / num_blocks`` steps;
* the linear noise schedule (Eq. 8: t goes from 1 to 0 in equal steps) means the same number
  of masked tokens is revealed at every step of a block: ``n // steps`` each, plus one for the
  first ``n % steps`` steps (`num_transfer_tokens`);
* each step predicts every masked token at once (the mask predictor p_theta(x_0 | x_t)) and
  commits the k most confident ones in the current block ("low_confidence" remasking: the
  rest are remasked), or k chosen uniformly at random ("random" remasking); a committed token
  is never masked again;
* at temperature > 0 tokens are drawn with the Gumbel-max trick in float64 (low precision
  Gumbel noise hurts masked-diffusion samples: Zheng et al. 2024, arXiv:2409.02908);
* classifier-free guidance (Eq. 16, Nie et al. follow Chang et al. 2022): the unconditional
  input masks the prompt, and ``logits = u + (w + 1) (c - u)`` for scale w;
* a left-padded batch passes ``attention_mask``; it is extended with ones over the answer.

Only ``model(x, attention_mask=...).logits`` (B, L, V) is used, so a real LLaDA checkpoint works
unchanged.

`fast_generate` adds the two accelerations of Fast-dLLM (Wu et al. 2025, arXiv:2505.22618,
NVlabs/Fast-dLLM): confidence-threshold parallel decoding (each step commits the top-1 masked
token of the block and every other one whose confidence is at least ``threshold``, sec. 3.3)
and a per-block KV cache (sec. 3.2: the prompt and finished blocks are encoded once per
block, and with the DualCache the masked suffix too; the steps inside a block feed only the
tokens from the block's start on, or only the block). It also takes
a `Priority`: pre-filled tokens (e.g. a tool call's delimiters) and a confidence bias on chosen
spans, the P-ReAct recipe (DLLM-Searcher: delimiters pre-filled, +0.5 on the tool-call region),
so the tool call decodes first.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from transformers import DynamicCache

REMASKING = ("low_confidence", "random")
CACHES = ("none", "prefix", "dual")


def add_gumbel_noise(logits: torch.Tensor, temperature: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Scores whose argmax samples softmax(logits / temperature): ``exp(l) / (-log u)^T``.

    ``argmax_v exp(l_v) / (-log u_v)^T = argmax_v (l_v / T + g_v)`` with g_v = -log(-log u_v)
    standard Gumbel: the Gumbel-max trick. Computed in float64 (see module docstring).
    At temperature 0 the logits are returned unchanged (greedy).
    """
    if temperature == 0:
        return logits
    logits = logits.to(torch.float64)
    noise = torch.rand(logits.shape, dtype=torch.float64, device=logits.device, generator=generator)
    return logits.exp() / (-torch.log(noise)) ** temperature


def num_transfer_tokens(block_mask: torch.Tensor, steps: int) -> torch.Tensor:
    """How many tokens to reveal at each step: (B, steps) int64 from a (B, block) bool mask.

    The linear schedule reveals ``n / steps`` tokens per step in expectation; the remainder
    ``n % steps`` goes one each to the first steps.
    """
    masked = block_mask.sum(dim=1, keepdim=True)  # (B, 1)
    step = torch.arange(steps, device=block_mask.device)  # (steps,)
    return masked // steps + (step < masked % steps).long()  # (B, steps)


def _guided_logits(model, x: torch.Tensor, attention_mask: torch.Tensor | None, prompt_index: torch.Tensor,
                   cfg_scale: float, mask_id: int) -> torch.Tensor:
    """The mask predictor's logits (B, L, V), with classifier-free guidance when cfg_scale > 0."""
    if cfg_scale <= 0:
        return model(x, attention_mask=attention_mask).logits
    unconditional = x.masked_fill(prompt_index, mask_id)  # the prompt masked out
    both = torch.cat([x, unconditional])  # (2B, L): one forward pass for both
    mask2 = None if attention_mask is None else torch.cat([attention_mask, attention_mask])
    conditional, uncond = model(both, attention_mask=mask2).logits.chunk(2)
    return uncond + (cfg_scale + 1) * (conditional - uncond)


def _predict(logits: torch.Tensor, temperature: float, remasking: str, generator: torch.Generator | None,
             exact: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Predicted tokens x0 (B, L) and the confidence used to rank them (B, L).

    ``exact``: as LLaDA's ``generate.py``: x0 by its float64 Gumbel-max (one noise draw per
    vocabulary entry), and the confidence ``softmax(logits)[x0]`` in the model's own dtype (a
    bfloat16 model ranks bfloat16 probabilities, ties included, as the reference does).
    Otherwise x0 by inverse-CDF lookup in the float32 tempered probabilities, one uniform draw
    per position (the same distribution from another random stream, for the fast sampler: on a
    CPU the reference's noise cost more than the forward pass), confidence in float32. Greedy
    decoding picks the same tokens either way.
    """
    probs = F.softmax(logits if exact else logits.float(), dim=-1)  # LLaDA's confidence: p at T = 1
    if exact or temperature == 0:
        x0 = add_gumbel_noise(logits, temperature, generator).argmax(dim=-1)
    else:
        tempered = probs if temperature == 1 else F.softmax(logits.float() / temperature, dim=-1)
        cdf = tempered.cumsum(dim=-1)  # (B, L, V)
        u = torch.rand(cdf.shape[:-1] + (1,), device=cdf.device, generator=generator) * cdf[..., -1:]
        x0 = torch.searchsorted(cdf, u).squeeze(-1).clamp(max=cdf.shape[-1] - 1)
    if remasking == "low_confidence":
        confidence = probs.gather(-1, x0.unsqueeze(-1)).squeeze(-1)
    elif remasking == "random":
        # float32 draws, as the reference does, so a seeded run matches it number for number
        confidence = torch.rand(x0.shape, device=x0.device, generator=generator)
    else:
        raise ValueError(f"remasking must be one of {REMASKING}, got {remasking!r}")
    return x0, confidence


def _top_k(confidence: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Bool mask (B, L) of each row's k[b] highest entries, chosen by `torch.topk` row by row
    (as the reference does, so equal confidences are broken the same way)."""
    keep = torch.zeros_like(confidence, dtype=torch.bool)
    for row, count in enumerate(k.tolist()):
        if count:
            keep[row, torch.topk(confidence[row], k=int(count)).indices] = True
    return keep


def _check_layout(steps: int, gen_length: int, block_length: int) -> int:
    if block_length <= 0 or gen_length % block_length:
        raise ValueError(f"gen_length ({gen_length}) must be a multiple of block_length ({block_length})")
    num_blocks = gen_length // block_length
    if steps <= 0 or steps % num_blocks:
        raise ValueError(f"steps ({steps}) must be a positive multiple of the number of blocks ({num_blocks})")
    return num_blocks


def _canvas(prompt: torch.Tensor, attention_mask: torch.Tensor | None, gen_length: int, mask_id: int):
    """``[prompt | MASK x gen_length]`` (B, P + G) and the attention mask extended with ones."""
    batch, prompt_len = prompt.shape
    x = torch.full((batch, prompt_len + gen_length), mask_id, dtype=torch.long, device=prompt.device)
    x[:, :prompt_len] = prompt
    if attention_mask is not None:
        ones = torch.ones((batch, gen_length), dtype=attention_mask.dtype, device=attention_mask.device)
        attention_mask = torch.cat([attention_mask, ones], dim=1)
    return x, attention_mask


@torch.no_grad()
def generate(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, steps: int = 128,
             gen_length: int = 128, block_length: int = 128, temperature: float = 0.0, cfg_scale: float = 0.0,
             remasking: str = "low_confidence", mask_id: int = 126336,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """LLaDA's reference sampler (see the module docstring); returns (B, P + gen_length) ids.

    Args:
        model: any callable with ``model(x, attention_mask=...).logits`` of shape (B, L, V).
        prompt: (B, P) token ids, left-padded when the prompts differ in length.
        attention_mask: (B, P), 0 on left padding; None when there is none.
        steps: total denoising steps, a multiple of ``gen_length // block_length``.
        gen_length: answer length in tokens, a multiple of ``block_length``.
        block_length: semi-autoregressive block; ``gen_length`` means pure diffusion.
        temperature: 0 is greedy; > 0 samples with float64 Gumbel-max.
        cfg_scale: classifier-free guidance scale w (0: off).
        remasking: "low_confidence" or "random".
        mask_id: the ``[MASK]`` id (126336 for LLaDA-8B).
        generator: random source for noise; None uses torch's global one, as the reference does.
    """
    num_blocks = _check_layout(steps, gen_length, block_length)
    steps_per_block = steps // num_blocks
    prompt_len = prompt.shape[1]
    x, attention_mask = _canvas(prompt, attention_mask, gen_length, mask_id)  # (B, L)
    prompt_index = x != mask_id  # (B, L); what cfg masks out
    for block in range(num_blocks):
        start, end = prompt_len + block * block_length, prompt_len + (block + 1) * block_length
        schedule = num_transfer_tokens(x[:, start:end] == mask_id, steps_per_block)  # (B, steps)
        for step in range(steps_per_block):
            mask_index = x == mask_id  # (B, L)
            logits = _guided_logits(model, x, attention_mask, prompt_index, cfg_scale, mask_id)
            x0, confidence = _predict(logits, temperature, remasking, generator)
            confidence[:, end:] = -torch.inf  # later blocks wait their turn
            confidence = torch.where(mask_index, confidence, -torch.inf)  # committed stays committed
            transfer = _top_k(confidence, schedule[:, step])
            x = torch.where(transfer, x0, x)
    return x


def cache_argument(model) -> str | None:
    """The keyword under which ``model``'s forward takes a KV cache, or None if it takes none.

    Fast-dLLM's caches feed a span that starts mid-sequence, so the forward must take a cache and
    ``position_ids``. Transformers 5 models name the cache ``cache`` (``past_key_values`` before);
    a forward with ``**kwargs`` (a PEFT wrapper, a counting lambda) is taken to pass both on.
    LLaDA-8B's published forward names neither (and asserts that no cache is used): None.
    """
    try:
        parameters = inspect.signature(getattr(model, "forward", model)).parameters
    except (TypeError, ValueError):  # a builtin or C callable: nothing to inspect
        return None
    passes_on = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    named = next((name for name in ("cache", "past_key_values") if name in parameters), None)
    if not ("position_ids" in parameters or passes_on):
        return None
    return named or ("cache" if passes_on else None)


def _drop_span(cache: DynamicCache, start: int, end: int) -> None:
    """Remove time steps [start, end) from every layer of `cache`, in place."""
    for layer in cache.layers:
        layer.keys = torch.cat([layer.keys[:, :, :start], layer.keys[:, :, end:]], dim=2)
        layer.values = torch.cat([layer.values[:, :, :start], layer.values[:, :, end:]], dim=2)


@dataclass
class Priority:
    """Steer which positions decode first (P-ReAct, DLLM-Searcher).

    Both tensors index the answer region, (B, gen_length):
    ``prefill``: token ids written on the canvas before decoding starts, -1 where none (they
    are never masked, so the model reads the delimiters from the first step);
    ``bias``: added to the confidence of masked positions before ranking and thresholding.
    """

    prefill: torch.Tensor | None = None
    bias: torch.Tensor | None = None

    @classmethod
    def for_span(cls, batch: int, gen_length: int, start: int, end: int, bias: float = 0.5,
                 open_ids: Sequence[int] = (), close_ids: Sequence[int] = ()) -> "Priority":
        """A span [start, end) of the answer decoded first: its delimiters pre-filled at both ends,
        its inside biased by ``bias`` (DLLM-Searcher uses 0.5)."""
        prefill = torch.full((batch, gen_length), -1, dtype=torch.long)
        prefill[:, start:start + len(open_ids)] = torch.tensor(list(open_ids), dtype=torch.long)
        prefill[:, end - len(close_ids):end] = torch.tensor(list(close_ids), dtype=torch.long)
        weights = torch.zeros((batch, gen_length), dtype=torch.float64)
        weights[:, start:end] = bias
        return cls(prefill=prefill, bias=weights)


@dataclass
class FastOutput:
    sequences: torch.Tensor  # (B, P + G) token ids
    forward_passes: int  # model calls (a cached call on a suffix counts as one)
    commit_step: torch.Tensor  # (B, G): forward pass after which each answer token was committed; 0 = pre-filled


@torch.no_grad()
def fast_generate(model, prompt: torch.Tensor, attention_mask: torch.Tensor | None = None, steps: int = 128,
                  gen_length: int = 128, block_length: int = 32, temperature: float = 0.0,
                  remasking: str = "low_confidence", mask_id: int = 126336, threshold: float | None = 0.9,
                  cache: str = "prefix", eos_id: int | None = None, priority: Priority | None = None,
                  on_step: Callable[[torch.Tensor, int], None] | None = None,
                  generator: torch.Generator | None = None) -> FastOutput:
    """Fast-dLLM decoding: threshold parallel decoding and a per-block KV cache.

    ``threshold=None`` keeps LLaDA's linear schedule (``steps`` split over the blocks), so with
    ``cache="none"``, no priority and temperature 0 this is `generate` without guidance (at
    temperature > 0 it samples the same distributions from another random stream,
    `_predict` with ``exact=False``). With a threshold,
    ``steps`` is ignored: a block ends when it has no mask left (at most block_length steps).

    ``cache``: "none" feeds the whole canvas at every step. "prefix" (Fast-dLLM's prefix cache)
    computes the keys of ``[0, block start)`` once per block, from the canvas at the block's
    start, and later steps feed ``x[:, block start:]``. "dual" (Fast-dLLM's DualCache) also
    caches the keys of the masked suffix after the block, so later steps feed the block alone;
    it is for bidirectional models (a causal model would see the suffix). Both need a forward
    taking a cache and ``position_ids`` (`cache_argument`); for a model without (LLaDA-8B's
    published code) they fall back to "none" with a one-line warning, once per model class.
    The cached keys go stale as the block fills, the approximation Fast-dLLM measures as
    near-lossless. ``on_step(x, forward_passes)`` is
    called after each commit, e.g. to dispatch a tool call as soon as its span is decoded.

    ``eos_id``: stop after a block once every row has committed an EOS; the later blocks are
    filled with EOS. Committed tokens never change, so the text before each row's first EOS is
    exactly what full decoding gives; only the padding after it is not decoded.
    """
    if cache not in CACHES:
        raise ValueError(f"cache must be one of {CACHES}, got {cache!r}")
    cache_kwarg = cache_argument(model) if cache != "none" else None
    if cache != "none" and cache_kwarg is None:
        # the message names the class, so Python's default filter shows it once per class
        warnings.warn(f"fast_generate: {type(model).__name__}.forward takes no KV cache and position_ids; "
                      f"cache={cache!r} falls back to 'none'", stacklevel=2)
        cache = "none"
    num_blocks = _check_layout(steps, gen_length, block_length)
    steps_per_block = steps // num_blocks
    prompt_len = prompt.shape[1]
    x, attention_mask = _canvas(prompt, attention_mask, gen_length, mask_id)  # (B, L)
    batch, length = x.shape
    bias = torch.zeros((batch, length), dtype=torch.float64, device=x.device)
    if priority is not None and priority.prefill is not None:
        fill = priority.prefill.to(x.device)
        x[:, prompt_len:] = torch.where(fill >= 0, fill, x[:, prompt_len:])
    if priority is not None and priority.bias is not None:
        bias[:, prompt_len:] = priority.bias.to(x.device, torch.float64)
    commit_step = torch.zeros((batch, gen_length), dtype=torch.long, device=x.device)
    positions = torch.arange(length, device=x.device).expand(batch, -1)  # (B, L)
    passes = 0
    for block in range(num_blocks):
        start, end = prompt_len + block * block_length, prompt_len + (block + 1) * block_length
        schedule = num_transfer_tokens(x[:, start:end] == mask_id, steps_per_block)  # (B, steps)
        # Each step commits at least one token per row, so a block takes at most block_length
        # steps; the cap only bites if the model itself predicts [MASK], which stays a hole
        # (as in the reference sampler).
        max_steps = steps_per_block if threshold is None else block_length
        kv, step = None, 0
        while (x[:, start:end] == mask_id).any() and step < max_steps:
            if cache == "none":
                logits, offset = model(x, attention_mask=attention_mask).logits, 0
            elif kv is None:
                # The first step of a block sees the whole canvas and fills the cache; only the
                # keys outside the fed span stay (prefix [0, start), and for "dual" [end, L) too).
                kv = DynamicCache()
                logits, offset = model(x, attention_mask=attention_mask, use_cache=True, **{cache_kwarg: kv}).logits, 0
                fed_end = end if cache == "dual" else length
                _drop_span(kv, start, fed_end)
                # keys are ordered [kept cache | fed span]: the attention mask follows that order
                step_mask = None if attention_mask is None else torch.cat(
                    [attention_mask[:, :start], attention_mask[:, fed_end:], attention_mask[:, start:fed_end]], dim=1)
            else:
                logits = model(x[:, start:fed_end], attention_mask=step_mask, use_cache=True,
                               position_ids=positions[:, start:fed_end], **{cache_kwarg: kv}).logits
                kv.crop(start - fed_end)  # the fed span's keys change every step: drop them
                offset = start
            passes += 1
            # only the current block can be committed: score just its positions (scoring the
            # whole canvas costs as much as the forward pass on a CPU)
            block_logits = logits[:, start - offset:end - offset]  # (B, block, V)
            x0, confidence = _predict(block_logits, temperature, remasking, generator, exact=False)  # (B, block)
            current = x[:, start:end]  # (B, block)
            mask_index = current == mask_id
            confidence = torch.where(mask_index, confidence + bias[:, start:end], -torch.inf)
            if threshold is None:
                transfer = _top_k(confidence, schedule[:, step])
            else:
                # top-1 of every row that still has masks, plus everything above the threshold
                top1 = _top_k(confidence, mask_index.any(dim=1).long())
                transfer = top1 | (confidence >= threshold)
            x[:, start:end] = torch.where(transfer, x0, current)
            commit_step[:, start - prompt_len:end - prompt_len][transfer] = passes
            step += 1
            if on_step is not None:
                on_step(x, passes)
        if eos_id is not None and (x[:, prompt_len:end] == eos_id).any(dim=1).all():
            x[:, end:] = eos_id
            break
    return FastOutput(sequences=x, forward_passes=passes, commit_step=commit_step)
