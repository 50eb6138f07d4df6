"""Real checkpoint folders from other projects through `load_local_model` and both samplers.

LLaDA-8B-Instruct's published folder (custom code) is rebuilt here at a tiny size with random
weights from its own files in shared/reference/llada (copied into tmp at test time, never into
the repo); Qwen3 and a LLaDA-style Llama (``is_causal=False``) are transformers' own classes.
"""

import json
import os
import shutil
import warnings

import pytest
import safetensors.torch
import torch
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM
from transformers.dynamic_module_utils import get_class_from_dynamic_module

from tiny_models import LLADA_REFERENCE, reference_folder, save_tiny_llada

from lmgym.models.diffusion import cache_argument, fast_generate, generate
from lmgym.models.networks import (
    ShiftedLogits,
    convert_llada_to_llama,
    llada_llama_config,
    load_local_model,
    remote_code_compat,
)

#: Dream-org/Dream-v0-Instruct-7B's folder files (no weights); not in shared/reference yet.
DREAM_REFERENCE = reference_folder() / "dream"
VOCAB, MASK_ID, EOS_ID = 256, 255, 254
TINY_LLADA = dict(d_model=64, n_layers=2, n_heads=4, n_kv_heads=4, mlp_hidden_size=128, vocab_size=VOCAB,
                  embedding_size=VOCAB, mask_token_id=MASK_ID, eos_token_id=EOS_ID, pad_token_id=EOS_ID,
                  max_sequence_length=256)
#: transformers copies a folder's code to ~/.cache/huggingface/modules/<folder name>/: one name per
#: pytest-xdist worker, so two workers never write the same module at once
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
SAMPLER = dict(steps=8, gen_length=8, block_length=4, mask_id=MASK_ID)

needs_dream = pytest.mark.skipif(not (DREAM_REFERENCE / "modeling_dream.py").exists(),
                                 reason=f"Dream's published files are not at {DREAM_REFERENCE} (shared/reference)")
needs_reference = pytest.mark.skipif(not (LLADA_REFERENCE / "modeling_llada.py").exists(),
                                     reason=f"LLaDA's published files are not at {LLADA_REFERENCE} (shared/reference)")


@pytest.fixture(scope="module")
def llada_folder(tmp_path_factory):
    """A 2-layer, d_model 64 LLaDA folder: the published code and config, shrunk, random weights."""
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("llada") / f"LLaDA-tiny-{WORKER}"
    return folder, save_tiny_llada(folder, TINY_LLADA)


@needs_reference
def test_published_llada_code_does_not_load_unshimmed(llada_folder):
    folder, _ = llada_folder
    with pytest.raises(AttributeError, match="all_tied_weights_keys"):  # the README's first error
        AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True, local_files_only=True)


@needs_reference
def test_llada_folder_loads_with_its_own_weights(llada_folder):
    folder, original = llada_folder
    with pytest.raises(ValueError, match="ships its own model code .modeling_llada.py.*trust_remote_code=True"):
        load_local_model(folder)
    model = load_local_model(folder, trust_remote_code=True, dtype=torch.float32)
    assert type(model).__name__ == "LLaDAModelLM" and not model.training
    assert model.config.use_cache is False
    x = torch.randint(0, MASK_ID, (2, 7))
    original.config.use_cache = False  # the unpatched config lacks it (the README's third error)
    torch.testing.assert_close(model(x).logits, original(x).logits)
    changed = x.clone()
    changed[:, -1] = (changed[:, -1] + 1) % MASK_ID
    assert not torch.allclose(model(x).logits[:, 0], model(changed).logits[:, 0])  # bidirectional


def record_fed_widths(model) -> list[int]:
    """The number of tokens each forward call of `model` is fed, appended as calls happen."""
    widths = []
    model.register_forward_pre_hook(lambda module, args, kwargs: widths.append(
        (args[0] if args else kwargs["input_ids"]).shape[1]), with_kwargs=True)
    return widths


