"""Autoregressive generation with a KV cache, and the cache operations the team agent needs.

`generate_ids` decodes a left-padded batch token by token, reusing a transformers
`DynamicCache` (keys/values at ``cache.layers[i].keys`` / ``.values``, shape
(B, kv_heads, T, head_dim)); greedy at temperature 0, else softmax sampling at the temperature
restricted to the top-p nucleus (Holtzman et al. 2020, arXiv:1904.09751); a row stops at EOS or
at a stop string. `generate_text` wraps it for strings.

Decoding without per-token overhead. The prompt goes through the model's own forward; the
decode steps of a Llama-architecture model (the tiny models trained here, SmolLM2) then run
`LlamaDecode`: the same layers as transformers' ``LlamaForCausalLM`` written as plain torch
ops over the model's own weights, with keys and values in buffers allocated once for the
whole completion (a static KV cache) and a padding mask built once, not per step.
transformers' forward spends most of a tiny model's step in Python around the arithmetic
(mask construction, module and output wrappers, config look-ups: profiled in
``studies/torch_decode.py``). The decoded keys and values are appended to the
`DynamicCache` at the end, so callers see the same cache either way, and the tokens are the
same (tested against the forward: greedy, batched with left padding, continuing a cache).
Other models, peft wrappers and ``fast=False`` take the forward at every step (its mask
preallocated and sliced).

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
import torch.nn.functional as F
from transformers import DynamicCache, LlamaForCausalLM, PreTrainedTokenizerBase

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


class LlamaDecode:
    """Decode steps of a ``LlamaForCausalLM`` over a static KV cache, in plain torch ops.

    The arithmetic is transformers' ``modeling_llama.py`` (v5.24) step for step: RMSNorm in
    float32 (``LlamaRMSNorm``), rotary embedding ``x cos + rotate_half(x) sin`` from
    ``inv_freq`` and the position (``LlamaRotaryEmbedding``, ``apply_rotary_pos_emb``; Su et
    al. 2021, arXiv:2104.09864), SDPA attention with grouped KV heads scaled by head_dim^-1/2,
    SwiGLU MLP ``down(silu(gate(x)) * up(x))`` (Shazeer 2020, arXiv:2002.05202), final norm
    and LM head. It reads the model's parameters at every step (no copies that an optimiser
    step would leave stale). Keys and values live in buffers of (layers, B, kv_heads,
    `length`, head_dim) filled from `cache`; `append_to` writes the decoded ones back.
    """

    def __init__(self, model: LlamaForCausalLM, cache: DynamicCache, mask: torch.Tensor, length: int):
        config = model.config
        self.model = model
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads or config.num_attention_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        past = cache_length(cache)
        reference = cache.layers[0].keys
        shape = (len(cache.layers), reference.shape[0], self.kv_heads, length, self.head_dim)
        self.keys, self.values = reference.new_empty(shape), reference.new_empty(shape)
        for index, layer in enumerate(cache.layers):
            self.keys[index, :, :, :past] = layer.keys
            self.values[index, :, :, :past] = layer.values
        self.start = self.length = past
        # the parameters themselves (an optimiser updates them in place), looked up once
        self.layers = [(layer.input_layernorm.weight, layer.self_attn.q_proj.weight, layer.self_attn.k_proj.weight,
                        layer.self_attn.v_proj.weight, layer.self_attn.o_proj.weight,
                        layer.post_attention_layernorm.weight, layer.mlp.gate_proj.weight, layer.mlp.up_proj.weight,
                        layer.mlp.down_proj.weight) for layer in model.model.layers]
        # the padding mask never changes (new tokens are real): None when there is no padding
        self.mask = None if bool(mask.all()) else torch.cat(
            [mask.bool(), mask.new_ones((mask.shape[0], length - mask.shape[1]), dtype=torch.bool)], dim=1)[:, None, None, :]

    @staticmethod
    def supports(model) -> bool:
        """Whether `model` is a plain Llama this class computes exactly: no biases, default
        RoPE, SiLU, causal, and every projection it reads a plain Linear (a peft LoRA layer
        injected in its place, as `lmgym.agents.kvteam` decodes with, is not)."""
        if type(model) is not LlamaForCausalLM or type(model.model.embed_tokens) is not torch.nn.Embedding:
            return False
        for layer in model.model.layers:
            linears = (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj, layer.self_attn.o_proj,
                       layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj)
            if any(type(m) is not torch.nn.Linear for m in linears):
                return False
        if type(model.lm_head) is not torch.nn.Linear:
            return False
        config = model.config
        rope = getattr(config, "rope_parameters", None) or {}
        return (config.hidden_act == "silu" and not config.attention_bias and not config.mlp_bias
                and getattr(config, "pretraining_tp", 1) == 1 and getattr(config, "is_causal", True) is not False
                and rope.get("rope_type", "default") == "default")

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))
        x32 = x.float()
        return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    def __call__(self, token: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        """Logits (B, V) after `token` (B,) at `position` (B, 1); its keys and values are kept."""
        model, batch, step = self.model.model, token.shape[0], self.length
        x = model.embed_tokens(token)  # (B, hidden)
        rotary = model.rotary_emb
        freqs = position.float()[..., None] * rotary.inv_freq.float()  # (B, 1, head_dim / 2)
        angles = torch.cat((freqs, freqs), dim=-1)[:, None]  # (B, 1, 1, head_dim)
        cos = (angles.cos() * rotary.attention_scaling).to(x.dtype)
        sin = (angles.sin() * rotary.attention_scaling).to(x.dtype)
        mask = None if self.mask is None else self.mask[..., :step + 1]
        gqa = self.heads != self.kv_heads
        for index, (norm1, wq, wk, wv, wo, norm2, gate, up, down) in enumerate(self.layers):
            h = self._norm(x, norm1)
            q = F.linear(h, wq).view(batch, self.heads, 1, self.head_dim)
            k = F.linear(h, wk).view(batch, self.kv_heads, 1, self.head_dim)
            self.values[index, :, :, step] = F.linear(h, wv).view(batch, self.kv_heads, self.head_dim)
            self.keys[index, :, :, step] = self._rotate(k, cos, sin)[:, :, 0]
            out = F.scaled_dot_product_attention(self._rotate(q, cos, sin), self.keys[index, :, :, :step + 1],
                                                 self.values[index, :, :, :step + 1], attn_mask=mask, enable_gqa=gqa)
            x = x + F.linear(out.reshape(batch, -1), wo)
            h = self._norm(x, norm2)
            x = x + F.linear(F.silu(F.linear(h, gate)) * F.linear(h, up), down)
        self.length = step + 1
        return F.linear(self._norm(x, model.norm.weight), self.model.lm_head.weight)

    def append_to(self, cache: DynamicCache) -> None:
        """Append the keys and values decoded here to `cache` (which holds those before)."""
        if self.length > self.start:
            for index in range(len(cache.layers)):
                cache.update(self.keys[index, :, :, self.start:self.length],
                             self.values[index, :, :, self.start:self.length], index)


@torch.no_grad()
def generate(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
             max_new_tokens: int = 64, temperature: float = 0.0, top_p: float = 1.0,
             eos_token_id: int | Sequence[int] | None = None, cache: DynamicCache | None = None,
             cache_mask: torch.Tensor | None = None, stop_check=None, generator=None,
             return_logprobs: bool = False, position_offset: int | None = None,
             fast: bool | None = None) -> GenerationOutput:
    """Decode up to ``max_new_tokens`` after a left-padded batch (B, P), continuing ``cache``.

    ``cache`` holds earlier tokens of each row (positions continue after them); ``cache_mask``
    (B, cache length) marks its real entries, 0 on a row's left padding (None: all real), so
    rows with cached prefixes of different lengths share one batch. ``stop_check(row, new_ids)
    -> bool`` ends a row early (stop strings). ``generator``: one for the batch or one per row.
    ``position_offset``: the position of the first input token, where it is not the cache
    length (a cache cut down to parts of a longer trace keeps its positions; every row alike).
    ``fast``: decode with `LlamaDecode` (None: where the model is one it computes; False: the
    model's forward at every step).
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
    new_tokens = torch.empty((batch, max_new_tokens), dtype=torch.long, device=device)  # filled step by step
    new_logprobs = []
    count = 0
    logits = model(input_ids, attention_mask=full_mask, cache=cache, use_cache=True, position_ids=positions).logits[:, -1]
    next_position = positions[:, -1:] + 1  # (B, 1)
    steps = max(0, max_new_tokens - 1)  # the last new token is returned, not encoded
    encoded = full_mask.shape[1]
    decode = None
    if steps and (LlamaDecode.supports(model) if fast is None else fast):
        decode = LlamaDecode(model, cache, full_mask, encoded + steps)
    else:  # one mask for the whole completion, sliced per step instead of concatenated
        full_mask = torch.cat([full_mask, full_mask.new_ones((batch, steps))], dim=1)
    for step in range(max_new_tokens):
        token = _sample(logits, temperature, top_p, generator)  # (B,)
        if return_logprobs:
            new_logprobs.append(torch.log_softmax(logits.float(), dim=-1).gather(-1, token.unsqueeze(-1)).squeeze(-1))
        if len(eos_ids):
            token = torch.where(done, eos_ids[0], token)
        new_tokens[:, step] = token
        count = step + 1
        finished = torch.isin(token, eos_ids) if len(eos_ids) else torch.zeros_like(done)
        if stop_check is not None:
            so_far = new_tokens[:, :count]
            finished |= torch.tensor([not bool(done[row]) and stop_check(row, so_far[row]) for row in range(batch)],
                                     device=device)
        for row in torch.nonzero(finished & ~done).flatten().tolist():
            lengths[row] = count
        done |= finished
        if done.all() or count == max_new_tokens:
            break  # the last token is returned, not encoded
        if decode is not None:
            logits = decode(token, next_position)
        else:
            encoded += 1
            logits = model(token.unsqueeze(1), attention_mask=full_mask[:, :encoded], cache=cache, use_cache=True,
                           position_ids=next_position).logits[:, -1]
        next_position = next_position + 1
    if decode is not None:
        decode.append_to(cache)
        full_mask = torch.cat([full_mask, full_mask.new_ones((batch, steps))], dim=1)
    tokens = new_tokens[:, :count]
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

    generator = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    new_ids, _ = generate_ids(model, encoded["input_ids"], encoded["attention_mask"], max_new_tokens=max_new_tokens,
                              temperature=temperature, top_p=top_p, eos_token_id=tokenizer.eos_token_id,
                              stop_check=stop_checker(tokenizer, stop), generator=generator)
    texts = tokenizer.batch_decode(new_ids, skip_special_tokens=True)
    return [cut_at_stop(text, stop) for text in texts]


def stop_checker(tokenizer: PreTrainedTokenizerBase, stop: Sequence[str]):
    """A ``stop_check`` for `generate` (None without stop strings): whether the completion so
    far holds a stop string, read from the text of its last tokens only. Checked after every
    token, a stop string is new only if it ends at the last token, and each token holds at
    least one byte, so its tokens are among the last ``len(stop.encode())`` (one more for a
    token that begins inside the character before it)."""
    if not stop:
        return None
    tail = max(len(s.encode("utf-8")) for s in stop) + 1

    def hits_stop(row: int, ids: torch.Tensor) -> bool:
        text = tokenizer.decode(ids[-tail:], skip_special_tokens=True)
        return any(s in text for s in stop)

    return hits_stop


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """The text before the earliest stop string."""
    cuts = [text.index(s) for s in stop if s in text]
    return text[: min(cuts)] if cuts else text
