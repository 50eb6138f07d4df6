"""The frozen JSON-record generator of PromptEdit-JSON: a tiny masked-diffusion LM behind
``generate(prompts, n, seed) -> list[str]``.

`DiffusionRecordGenerator` wraps any MDLM checkpoint (`lmgym.policies.checkpoints`) with the
fast sampler (`lmgym.policies.diffusion.fast_generate`: threshold decoding, DualCache, stop
once every record has ended) sampling at temperature 1, so the n records for one prompt
differ; the output is a pure function of (prompts, n, seed). Its default checkpoint,
``lmgym/policies/checkpoints/json_records_mdlm``, is committed (about 4 MB) so a fresh clone
without data works; it is rebuilt by::

    LMGYM_DATA=/path/to/data python examples/train_tiny_mdlm.py --out runs/json_mdlm --install

Env entry point: ``generator="lmgym.policies.record_generator:DiffusionRecordGenerator"``.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import torch

from lmgym.policies.checkpoints import load_checkpoint
from lmgym.policies.diffusion import fast_generate
from lmgym.policies.tokenizer import decode_answer, prompt_ids

DEFAULT_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "json_records_mdlm"
#: {"starting" | "specified": {task: prompt}} stored beside the default checkpoint, for benchmarks without data
EVAL_PROMPTS_FILE = "eval_prompts.json"
#: the semi-autoregressive block the default model is trained and sampled with
BLOCK_LENGTH = 32


@functools.lru_cache(maxsize=4)
def _load_frozen(folder: str, device: str):
    """(model, tokenizer, meta) of a checkpoint, loaded once per process: the model is frozen
    (only read under no_grad), so every env of a process can share it."""
    return load_checkpoint(folder, device=device)


class DiffusionRecordGenerator:
    """n records per prompt from a masked-diffusion LM, prompt-major, seeded.

    Args:
        checkpoint: MDLM checkpoint folder (default: the committed tiny JSON-record model).
        temperature: sampling temperature (0: the n records of a prompt are identical).
        threshold: Fast-dLLM confidence threshold (None: LLaDA's fixed schedule of ``steps``).
        cache: "none", "prefix" or "dual" (`lmgym.policies.diffusion.fast_generate`).
        block_length: semi-autoregressive block (a divisor of the answer length).
        steps: denoising steps when ``threshold`` is None.
        threads: torch CPU threads while generating (None: leave as is).
    """

    def __init__(self, checkpoint: str | os.PathLike | None = None, temperature: float = 1.0,
                 threshold: float | None = 0.9, block_length: int = BLOCK_LENGTH, steps: int | None = None,
                 cache: str = "dual", device: str | None = None, threads: int | None = None):
        self.model, self.tokenizer, meta = _load_frozen(str(checkpoint or DEFAULT_CHECKPOINT), device or "cpu")
        if meta.get("kind") != "mdlm":
            raise ValueError(f"{checkpoint}: not a masked-diffusion checkpoint (kind={meta.get('kind')!r})")
        self.max_prompt_tokens = meta["max_prompt_tokens"]
        self.gen_length = meta["max_answer_tokens"]
        self.temperature, self.threshold, self.block_length, self.cache = temperature, threshold, block_length, cache
        self.steps = steps or self.gen_length
        self.threads = threads

    @torch.no_grad()
    def generate(self, prompts: list[str], n: int, seed: int) -> list[str]:
        """``len(prompts) * n`` raw texts: the n samples of prompt 0 first.

        Each prompt's n samples are one batch of their own, sampled from a generator seeded with
        `seed`: batching prompts together would let the others change a prompt's texts (its
        left padding and its share of the random stream).
        """
        saved_threads = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        try:
            return [text for prompt in prompts for text in self._sample(prompt, n, seed)]
        finally:
            torch.set_num_threads(saved_threads)

    def _sample(self, prompt: str, n: int, seed: int) -> list[str]:
        row = prompt_ids(self.tokenizer, prompt, self.max_prompt_tokens)
        device = self.model.device
        ids = torch.tensor([row] * n, dtype=torch.long, device=device)  # (n, P): no padding needed
        out = fast_generate(self.model, ids, torch.ones_like(ids), steps=self.steps, gen_length=self.gen_length,
                            block_length=self.block_length, temperature=self.temperature,
                            mask_id=self.tokenizer.mask_token_id, threshold=self.threshold, cache=self.cache,
                            eos_id=self.tokenizer.eos_token_id,
                            generator=torch.Generator(device=device).manual_seed(seed))
        return [decode_answer(self.tokenizer, answer) for answer in out.sequences[:, len(row):].tolist()]
