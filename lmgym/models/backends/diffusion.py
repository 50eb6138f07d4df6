"""A masked-diffusion LM from a local folder as a `TextBackend`.

The prompt is laid out as the model was trained (chat messages through the tokenizer's chat
template; text as ``[BOS] prompt [SEP]``), then ``max_new_tokens`` (rounded up to whole
blocks) of ``[MASK]`` are denoised by the LM core's samplers (`lmgym.models.diffusion`):

* ``sampler="fast"`` (default): `fast_generate`, Fast-dLLM's threshold decoding with a prefix
  or dual KV cache inside the call, stopping once every row has written EOS;
* ``sampler="reference"``: `generate`, LLaDA's reference sampler exactly (``steps`` per call).

The answer is the text before the first EOS, cut at the first stop string. A diffusion model
has no per-token autoregressive log-probabilities (its likelihood is an ELBO,
`lmgym.training.objectives.mdlm_elbo`), so ``token_logprobs`` is None, and no KV cache is kept
across calls: a bidirectional model's prompt keys change with what follows them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Hashable, Sequence

import torch

from lmgym.models.backends import Completion, LocalBackend, Prompt, SamplingParams
from lmgym.models.batching import left_pad
from lmgym.models.diffusion import fast_generate, generate
from lmgym.models.generation import cut_at_stop
from lmgym.models.networks import best_device_and_dtype


class DiffusionBackend(LocalBackend):
    """A masked-diffusion checkpoint behind the `TextBackend` protocol.

    Args:
        model: a local folder (a checkpoint trained here, or a LLaDA-style folder).
        sampler: ``"fast"`` or ``"reference"``.
        block_length: semi-autoregressive block (the answer is a whole number of blocks).
        steps_per_block: denoising steps per block for the reference sampler and for
            ``threshold=None``.
        threshold: Fast-dLLM confidence threshold (None: LLaDA's fixed schedule).
        cache: ``"none"``, ``"prefix"`` or ``"dual"`` (fast sampler).
        threads: torch CPU threads while generating (None: leave as is).
        trust_remote_code: run the folder's own model code (LLaDA-8B, Dream; `load_local_model`).
    """

    name = "diffusion"
    chat = True

    def __init__(self, model: str | os.PathLike, *, sampler: str = "fast", block_length: int = 32,
                 steps_per_block: int = 32, threshold: float | None = 0.9, cache: str = "dual",
                 device: str | None = None, dtype: torch.dtype | str | None = None, threads: int | None = None,
                 max_context: int | None = None, trust_remote_code: bool = False):
        from lmgym.models.checkpoints import load_checkpoint

        if sampler not in ("fast", "reference"):
            raise ValueError(f"sampler must be 'fast' or 'reference', got {sampler!r}")
        self.device, dtype = best_device_and_dtype(device, dtype)
        self.model_name = str(model)
        self.model, self.tokenizer, meta = load_checkpoint(model, device=str(self.device), dtype=dtype,
                                                           trust_remote_code=trust_remote_code)
        self.mask_id = meta.get("mask_token_id") or self.tokenizer.mask_token_id
        if self.mask_id is None:
            raise ValueError(f"{model}: no [MASK] token (not a masked-diffusion model)")
        self.chat = self.tokenizer.chat_template is not None
        self.sampler, self.block_length, self.steps_per_block = sampler, block_length, steps_per_block
        self.threshold, self.cache, self.threads = threshold, cache, threads
        self.max_context = max_context or getattr(self.model.config, "max_position_embeddings", None)

    def complete(self, prompts: Sequence[Prompt], params: SamplingParams = SamplingParams(), *,
                 seeds: Sequence[int | None] | None = None,
                 sessions: Sequence[Hashable | None] | None = None) -> list[Completion]:
        if not prompts:
            return []
        seeds = list(seeds) if seeds is not None else [None] * len(prompts)
        if params.temperature > 0 and len(prompts) > 1:
            # the samplers draw one random stream per call: a row's sample would depend on its
            # batch, so sampled rows run one call each
            return [self.complete([p], params, seeds=[s])[0] for p, s in zip(prompts, seeds)]
        start = time.perf_counter()
        blocks = max(1, -(-params.max_new_tokens // self.block_length))
        gen_length = blocks * self.block_length
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        rows = [self._fit(self.encode(p), gen_length) for p in prompts]
        ids, attention = left_pad(rows, pad)
        width = ids.shape[1]
        seed = seeds[0] if len(seeds) == 1 else None
        generator = torch.Generator(device=self.device).manual_seed(seed) if seed is not None else None
        saved_threads = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        try:
            ids, attention = ids.to(self.device), attention.to(self.device)
            if self.sampler == "reference":
                out = generate(self.model, ids, attention, steps=self.steps_per_block * blocks, gen_length=gen_length,
                               block_length=self.block_length, temperature=params.temperature, mask_id=self.mask_id,
                               generator=generator)
                passes = self.steps_per_block * blocks
            else:
                fast = fast_generate(self.model, ids, attention, steps=self.steps_per_block * blocks,
                                     gen_length=gen_length, block_length=self.block_length,
                                     temperature=params.temperature, mask_id=self.mask_id, threshold=self.threshold,
                                     cache=self.cache, eos_id=self.tokenizer.eos_token_id, generator=generator)
                out, passes = fast.sequences, fast.forward_passes
        finally:
            torch.set_num_threads(saved_threads)
        seconds = time.perf_counter() - start
        eos = self.tokenizer.eos_token_id
        completions = []
        for row, prompt_row in enumerate(rows):
            answer = out[row, width:].tolist()
            ended = eos in answer
            content = answer[:answer.index(eos)] if ended else answer
            text = self.tokenizer.decode(content, skip_special_tokens=True)
            cut = cut_at_stop(text, params.stop)
            completions.append(Completion(
                text=cut, prompt_tokens=len(prompt_row), completion_tokens=len(content) + int(ended), seconds=seconds,
                finish_reason="stop" if ended or cut != text else "length", extra={"forward_passes": passes}))
        return completions

    def _fit(self, ids: list[int], gen_length: int) -> list[int]:
        if self.max_context and len(ids) + gen_length > self.max_context:
            return ids[-max(1, self.max_context - gen_length):]
        return ids
