"""Export a causal LM trained or loaded here to GGUF, the file format llama.cpp runs.

``export_gguf("react/alfworld-ar", "alfworld.gguf")`` writes one self-contained file: the
weights (f16 or f32), the hyper-parameters and the tokenizer (vocabulary, merges, special
tokens, chat template), so ``llama_cpp.Llama(model_path=...)`` tokenizes a prompt to the same
ids as the Hugging Face tokenizer and decodes the same greedy tokens as torch (tested:
tests/models/test_export.py). `write_gguf` does the same for a model already in memory, as an
RL loop holds it, without saving and reloading a checkpoint.

What it takes: Llama-architecture causal LMs (``LlamaForCausalLM``: the tiny models trained
here, SmolLM2 and its fine-tunes), with a byte-level BPE tokenizer (lmgym's own, SmolLM2's).
A LoRA checkpoint is merged into its base (``lora="merge"``: W + scaling B A, peft's own
``get_delta_weight``), or written as a llama.cpp LoRA adapter (``lora="adapter"``: load it
with ``Llama(model_path=<the base's GGUF>, lora_path=...)``). Masked-diffusion LMs,
other architectures and other tokenizer kinds are refused with one line.

The layout follows llama.cpp's own converter (ggml-org/llama.cpp ``convert_hf_to_gguf.py``:
``LlamaModel`` and ``TextModel.get_vocab_base`` / ``_set_vocab_gpt2``;
``convert_lora_to_gguf.py`` for adapters), written here against the ``gguf`` package:

* tensor names from gguf-py's ``TensorNameMap`` (``model.layers.0.self_attn.q_proj`` ->
  ``blk.0.attn_q``); a tied output layer is left out (llama.cpp reuses ``token_embd``);
* the query and key projections are permuted row-wise (`permute_rows`): Hugging Face's
  rotary embedding rotates the two halves of each head (``rotate_half``), llama.cpp's
  ``llama`` architecture rotates adjacent pairs, and this permutation maps one onto the other;
* one-dimensional tensors (norms) stay float32, as the converter keeps them;
* the tokenizer is ``tokenizer.ggml.model = "gpt2"`` (byte-level BPE, tokens in their
  byte-to-unicode spelling) with a pre-tokenizer that splits text as the Hugging Face one
  does: ``ByteLevel(use_regex=True)`` alone is llama.cpp's ``"gpt-2"``; with individual digits
  split first (``train_bpe_tokenizer(split_digits=True)``) it is ``"smollm"``. Added special
  tokens are CONTROL tokens, so llama.cpp parses ``<|bos|>``/``<|sep|>`` in a prompt;
  ``add_bos_token`` is whatever the Hugging Face tokenizer does on ``encode``.

Command line::

    python -m lmgym.models.export CHECKPOINT OUT.gguf [--dtype f16|f32] [--lora merge|adapter]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import torch

from lmgym.errors import InputError

#: Weight types for tensors of two or more dimensions (1-D tensors are always f32).
DTYPES = ("f16", "f32")
LORA_MODES = ("merge", "adapter")
#: Hugging Face architectures and the llama.cpp architecture that runs them.
ARCHITECTURES = {"LlamaForCausalLM": "llama"}


def export_gguf(checkpoint: str | os.PathLike, out: str | os.PathLike, *, dtype: str = "f16",
                lora: str = "merge") -> Path:
    """Write the checkpoint folder, zoo name or ``"smollm2"`` as a GGUF file at `out` (atomically).

    A LoRA checkpoint is merged into its base (``lora="merge"``) or written as a llama.cpp
    adapter for the base's own GGUF (``lora="adapter"``; export the base with this function).
    """
    _check_choice("dtype", dtype, DTYPES)
    _check_choice("lora", lora, LORA_MODES)
    from lmgym.models.backends.hf import load_causal_lm

    try:
        model, tokenizer = load_causal_lm(checkpoint, device="cpu", dtype=torch.float32)
    except (FileNotFoundError, OSError) as error:
        raise InputError(f"cannot export {str(checkpoint)!r}: {error}") from None
    return write_gguf(model, tokenizer, out, dtype=dtype, lora=lora, name=Path(str(checkpoint)).name)


def write_gguf(model, tokenizer, out: str | os.PathLike, *, dtype: str = "f16", lora: str = "merge",
               name: str | None = None) -> Path:
    """Write an in-memory causal LM (a `PreTrainedModel` or a peft LoRA model over one) and its
    tokenizer as a GGUF file at `out`, atomically. The model is not changed."""
    _check_choice("dtype", dtype, DTYPES)
    _check_choice("lora", lora, LORA_MODES)
    import gguf

    is_lora = hasattr(model, "peft_config")
    base = model.get_base_model() if is_lora else model
    config = base.config
    arch = _architecture(config)
    out = Path(out)
    with _atomic_path(out) as tmp:
        writer = gguf.GGUFWriter(tmp, arch)
        writer.add_name(name or out.stem)
        if is_lora and lora == "adapter":
            writer.add_type(gguf.GGUFType.ADAPTER)
            writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
            alpha, tensors = _adapter_tensors(model, config, len(tokenizer))
            writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
        else:
            _add_hyperparameters(writer, config, dtype)
            _add_tokenizer(writer, tokenizer, config.vocab_size)
            tensors = _model_tensors(_merged_state(model) if is_lora else base.state_dict(), config)
        for tensor_name, array in tensors:
            writer.add_tensor(tensor_name, _cast(array, dtype))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    return out


# --------------------------------------------------------------------------- hyper-parameters

def _architecture(config) -> str:
    names = list(getattr(config, "architectures", None) or [])
    arch = next((ARCHITECTURES[n] for n in names if n in ARCHITECTURES), None)
    if arch is None and getattr(config, "model_type", None) == "llama":
        arch = "llama"
    if arch is None:
        raise InputError(f"GGUF export supports {sorted(ARCHITECTURES)}; this model is {names or config.model_type}")
    if getattr(config, "is_causal", True) is False:
        raise InputError("GGUF export: this is a masked-diffusion (bidirectional) LM; llama.cpp runs causal LMs only")
    if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
        raise InputError("GGUF export: Llama models with attention or MLP biases are not supported")
    rope = _rope(config)
    if rope.get("rope_type", "default") != "default":
        raise InputError(f"GGUF export: rope scaling {rope.get('rope_type')!r} is not supported (default RoPE only)")
    return arch


def _rope(config) -> dict[str, Any]:
    """RoPE settings: transformers 5 keeps them in ``rope_parameters``, older configs at the top."""
    rope = dict(getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {})
    rope.setdefault("rope_theta", getattr(config, "rope_theta", 10000.0))
    return rope


def _head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def _add_hyperparameters(writer, config, dtype: str) -> None:
    import gguf

    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads or config.num_attention_heads)
    writer.add_rope_freq_base(float(_rope(config)["rope_theta"]))
    writer.add_layer_norm_rms_eps(float(config.rms_norm_eps))
    head_dim = _head_dim(config)
    writer.add_rope_dimension_count(head_dim)
    if head_dim != config.hidden_size // config.num_attention_heads:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if dtype == "f16" else gguf.LlamaFileType.ALL_F32)


# --------------------------------------------------------------------------- tokenizer

def pretokenizer_name(spec: Mapping[str, Any] | None) -> str:
    """llama.cpp's pre-tokenizer that splits text as a Hugging Face ``pre_tokenizer`` does.

    llama.cpp's ``"gpt-2"`` is GPT-2's regex (what ``ByteLevel(use_regex=True)`` applies);
    its ``"smollm"`` applies ``\\p{N}`` (each digit alone) and then the same regex, which is
    ``Sequence([Digits(individual_digits=True), ByteLevel(...)])`` (llama.cpp
    ``src/llama-vocab.cpp``, ``LLAMA_VOCAB_PRE_TYPE_GPT2`` / ``LLAMA_VOCAB_PRE_TYPE_SMOLLM``).
    """
    def byte_level(step: Mapping[str, Any]) -> bool:
        return step.get("type") == "ByteLevel" and step.get("use_regex", True) and not step.get("add_prefix_space")

    spec = spec or {}
    if byte_level(spec):
        return "gpt-2"
    steps = spec.get("pretokenizers") or []
    if (spec.get("type") == "Sequence" and len(steps) == 2 and steps[0].get("type") == "Digits"
            and steps[0].get("individual_digits") and byte_level(steps[1])):
        return "smollm"
    raise InputError(f"GGUF export: no llama.cpp pre-tokenizer splits text as this one does: {json.dumps(spec)}")


def _add_tokenizer(writer, tokenizer, vocab_size: int) -> None:
    """Vocabulary, merges, special ids and chat template (llama.cpp ``_set_vocab_gpt2``)."""
    import gguf

    spec = json.loads(tokenizer.backend_tokenizer.to_str()) if hasattr(tokenizer, "backend_tokenizer") else {}
    bpe = spec.get("model") or {}
    if bpe.get("type") != "BPE" or bpe.get("byte_fallback") or spec.get("normalizer"):
        raise InputError("GGUF export: the tokenizer must be a byte-level BPE without a normalizer "
                         f"(got model {bpe.get('type')!r}, normalizer {spec.get('normalizer')})")
    pre = pretokenizer_name(spec.get("pre_tokenizer"))
    vocab = tokenizer.get_vocab()
    if max(vocab.values()) >= vocab_size:
        raise InputError(f"GGUF export: the tokenizer has ids up to {max(vocab.values())} but the model only "
                         f"{vocab_size} embeddings")
    by_id = {index: token for token, index in vocab.items()}
    added = {index: token for index, token in tokenizer.added_tokens_decoder.items()}
    tokens, types = [], []
    for index in range(vocab_size):
        if index not in by_id:  # embedding rows no token uses (a vocabulary padded to a round size)
            tokens.append(f"[PAD{index}]")
            types.append(gguf.TokenType.UNUSED)
        elif index in added:
            tokens.append(added[index].content)
            types.append(gguf.TokenType.CONTROL if added[index].special else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(by_id[index])
            types.append(gguf.TokenType.NORMAL)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in bpe.get("merges", [])])
    special = {"bos": tokenizer.bos_token_id, "eos": tokenizer.eos_token_id, "pad": tokenizer.pad_token_id,
               "unk": tokenizer.unk_token_id, "sep": tokenizer.sep_token_id, "mask": tokenizer.mask_token_id}
    for kind, index in special.items():
        if index is not None:
            getattr(writer, f"add_{kind}_token_id")(int(index))
    probe = tokenizer.encode("a")
    writer.add_add_bos_token(tokenizer.bos_token_id is not None and probe[:1] == [tokenizer.bos_token_id])
    writer.add_add_eos_token(tokenizer.eos_token_id is not None and probe[-1:] == [tokenizer.eos_token_id])
    if tokenizer.chat_template:
        writer.add_chat_template(tokenizer.chat_template)


# --------------------------------------------------------------------------- tensors

def permute_rows(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """Reorder each head's output rows from halves (x_0..x_{d/2-1} | x_{d/2}..) to pairs.

    Hugging Face Llama applies RoPE to (x_i, x_{i+d/2}); llama.cpp's ``llama`` architecture to
    (x_{2i}, x_{2i+1}). Rows [h, half, i] -> [h, i, half] make the two agree (llama.cpp
    ``convert_hf_to_gguf.py``, ``LlamaModel.permute``, the inverse of transformers'
    ``convert_llama_weights_to_hf.py`` permute).
    """
    return (weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
            .transpose(1, 2).reshape(weight.shape))


def _rows_permutation(hf_name: str, config) -> int | None:
    """The head count to permute `hf_name`'s rows by (query: attention heads, key: KV heads)."""
    if hf_name.endswith("self_attn.q_proj"):
        return config.num_attention_heads
    if hf_name.endswith("self_attn.k_proj"):
        return config.num_key_value_heads or config.num_attention_heads
    return None