@needs_reference
def test_samplers_run_on_llada_and_fall_back_to_no_cache(llada_folder):
    folder, _ = llada_folder
    model = load_local_model(folder, trust_remote_code=True, dtype=torch.float32)
    widths = record_fed_widths(model)
    prompt = torch.randint(0, MASK_ID - 1, (2, 5))
    reference = generate(model, prompt, **SAMPLER)
    assert reference.shape == (2, 13) and torch.equal(reference[:, :5], prompt)
    assert cache_argument(model) is None  # no position_ids, and it asserts it gets no cache
    plain = fast_generate(model, prompt, threshold=None, cache="none", **SAMPLER)
    assert torch.equal(plain.sequences, reference)  # fast_generate without its extras is `generate`
    for cache in ("prefix", "dual"):
        widths.clear()
        with pytest.warns(UserWarning, match=r"LLaDAModelLM.forward takes no KV cache.*falls back to 'none'"):
            out = fast_generate(model, prompt, threshold=None, cache=cache, **SAMPLER)
        assert torch.equal(out.sequences, reference)
        assert widths == [13] * 8  # every step fed the whole canvas


@needs_reference
def test_llada_converted_to_llama_layout_computes_the_same_and_takes_the_cache(llada_folder, tmp_path):
    folder, _ = llada_folder
    published = load_local_model(folder, trust_remote_code=True, dtype=torch.float32)
    converted = load_local_model(convert_llada_to_llama(folder, tmp_path / "llama"), dtype=torch.float32)
    assert type(converted) is LlamaForCausalLM and converted.config.is_causal is False
    assert (converted.config.mask_token_id, converted.config.bos_token_id) == (MASK_ID, 126080)
    x = torch.randint(0, MASK_ID, (2, 9))
    torch.testing.assert_close(converted(x).logits, published(x).logits)
    prompt = torch.randint(0, MASK_ID - 1, (2, 5))
    assert torch.equal(generate(converted, prompt, **SAMPLER), generate(published, prompt, **SAMPLER))
    widths = record_fed_widths(converted)
    fast_generate(converted, prompt, threshold=None, cache="dual", **SAMPLER)
    assert widths == [13, 4, 4, 4] * 2  # the DualCache is used: after a block's first step, the block alone
    with pytest.raises(FileExistsError):
        convert_llada_to_llama(folder, tmp_path / "llama")


def test_llada_configs_without_a_llama_equivalent_are_refused():
    with pytest.raises(ValueError, match=r"no Llama equivalent: \{'alibi': True\}"):
        llada_llama_config({**TINY_LLADA, "alibi": True, "rope_theta": 1e4, "rms_norm_eps": 1e-5})


def test_the_fallback_notice_is_shown_once_per_model_class():
    def no_cache_model(x, attention_mask=None):  # a forward like LLaDA's: no cache, no position_ids
        return type("Output", (), {"logits": torch.randn(x.shape[0], x.shape[1], 8)})()

    prompt = torch.zeros((1, 3), dtype=torch.long)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's own filter: each message once per call site
        for _ in range(3):
            fast_generate(no_cache_model, prompt, steps=2, gen_length=2, block_length=2, mask_id=7, cache="prefix")
    assert [str(w.message).count("falls back") for w in caught] == [1]


def _qwen3():
    config = Qwen3Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, head_dim=8,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return Qwen3ForCausalLM(config)


def _llama_layout_llada():
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, is_causal=False,
                         rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)
    return LlamaForCausalLM(config)


