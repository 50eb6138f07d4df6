"""The frozen JSON-record generator of PromptEdit-JSON: any local language-model folder behind
``generate(prompts, n, seed) -> list[str]``.

`RecordGenerator` takes a folder and finds out what it holds: a masked-diffusion LM (a
checkpoint trained here with meta kind ``"mdlm"``, a LLaDA-style folder with
``is_causal: false``, or LLaDA-8B / Dream with their own model code, loaded only with
``trust_remote_code=True``), sampled by the fast sampler
(`lmgym.models.diffusion.fast_generate`: threshold decoding, DualCache where the model takes
a cache, stop once every record has ended); or a causal LM (a checkpoint trained here with kind
``"ar"``, or any Hugging Face causal folder), sampled token by token with a KV cache
(`lmgym.models.generation.generate`). Both sample at temperature 1 by default, so the n
records for one prompt differ; the output is a pure function of (prompts, n, seed).

`DiffusionRecordGenerator` (the env's default entry point) and `AutoregressiveRecordGenerator`
are the same class insisting on one kind, with the committed tiny models as defaults:
``zoo/json_records_mdlm`` (the diffusion generator) and
``zoo/json_records_ar`` (the AR comparison: same size, same data), each
about 2 MB, so a fresh clone without data works. They are rebuilt by::

    LMGYM_DATA=/path/to/data python examples/train_tiny_mdlm.py --out runs/json_mdlm --install
    LMGYM_DATA=/path/to/data python examples/train_tiny_mdlm.py --objective ar --out runs/json_ar --install

Env entry point: ``generator="lmgym.components.record_generator:DiffusionRecordGenerator"``; a
LLaDA-8B folder on a GPU: ``generator="lmgym.components.record_generator:RecordGenerator"`` with
``generator_kwargs={"checkpoint": "/models/LLaDA-8B-Instruct", "trust_remote_code": True}``.
"""

from __future__ import annotations

import functools
import os

import torch

from lmgym.models import zoo
from lmgym.models.backends import is_diffusion_folder
from lmgym.models.checkpoints import load_checkpoint
from lmgym.models.diffusion import fast_generate
from lmgym.models.generation import generate as generate_causal
from lmgym.models.tokenizer import chat_prompt_ids, decode_answer, is_lmgym_tokenizer, prompt_ids

#: Zoo names of the committed models (`examples/train_tiny_mdlm.py --install` writes them).
DEFAULT_CHECKPOINT = "json_records_mdlm"
AR_CHECKPOINT = "json_records_ar"
#: {"starting" | "specified" | "held_out": {task: prompt}} stored beside the committed
#: checkpoints, for benchmarks without data
EVAL_PROMPTS_FILE = "eval_prompts.json"
#: the semi-autoregressive block the default model is trained and sampled with
BLOCK_LENGTH = 32
KIND_NAMES = {"mdlm": "masked-diffusion", "ar": "causal"}
#: answer and prompt budgets (tokens) for a folder that was not trained here
DEFAULT_ANSWER_TOKENS, DEFAULT_PROMPT_TOKENS = 128, 1024


@functools.lru_cache(maxsize=4)
def _load_frozen(folder: str, device: str | None, trust_remote_code: bool):
    """(model, tokenizer, meta) of a folder, loaded once per process: the model is frozen
    (only read under no_grad), so every env of a process can share it."""
    return load_checkpoint(folder, device=device, trust_remote_code=trust_remote_code)


