"""Tiny random Llama models for the policy tests (hidden 32, 2 layers: milliseconds per call)."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB = 40
MASK_ID = VOCAB - 1


def tiny_llama(bidirectional: bool, seed: int = 0) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        is_causal=not bidirectional,
        # a wide init spreads the logits, so confidences are far from ties
        initializer_range=0.5,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


class NeverPredictsMask(torch.nn.Module):
    """A trained masked-diffusion LM never predicts [MASK] (it is never a target); a random one
    may, and a committed [MASK] would stay a hole. This wrapper makes a random model behave."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args, **kwargs):
        out = self.model(*args, **kwargs)
        out.logits[..., MASK_ID] = -torch.inf
        return out
