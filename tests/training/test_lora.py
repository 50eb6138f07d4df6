"""LoRA through peft: only the adapter trains and is saved; it reloads on its base to the same outputs."""

import pytest
import torch

from lmgym.io import append_jsonl
from lmgym.models.checkpoints import load_checkpoint
from lmgym.models.tokenizer import prompt_ids
from lmgym.training.lm import LMTrainConfig, train
from lmgym.training.lora import add_lora, trainable_parameters

TINY = dict(vocab_size=300, hidden_size=32, num_layers=2, num_heads=2, max_prompt_tokens=16, max_answer_tokens=24,
            batch_size=8, warmup=2, log_every=2, threads=1, quiet=True, lr=1e-2)


@pytest.fixture
def records(tmp_path):
    path = tmp_path / "records.jsonl"
    for i in range(12):
        append_jsonl(path, {"prompt": f"Item {i}.", "completion": f'{{"id": {i}, "even": {str(i % 2 == 0).lower()}}}'})
    return path


@pytest.mark.parametrize("objective", ["ar", "mdlm"])
def test_lora_trains_only_the_adapter_and_reloads_on_its_base(records, tmp_path, objective):
    torch.set_num_threads(1)
    base_run = tmp_path / "base"
    train(LMTrainConfig(data=(str(records),), out=str(base_run), objective=objective, steps=4, **TINY))
    base_folder = base_run / "checkpoint"
    metrics = train(LMTrainConfig(data=(str(records),), out=str(tmp_path / "lora"), objective=objective, steps=8,
                                  init=str(base_folder), lora_r=4, **TINY))
    folder = tmp_path / "lora" / "checkpoint"
    assert (folder / "adapter_model.safetensors").exists() and not (folder / "model.safetensors").exists()
    model, tokenizer, meta = load_checkpoint(folder)
    assert meta["base_model"] == str(base_folder) and meta["trainable_parameters"] < meta["parameters"] / 2
    base, _, _ = load_checkpoint(base_folder)
    again, _, _ = load_checkpoint(folder)
    x = torch.tensor([prompt_ids(tokenizer, "Item 3.", 16)])
    with torch.no_grad():
        assert torch.equal(model(x).logits, again(x).logits)  # reload is exact
        assert not torch.allclose(model(x).logits, base(x).logits)  # the adapter changed something
    assert metrics["train/step"] == 8


def test_add_lora_freezes_the_base():
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1))
    wrapped = add_lora(model, r=2)
    trainable, total = trainable_parameters(wrapped)
    assert 0 < trainable < total / 5
    assert all("lora_" in name for name, p in wrapped.named_parameters() if p.requires_grad)