class RecordGenerator:
    """n records per prompt from a masked-diffusion or causal LM folder, prompt-major, seeded.

    Args:
        checkpoint: a local model folder (default: the committed tiny diffusion generator).
        temperature: sampling temperature (0: the n records of a prompt are identical).
        threshold: Fast-dLLM confidence threshold (None: LLaDA's fixed schedule of ``steps``); diffusion only.
        cache: "none", "prefix" or "dual" (`lmgym.models.diffusion.fast_generate`); diffusion only.
        block_length: semi-autoregressive block (a divisor of the answer length); diffusion only.
        steps: denoising steps when ``threshold`` is None (default: one per answer token).
        max_new_tokens: answer length (default: the checkpoint's, else 128).
        trust_remote_code: allow a folder's own model code (LLaDA-8B, Dream); read it first.
        threads: torch CPU threads while generating (None: leave as is).
    """

    #: the kind a subclass insists on ("mdlm" or "ar"); None takes either
    required_kind: str | None = None
    default_checkpoint: str = DEFAULT_CHECKPOINT

    def __init__(self, checkpoint: str | os.PathLike | None = None, temperature: float = 1.0,
                 threshold: float | None = 0.9, block_length: int = BLOCK_LENGTH, steps: int | None = None,
                 cache: str = "dual", device: str | None = None, threads: int | None = None,
                 max_new_tokens: int | None = None, trust_remote_code: bool = False):
        folder = zoo.resolve(checkpoint or self.default_checkpoint)
        if not folder.is_dir():
            raise FileNotFoundError(f"generator folder {str(folder)!r} does not exist")
        self.kind = "mdlm" if is_diffusion_folder(folder) else "ar"
        if self.required_kind and self.kind != self.required_kind:
            raise ValueError(f"{folder} holds a {KIND_NAMES[self.kind]} LM, but {type(self).__name__} needs a "
                             f"{KIND_NAMES[self.required_kind]} one (RecordGenerator takes either)")
        self.model, self.tokenizer, meta = _load_frozen(str(folder), device, trust_remote_code)
        self.max_prompt_tokens = meta.get("max_prompt_tokens", DEFAULT_PROMPT_TOKENS)
        self.gen_length = max_new_tokens or meta.get("max_answer_tokens", DEFAULT_ANSWER_TOKENS)
        config = self.model.config
        # the first that is set (an id of 0 is a real id, so no `or` chain)
        self.mask_id = next((i for i in (meta.get("mask_token_id"), getattr(config, "mask_token_id", None),
                                         self.tokenizer.mask_token_id) if i is not None), None)
        if self.kind == "mdlm" and self.mask_id is None:
            raise ValueError(f"{folder}: a masked-diffusion folder without a [MASK] token id")
        self.eos_id = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else config.eos_token_id
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

    def prompt_row(self, prompt: str) -> list[int]:
        """The prompt as the model reads it: ``[BOS] prompt [SEP]`` for a model trained here, a
        user turn through the chat template for an instruct model, else plain tokens."""
        if is_lmgym_tokenizer(self.tokenizer):
            return prompt_ids(self.tokenizer, prompt, self.max_prompt_tokens)
        return chat_prompt_ids(self.tokenizer, prompt, plain_without_template=True)[-self.max_prompt_tokens:]

    def _sample(self, prompt: str, n: int, seed: int) -> list[str]:
        row = self.prompt_row(prompt)
        device = self.model.device
        ids = torch.tensor([row] * n, dtype=torch.long, device=device)  # (n, P): no padding needed
        generator = torch.Generator(device=device).manual_seed(seed)
        if self.kind == "mdlm":
            out = fast_generate(self.model, ids, torch.ones_like(ids), steps=self.steps, gen_length=self.gen_length,
                                block_length=self.block_length, temperature=self.temperature, mask_id=self.mask_id,
                                threshold=self.threshold, cache=self.cache, eos_id=self.eos_id, generator=generator)
            answers = out.sequences[:, len(row):].tolist()  # (n, gen_length)
        else:
            out = generate_causal(self.model, ids, max_new_tokens=self.gen_length, temperature=self.temperature,
                                  eos_token_id=self.eos_id, generator=generator)
            answers = out.tokens.tolist()  # (n, up to gen_length), finished rows padded with EOS
        return [decode_answer(self.tokenizer, answer) for answer in answers]


class DiffusionRecordGenerator(RecordGenerator):
    """`RecordGenerator` over a masked-diffusion folder (default: the committed tiny MDLM)."""

    required_kind = "mdlm"


class AutoregressiveRecordGenerator(RecordGenerator):
    """`RecordGenerator` over a causal LM folder (default: the committed tiny AR comparison)."""

    required_kind = "ar"
    default_checkpoint = AR_CHECKPOINT