def _name_map(config):
    import gguf

    return gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)


def _model_tensors(state: Mapping[str, torch.Tensor], config) -> Iterator[tuple[str, np.ndarray]]:
    names = _name_map(config)
    tied = getattr(config, "tie_word_embeddings", False)
    for hf_name, tensor in state.items():
        if hf_name.endswith("rotary_emb.inv_freq") or (tied and hf_name == "lm_head.weight"):
            continue  # recomputed by llama.cpp / the same matrix as the input embedding
        gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise InputError(f"GGUF export: tensor {hf_name!r} has no llama.cpp name")
        module = hf_name.rsplit(".", 1)[0]
        heads = _rows_permutation(module, config)
        tensor = tensor.detach().float()
        yield gguf_name, (permute_rows(tensor, heads) if heads else tensor).numpy()


def _lora_layers(model) -> dict[str, Any]:
    from peft.tuners.lora import LoraLayer

    return {name: module for name, module in model.get_base_model().named_modules() if isinstance(module, LoraLayer)}


def _merged_state(model) -> dict[str, torch.Tensor]:
    """The base model's state with every active LoRA adapter added (W + scaling B A), computed
    by peft's ``get_delta_weight``; the model itself is left as it is (still trainable)."""
    state = {}
    for key, tensor in model.get_base_model().state_dict().items():
        if ".lora_" not in key:
            state[key.replace(".base_layer.", ".")] = tensor
    for name, layer in _lora_layers(model).items():
        for adapter in layer.active_adapters:
            if adapter in layer.lora_A or adapter in getattr(layer, "lora_embedding_A", {}):
                state[f"{name}.weight"] = state[f"{name}.weight"] + layer.get_delta_weight(adapter).to(state[f"{name}.weight"].dtype)
    return state


