"""Autoregressive generation with a KV cache, and the cache operations the team agent needs.

`generate_ids` decodes a left-padded batch token by token, reusing a transformers
`DynamicCache` (keys/values at ``cache.layers[i].keys`` / ``.values``, shape
(B, kv_heads, T, head_dim)); greedy at temperature 0, else softmax sampling at the temperature
restricted to the top-p nucleus (Holtzman et al. 2020, arXiv:1904.09751); a row stops at EOS or
at a stop string. `generate_text` wraps it for strings.

Cache operations for KV communication between agents (DiffMAS): `extend` runs new tokens on
top of a cache (in place) with their positions continuing after it, `fork_cache` copies one so
two continuations can branch, `slice_cache` cuts out a span (one agent's message) and
`merge_caches` concatenates caches along time. Rotary
position is baked into the keys when they are computed, so a cache that is appended after
another must have been built with ``position_offset`` equal to the first one's length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from transformers import DynamicCache, PreTrainedTokenizerBase

from lmgym.models.tokenizer import chat_prompt_text


def cache_length(cache: DynamicCache) -> int:
    return cache.get_seq_length()


def crop_cache(cache: DynamicCache, length: int) -> None:
    """Keep the first `length` time steps of `cache`, in place (transformers 5's ``crop`` takes
    the number of steps to remove, as a negative int)."""
    remove = cache_length(cache) - length
    if remove > 0:
        cache.crop(-remove)


def extend(model, cache: DynamicCache, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
           position_offset: int | None = None) -> torch.Tensor:
    """Run ``input_ids`` (B, T) on top of ``cache`` (appended in place); returns logits (B, T, V).

    ``attention_mask`` (B, past + T) covers the cached tokens and the new ones (None: attend to
    all). Positions start at ``position_offset`` (default: the cache length).
    """
    past = cache_length(cache)
    offset = past if position_offset is None else position_offset
    positions = torch.arange(offset, offset + input_ids.shape[1], device=input_ids.device).expand(input_ids.shape[0], -1)
    return model(input_ids, attention_mask=attention_mask, cache=cache, use_cache=True, position_ids=positions).logits


def fork_cache(cache: DynamicCache) -> DynamicCache:
    """An independent copy (``copy.deepcopy`` fails on a cache holding tensors with grad;
    ``clone`` keeps the autograd graph, so gradients still flow through a fork)."""
    return merge_caches([cache])


def repeat_cache(cache: DynamicCache, times: int) -> DynamicCache:
    """A copy holding each row `times` times along the batch: (B * times, kv_heads, T, head_dim),
    row b's copies together (as ``repeat_interleave``), so B prompts can each draw `times` samples."""
    repeated = DynamicCache()
    for layer in range(len(cache.layers)):
        repeated.update(cache.layers[layer].keys.repeat_interleave(times, dim=0),
                        cache.layers[layer].values.repeat_interleave(times, dim=0), layer)
    return repeated


def merge_caches(caches: Sequence[DynamicCache]) -> DynamicCache:
    """Concatenate caches along time, layer by layer: (B, kv_heads, sum T, head_dim)."""
    merged = DynamicCache()
    for layer in range(len(caches[0].layers)):
        keys = torch.cat([c.layers[layer].keys for c in caches], dim=2)
        values = torch.cat([c.layers[layer].values for c in caches], dim=2)
        merged.update(keys, values, layer)  # torch.cat always allocates: the result shares no storage
    return merged


def slice_cache(cache: DynamicCache, start: int, end: int) -> DynamicCache:
    """The time steps [start, end) of a cache, as a new cache (e.g. one agent's message)."""
    sliced = DynamicCache()
    for index, layer in enumerate(cache.layers):
        sliced.update(layer.keys[:, :, start:end].clone(), layer.values[:, :, start:end].clone(), index)
    return sliced


