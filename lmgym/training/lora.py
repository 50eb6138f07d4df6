"""LoRA adapters through peft, for any model `lmgym.models` loads (AR or masked diffusion).

LoRA (Hu et al. 2021, arXiv:2106.09685) freezes W and learns W + (alpha / r) B A with rank-r
A, B. `add_lora` wraps a model; `lmgym.training.lm` trains it with ``--lora-r R`` and
`lmgym.models.checkpoints` saves only the adapter, beside the base model's folder name.
"""

from __future__ import annotations

from peft import LoraConfig, PeftModel, get_peft_model
from transformers import PreTrainedModel

#: The attention and MLP projections of Llama, Qwen and LLaDA-style blocks.
LLAMA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def lora_config(r: int = 8, alpha: int = 16, dropout: float = 0.0,
                target_modules: tuple[str, ...] = LLAMA_TARGETS) -> LoraConfig:
    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(target_modules),
                      task_type="CAUSAL_LM")


def add_lora(model: PreTrainedModel, r: int = 8, alpha: int = 16, dropout: float = 0.0,
             target_modules: tuple[str, ...] = LLAMA_TARGETS, adapter_name: str = "default") -> PeftModel:
    """Wrap ``model`` with rank-``r`` adapters named `adapter_name`; only they are trainable
    afterwards (a second adapter: ``model.add_adapter(name, lora_config(...))``)."""
    return get_peft_model(model, lora_config(r, alpha, dropout, target_modules), adapter_name=adapter_name)


def train_adapter(model: PeftModel) -> PeftModel:
    """A LoRA checkpoint loaded for inference (its adapter frozen) made trainable in place, as
    ``PeftModel.from_pretrained(..., is_trainable=True)`` loads it: the adapter's weights only."""
    for name, parameter in model.named_parameters():
        parameter.requires_grad_("lora_" in name)
    return model


def trainable_parameters(model) -> tuple[int, int]:
    """(trainable, total) parameter counts."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return trainable, total
