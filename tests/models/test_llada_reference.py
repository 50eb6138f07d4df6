"""`lmgym.models.diffusion.generate` against LLaDA's own ``generate.py``, token for token, in bfloat16.

The reference is imported from the published file (ML-GSAI/LLaDA ``generate.py``, kept in the
shared reference folder beside the checkout, never copied into the repository). The model is a
tiny random bidirectional Llama in bfloat16 with a small initialisation, so its bfloat16
confidences tie often: the ranking must be done in the model's dtype and ties broken as
``torch.topk`` breaks them, as the reference does.
"""

import importlib.util
import os
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lmgym.models.diffusion import generate

VOCAB, MASK_ID = 48, 47


def _reference_folder() -> Path | None:
    candidates = [Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "llada"]
    if os.environ.get("LMGYM_DATA"):
        candidates.append(Path(os.environ["LMGYM_DATA"]).resolve().parent / "reference" / "llada")
    return next((c for c in candidates if (c / "generate.py").exists()), None)


@pytest.fixture(scope="module")
def llada():
    folder = _reference_folder()
    if folder is None:
        pytest.skip("LLaDA's generate.py is not in ../shared/reference/llada")
    spec = importlib.util.spec_from_file_location("llada_generate", folder / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate


class TinyBF16(torch.nn.Module):
    """A random bidirectional Llama in bfloat16 that never predicts [MASK], with ``.device``
    (the reference reads ``model.device``)."""

    def __init__(self, seed: int):
        super().__init__()
        config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                             is_causal=False, initializer_range=0.02)
        torch.manual_seed(seed)
        self.model = LlamaForCausalLM(config).to(torch.bfloat16).eval()

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def forward(self, x, attention_mask=None):
        out = self.model(x, attention_mask=attention_mask)
        out.logits[..., MASK_ID] = -torch.inf
        return out


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    return TinyBF16(seed=0)


def _prompts(batch: int, length: int, seed: int) -> torch.Tensor:
    return torch.randint(0, MASK_ID, (batch, length), generator=torch.Generator().manual_seed(seed))


def test_the_tiny_model_ties_in_bfloat16(model):
    # The point of the test: without ties the dtype and the tie rule could not matter.
    logits = model(_prompts(1, 20, seed=0)).logits
    top = torch.softmax(logits, dim=-1).max(dim=-1).values[0]
    assert top.dtype == torch.bfloat16 and len(set(top.tolist())) < len(top)


@pytest.mark.parametrize("gen_length,block_length,steps", [(16, 16, 16), (16, 16, 8), (16, 8, 8), (16, 4, 16), (12, 4, 6)])
def test_greedy_is_the_reference_token_for_token(model, llada, gen_length, block_length, steps):
    prompts = _prompts(3, 6, seed=gen_length + block_length + steps)
    kwargs = dict(steps=steps, gen_length=gen_length, block_length=block_length, mask_id=MASK_ID)
    assert torch.equal(generate(model, prompts, **kwargs), llada(model, prompts, **kwargs))


@pytest.mark.parametrize("temperature,remasking", [(0.0, "random"), (0.7, "low_confidence"), (1.0, "random")])
def test_sampling_is_the_reference_with_the_same_global_seed(model, llada, temperature, remasking):
    prompts = _prompts(2, 5, seed=3)
    kwargs = dict(steps=8, gen_length=16, block_length=8, temperature=temperature, remasking=remasking, mask_id=MASK_ID)
    torch.manual_seed(123)
    ours = generate(model, prompts, **kwargs)
    torch.manual_seed(123)
    assert torch.equal(ours, llada(model, prompts, **kwargs))


def test_left_padded_batch_with_guidance_is_the_reference(model, llada):
    prompts = _prompts(3, 7, seed=2)
    attention = torch.ones_like(prompts)
    attention[1, :3] = 0
    attention[2, :5] = 0
    prompts = prompts.masked_fill(attention == 0, 0)
    kwargs = dict(steps=8, gen_length=8, block_length=4, cfg_scale=0.5, mask_id=MASK_ID)
    assert torch.equal(generate(model, prompts, attention, **kwargs), llada(model, prompts, attention, **kwargs))
