"""Tiny random Llama models for the policy tests (hidden 32, 2 layers: milliseconds per call)."""

import json
import os
import shutil
from pathlib import Path

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


def reference_folder() -> Path:
    """Published files of other projects: $LMGYM_REFERENCE, else shared/reference beside the data
    folder (LMGYM_DATA=shared/data), else beside the checkout."""
    if os.environ.get("LMGYM_REFERENCE"):
        return Path(os.environ["LMGYM_REFERENCE"])
    beside_data = Path(os.environ.get("LMGYM_DATA", "/nonexistent")).parent / "reference"
    return beside_data if beside_data.is_dir() else Path(__file__).resolve().parents[3] / "shared" / "reference"


LLADA_REFERENCE = reference_folder() / "llada"


def save_tiny_llada(folder: Path, config: dict, tokenizer=None):
    """A LLaDA-8B-Instruct folder shrunk by `config` (d_model, n_layers, vocab_size, ...): the
    published code and config, random weights (seed 0), and `tokenizer` saved beside them if
    given. Returns the model built (eval mode)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    import safetensors.torch

    folder.mkdir(parents=True)
    for name in ("configuration_llada.py", "modeling_llada.py", "generation_config.json", "tokenizer_config.json"):
        shutil.copyfile(LLADA_REFERENCE / name, folder / name)
    published = json.loads((LLADA_REFERENCE / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**published, **config}))
    if tokenizer is not None:
        (folder / "tokenizer_config.json").unlink()  # LLaDA's own refers to its 126k-token vocabulary
        tokenizer.save_pretrained(folder)
    # The published class builds fine from a config; it is only loading from a folder that breaks.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder, trust_remote_code=True),
                                                 trust_remote_code=True)
    safetensors.torch.save_model(model, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return model.eval()