@pytest.mark.parametrize("build", [_qwen3, _llama_layout_llada], ids=["qwen3", "llada-llama-layout"])
def test_transformers_folders_decode_with_the_kv_cache(tmp_path, build):
    torch.manual_seed(0)
    build().save_pretrained(tmp_path / "model")
    model = load_local_model(tmp_path / "model", dtype=torch.float32)
    widths = record_fed_widths(model)
    assert cache_argument(model) == "cache"
    prompt = torch.randint(0, MASK_ID - 1, (2, 5))
    reference = generate(model, prompt, **SAMPLER)
    plain = fast_generate(model, prompt, threshold=None, cache="none", **SAMPLER)
    assert torch.equal(plain.sequences, reference)
    # per block of 4 (4 steps each): the whole canvas once, then the suffix from the block on
    # (prefix cache) or the block alone (DualCache)
    expected = {"prefix": [13, 8, 8, 8, 13, 4, 4, 4], "dual": [13, 4, 4, 4] * 2}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a cache-capable model must not fall back
        for cache, fed in expected.items():
            widths.clear()
            out = fast_generate(model, prompt, threshold=None, cache=cache, **SAMPLER)
            assert widths == fed
            assert torch.equal(out.sequences[:, :5], prompt) and not (out.sequences[:, 5:] == MASK_ID).any()


@needs_dream
def test_dream_folder_loads_and_decodes_through_the_shifted_logits(tmp_path):
    """Dream's published code meets three more v5 changes (`remote_code_compat` patches 3-5)."""
    torch.set_num_threads(1)
    folder = tmp_path / f"Dream-tiny-{WORKER}"
    folder.mkdir()
    for name in ("configuration_dream.py", "modeling_dream.py", "generation_utils.py", "generation_config.json"):
        shutil.copyfile(DREAM_REFERENCE / name, folder / name)
    config = json.loads((DREAM_REFERENCE / "config.json").read_text())
    tiny = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                vocab_size=VOCAB, mask_token_id=MASK_ID, bos_token_id=EOS_ID, eos_token_id=EOS_ID, pad_token_id=EOS_ID,
                max_position_embeddings=256)
    (folder / "config.json").write_text(json.dumps({**config, **tiny}))
    # Random float32 weights from the published class, built directly (not from a checkpoint, so
    # its rotary buffers are computed, not loaded); even that needs patch 3 ("default" RoPE).
    published_class = get_class_from_dynamic_module(config["auto_map"]["AutoModel"], str(folder))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        published = remote_code_compat(published_class)(AutoConfig.from_pretrained(folder, trust_remote_code=True))
    safetensors.torch.save_model(published.eval(), str(folder / "model.safetensors"), metadata={"format": "pt"})
    model = load_local_model(folder, trust_remote_code=True, dtype=torch.float32)  # patch 4 on the way
    assert type(model).__name__ == "DreamModel"
    x = torch.randint(0, MASK_ID, (2, 7))
    torch.testing.assert_close(model(x).logits, published(x).logits)  # patch 5: the rotary buffers are right
    predictor = ShiftedLogits(model)
    shifted = predictor(x).logits
    torch.testing.assert_close(shifted[:, 1:], model(x).logits[:, :-1])  # position i reads the logits of i - 1
    left_padded = torch.ones((2, 7), dtype=torch.long)
    left_padded[1, :2] = 0
    padded_logits = predictor(x, attention_mask=left_padded).logits
    torch.testing.assert_close(padded_logits[0], shifted[0])  # a row without padding is unchanged
    torch.testing.assert_close(padded_logits[1, 3:], predictor(x[1:, 2:]).logits[0, 1:])  # padding is invisible
    prompt = torch.randint(0, MASK_ID - 1, (2, 5))
    reference = generate(predictor, prompt, **SAMPLER)
    with pytest.warns(UserWarning, match="ShiftedLogits.forward takes no KV cache"):
        fast = fast_generate(predictor, prompt, threshold=None, cache="prefix", **SAMPLER)
    assert torch.equal(fast.sequences, reference) and not (reference[:, 5:] == MASK_ID).any()
    # Dream's own API runs too (its generation config has no mask id: pass the model's)
    own = model.diffusion_generate(prompt, generation_config=model.generation_config, mask_token_id=MASK_ID,
                                   max_new_tokens=8, steps=8, alg="entropy", return_dict_in_generate=True)
    assert own.sequences.shape == (2, 13) and not (own.sequences == MASK_ID).any()