def _sample(logits: torch.Tensor, temperature: float, top_p: float, generator) -> torch.Tensor:
    """Next tokens (B,) from last-position logits (B, V).

    ``generator`` is one generator for the batch, or one per row (so a row's sample does not
    depend on which other rows share its batch).
    """
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        # keep a token while the mass before it is < top_p (the top-1 is always kept)
        outside = sorted_probs.cumsum(dim=-1) - sorted_probs >= top_p
        sorted_probs = sorted_probs.masked_fill(outside, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    if isinstance(generator, (list, tuple)):
        return torch.cat([torch.multinomial(probs[row:row + 1], 1, generator=g).squeeze(-1)
                          for row, g in enumerate(generator)])
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@dataclass
class GenerationOutput:
    tokens: torch.Tensor  # (B, N) new ids; finished rows padded with their EOS
    cache: DynamicCache  # the inputs and every new token but the last
    lengths: list[int]  # real new tokens per row (up to and including EOS or the stop)
    logprobs: torch.Tensor | None  # (B, N) log p(token) under the model (temperature 1), if asked
    cache_mask: torch.Tensor  # (B, cache length): 1 where the cache holds a real token


@torch.no_grad()
def generate(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
             max_new_tokens: int = 64, temperature: float = 0.0, top_p: float = 1.0,
             eos_token_id: int | Sequence[int] | None = None, cache: DynamicCache | None = None,
             cache_mask: torch.Tensor | None = None, stop_check=None, generator=None,
             return_logprobs: bool = False, position_offset: int | None = None) -> GenerationOutput:
    """Decode up to ``max_new_tokens`` after a left-padded batch (B, P), continuing ``cache``.

    ``cache`` holds earlier tokens of each row (positions continue after them); ``cache_mask``
    (B, cache length) marks its real entries, 0 on a row's left padding (None: all real), so
    rows with cached prefixes of different lengths share one batch. ``stop_check(row, new_ids)
    -> bool`` ends a row early (stop strings). ``generator``: one for the batch or one per row.
    ``position_offset``: the position of the first input token, where it is not the cache
    length (a cache cut down to parts of a longer trace keeps its positions; every row alike).
    """
    batch = input_ids.shape[0]
    device = input_ids.device
    cache = cache if cache is not None else DynamicCache()
    past = cache_length(cache)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if cache_mask is None:
        cache_mask = torch.ones((batch, past), dtype=attention_mask.dtype, device=device)
    full_mask = torch.cat([cache_mask.to(attention_mask.dtype), attention_mask], dim=1)
    # real tokens count positions from each row's own cached length; left padding is clamped
    cached = cache_mask.long().sum(dim=1, keepdim=True)  # (B, 1)
    if position_offset is not None:
        cached = torch.full_like(cached, position_offset)
    positions = (cached + attention_mask.long().cumsum(dim=1) - 1).clamp(min=0)  # (B, P)
    eos_ids = torch.tensor([eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id or []), device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    lengths = [max_new_tokens] * batch
    new_tokens, new_logprobs = [], []
    logits = model(input_ids, attention_mask=full_mask, cache=cache, use_cache=True, position_ids=positions).logits[:, -1]
    next_position = positions[:, -1:] + 1  # (B, 1)
    for step in range(max_new_tokens):
        token = _sample(logits, temperature, top_p, generator)  # (B,)
        if return_logprobs:
            new_logprobs.append(torch.log_softmax(logits.float(), dim=-1).gather(-1, token.unsqueeze(-1)).squeeze(-1))
        if len(eos_ids):
            token = torch.where(done, eos_ids[0], token)
        new_tokens.append(token)
        finished = torch.isin(token, eos_ids) if len(eos_ids) else torch.zeros_like(done)
        if stop_check is not None:
            so_far = torch.stack(new_tokens, dim=1)
            finished |= torch.tensor([not bool(done[row]) and stop_check(row, so_far[row]) for row in range(batch)],
                                     device=device)
        for row in torch.nonzero(finished & ~done).flatten().tolist():
            lengths[row] = step + 1
        done |= finished
        if done.all() or len(new_tokens) == max_new_tokens:
            break  # the last token is returned, not encoded
        full_mask = torch.cat([full_mask, torch.ones((batch, 1), dtype=full_mask.dtype, device=device)], dim=1)
        logits = model(token.unsqueeze(1), attention_mask=full_mask, cache=cache, use_cache=True, position_ids=next_position).logits[:, -1]
        next_position = next_position + 1
    tokens = torch.stack(new_tokens, dim=1)
    return GenerationOutput(tokens=tokens, cache=cache, lengths=[min(n, tokens.shape[1]) for n in lengths],
                            logprobs=torch.stack(new_logprobs, dim=1) if return_logprobs else None,
                            cache_mask=full_mask[:, :cache_length(cache)])


def generate_ids(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                 max_new_tokens: int = 64, temperature: float = 0.0, top_p: float = 1.0,
                 eos_token_id: int | Sequence[int] | None = None, cache: DynamicCache | None = None,
                 stop_check=None, generator=None) -> tuple[torch.Tensor, DynamicCache]:
    """`generate` returning only (new ids (B, N), cache): every cached token is attended."""
    out = generate(model, input_ids, attention_mask, max_new_tokens=max_new_tokens, temperature=temperature,
                   top_p=top_p, eos_token_id=eos_token_id, cache=cache, stop_check=stop_check, generator=generator)
    return out.tokens, out.cache


def generate_text(model, tokenizer: PreTrainedTokenizerBase, prompts: list[str], *, max_new_tokens: int = 64,
                  temperature: float = 0.0, top_p: float = 1.0, stop: Sequence[str] = (), seed: int | None = None,
                  chat: bool = False) -> list[str]:
    """Completions of ``prompts`` (batched, left-padded), cut before the first stop string.

    ``chat=True`` wraps each prompt as a user turn with the tokenizer's chat template (e.g.
    SmolLM2-Instruct). ``seed`` makes sampling repeatable.
    """
    if chat:
        prompts = [chat_prompt_text(tokenizer, p) for p in prompts]
    device = next(model.parameters()).device
    saved_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        encoded = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=not chat).to(device)
    finally:
        tokenizer.padding_side = saved_side

    def hits_stop(row: int, ids: torch.Tensor) -> bool:
        text = tokenizer.decode(ids, skip_special_tokens=True)
        return any(s in text for s in stop)

    generator = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    new_ids, _ = generate_ids(model, encoded["input_ids"], encoded["attention_mask"], max_new_tokens=max_new_tokens,
                              temperature=temperature, top_p=top_p, eos_token_id=tokenizer.eos_token_id,
                              stop_check=hits_stop if stop else None, generator=generator)
    texts = tokenizer.batch_decode(new_ids, skip_special_tokens=True)
    return [cut_at_stop(text, stop) for text in texts]


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """The text before the earliest stop string."""
    cuts = [text.index(s) for s in stop if s in text]
    return text[: min(cuts)] if cuts else text
