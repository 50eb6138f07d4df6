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


def save_tiny_checkpoint(folder, bidirectional: bool):
    """A 2-layer model trained for a few seconds on ReAct-style records (so it writes words,
    not random special tokens), saved as a checkpoint with a tokenizer made here."""
    import json

    from lmgym.training.lm import LMTrainConfig, train

    records = folder / "records.jsonl"
    rows = [{"prompt": f"Task: find the key.\nObservation: You are in room {k}. You see a key.\n",
             "completion": f"Thought: the key is in room {k}.\nAction: take key"} for k in range(8)]
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    train(LMTrainConfig(data=(str(records),), objective="mdlm" if bidirectional else "ar", out=str(folder),
                        vocab_size=300, hidden_size=32, num_layers=2, num_heads=4, max_prompt_tokens=96,
                        max_answer_tokens=32, steps=60, batch_size=8, lr=1e-2, warmup=5, quiet=True, log_every=60))
    return folder / "checkpoint"
