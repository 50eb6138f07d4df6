"""Checkpoints: one folder a Hugging Face loader can open, plus what resuming training needs.

Layout (``save_checkpoint``)::

    folder/
      config.json, model.safetensors      the model (save_pretrained, safetensors)
      tokenizer.json, tokenizer_config.json ...
      lmgym.json                          kind ("ar" or "mdlm"), mask id, step, train config,
                                          base model folder when the weights are a LoRA adapter,
                                          train_panels: the panels its training data came from
      adapter_config.json, adapter_model.safetensors   (LoRA runs, instead of model.safetensors)
      optimizer.pt                        optimizer state (only when resuming is wanted)

The folder is written beside its final place and renamed over it, so a crash mid-save leaves
the previous checkpoint intact.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from lmgym.io import atomic_folder, atomic_write_json
from lmgym.models import zoo
from lmgym.models.networks import load_local_model, model_folder, resize_for_tokenizer
from lmgym.models.tokenizer import load_tokenizer

META_FILE = "lmgym.json"
OPTIMIZER_FILE = "optimizer.pt"
ADAPTER_CONFIG_FILE = "adapter_config.json"
#: Meta key: the panels the training data came from, a list of ``{env_id, env_kwargs, split,
#: n, seeds, task_ids, hash}`` (`lmgym.training.transcripts.train_panels` builds it from the
#: training rollouts). The benchmark runner refuses to evaluate the model on a panel sharing a
#: task id with them (`lmgym.benchmarks.panels`); absent: unknown.
TRAIN_PANELS = "train_panels"


def inherited_panels(folder: str | os.PathLike | None) -> list[dict[str, Any]]:
    """The `TRAIN_PANELS` of a checkpoint a run starts from or learns from (its init, base,
    teacher or editor): its weights carry that data into the new model's. An lmgym checkpoint
    that records none gives one entry of unknown tasks (``task_ids: None``); a model from
    elsewhere (no lmgym meta, e.g. SmolLM2) or None gives none."""
    if folder is None:
        return []
    try:
        path = zoo.resolve(folder)
    except (zoo.ModelNotInstalled, OSError, ValueError):
        return []
    if not (Path(path) / META_FILE).is_file():
        return []
    panels = read_meta(path).get(TRAIN_PANELS)
    if panels is None:
        return [{"source": str(folder), "task_ids": None, "note": "an lmgym checkpoint that records no train_panels"}]
    return [{**panel, "via": panel.get("via") or zoo.label(folder)} for panel in panels]


def is_lora_checkpoint(folder: str | os.PathLike) -> bool:
    """Whether `folder` holds a LoRA adapter (its base named by the meta's ``base_model``), not a whole model."""
    return (Path(folder) / ADAPTER_CONFIG_FILE).is_file()


def save_checkpoint(folder: str | os.PathLike, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                    meta: dict[str, Any], optimizer: torch.optim.Optimizer | None = None) -> Path:
    """Write model (or LoRA adapter), tokenizer, ``meta`` and optionally the optimizer, atomically."""
    folder = Path(folder)
    with atomic_folder(folder) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        atomic_write_json(tmp / META_FILE, meta)
        if optimizer is not None:
            torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
    return folder


def read_meta(folder: str | os.PathLike) -> dict[str, Any]:
    """A checkpoint's meta (``"smollm2"``, a zoo name or a folder); {} for a model from elsewhere."""
    path = model_folder(folder) / META_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def load_checkpoint(folder: str | os.PathLike, *, device: str | None = None, dtype: torch.dtype | str | None = None,
                    trainable: bool = False, trust_remote_code: bool = False
                    ) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, dict[str, Any]]:
    """Model, tokenizer and meta from a checkpoint folder (or any local HF model folder).

    A LoRA checkpoint loads its base model (``meta["base_model"]``) and the adapter on top;
    ``trainable=True`` keeps the adapter trainable (for resuming), else the model is in eval mode.
    ``trust_remote_code``: as `load_local_model` (a folder with its own model code, e.g. LLaDA-8B).
    """
    folder = model_folder(folder)
    meta = read_meta(folder)
    tokenizer = load_tokenizer(folder)
    if is_lora_checkpoint(folder):
        from peft import PeftModel

        base = load_local_model(meta["base_model"], device=device, dtype=dtype, bidirectional=meta.get("kind") == "mdlm")
        resize_for_tokenizer(base, tokenizer)  # the [MASK] row the adapter was trained with
        model = PeftModel.from_pretrained(base, str(folder), is_trainable=trainable)
    else:
        model = load_local_model(folder, device=device, dtype=dtype, trust_remote_code=trust_remote_code)
    if trainable:
        model.train()
    else:
        model.eval()
    return model, tokenizer, meta


def load_optimizer_state(folder: str | os.PathLike, optimizer: torch.optim.Optimizer) -> None:
    optimizer.load_state_dict(torch.load(Path(folder) / OPTIMIZER_FILE, weights_only=True))


def portable_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """`meta` without this run's local paths, as a zoo model records it: its trainer configs
    (``train_config``, ``grpo_config``) lose the data files, output and tokenizer folders, and a
    starting model (``init``, ``model``) is named by its zoo name, or dropped when it is a path
    outside the zoo (a folder of one checkout means nothing in another)."""
    cleaned = dict(meta)
    for key in ("train_config", "grpo_config"):
        if key not in meta:
            continue
        cleaned[key] = {}
        for field, value in meta[key].items():
            if field in ("init", "model") and isinstance(value, str):
                value = zoo.label(value)
                if os.path.isabs(value):
                    continue
            if field not in ("data", "out", "tokenizer"):
                cleaned[key][field] = value
    return cleaned


def install_checkpoint(source: str | os.PathLike, name: str, *, half: bool = True, meta: dict[str, Any] | None = None,
                       command: str | None = None, data: str = "",
                       train_panels: list[dict[str, Any]] | None = None) -> Path:
    """Install a trained checkpoint in the zoo under `name` (`lmgym.models.zoo.install`): weights
    in half precision (``half``), no optimizer state, and a meta cleaned of this run's local paths
    (data files, output and init folders) plus `meta`'s entries and `train_panels` (kept from the
    source's meta when None). The manifest records `command` (default: this process's command
    line) and `data` (what it was trained on)."""
    if train_panels is not None:
        meta = {**(meta or {}), TRAIN_PANELS: train_panels}
    model, tokenizer, old = load_checkpoint(source)
    if is_lora_checkpoint(source):
        raise ValueError(f"{source}: a LoRA adapter depends on its base folder; merge it before installing")
    cleaned = {**portable_meta(old), "base_model": None, **(meta or {})}
    command = command or cleaned.get("recipe") or "python " + " ".join(sys.argv)

    def write(folder: Path) -> None:
        model_to_save = model.half() if half else model
        model_to_save.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        atomic_write_json(folder / META_FILE, cleaned)

    return zoo.install(name, write, command=command, data=data)