def _adapter_tensors(model, config, tokenizer_size: int) -> tuple[float, list[tuple[str, np.ndarray]]]:
    """llama.cpp LoRA tensors (``<base tensor>.lora_a`` = A (r, in), ``.lora_b`` = B (out, r))
    and the alpha that makes llama.cpp's scale ``alpha / r`` equal peft's ``scaling``
    (``llama-adapter.cpp``; ``convert_lora_to_gguf.py``)."""
    if tokenizer_size > config.vocab_size or getattr(model, "modules_to_save", None):
        raise InputError("GGUF export: this adapter also changes the embedding; export it with lora='merge'")
    names = _name_map(config)
    alphas, tensors = set(), []
    for name, layer in _lora_layers(model).items():
        [adapter] = layer.active_adapters
        if adapter not in layer.lora_A:
            raise InputError(f"GGUF export: {name} holds a LoRA kind llama.cpp adapters do not take; use lora='merge'")
        a = layer.lora_A[adapter].weight.detach().float()
        b = layer.lora_B[adapter].weight.detach().float()
        alphas.add(round(layer.scaling[adapter] * a.shape[0], 6))
        heads = _rows_permutation(name, config)
        gguf_name = names.get_name(name + ".weight", try_suffixes=(".weight",))
        if gguf_name is None:
            raise InputError(f"GGUF export: LoRA target {name!r} has no llama.cpp name")
        tensors += [(gguf_name + ".lora_a", a.numpy()),
                    (gguf_name + ".lora_b", (permute_rows(b, heads) if heads else b).numpy())]
    if len(alphas) != 1:
        raise InputError(f"GGUF export: a llama.cpp adapter has one alpha / r; this one has several scalings {sorted(alphas)}")
    return alphas.pop(), tensors


def _cast(array: np.ndarray, dtype: str) -> np.ndarray:
    return array.astype(np.float16 if dtype == "f16" and array.ndim > 1 else np.float32)


def _check_choice(what: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InputError(f"GGUF export: {what} must be one of {list(choices)}, got {value!r}")


@contextlib.contextmanager
def _atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` to write a file at, renamed over `path` when the block
    ends and removed if it raises (`lmgym.io` writes text and folders this way; GGUFWriter
    needs a path). The file gets an existing file's mode, else rw-r--r--."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmgym.models.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint folder, a zoo name (react/alfworld-ar) or 'smollm2'")
    parser.add_argument("out", help="the .gguf file to write")
    parser.add_argument("--dtype", choices=DTYPES, default="f16", help="weight type of matrices (norms stay f32)")
    parser.add_argument("--lora", choices=LORA_MODES, default="merge",
                        help="a LoRA checkpoint: merged into its base, or a llama.cpp adapter file")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        path = export_gguf(args.checkpoint, args.out, dtype=args.dtype, lora=args.lora)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - start:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
