"""Retrievers over a corpus: BM25 (bm25s) by default, any object with ``search(query, k)``.

A retriever factory is a callable ``factory(documents: list[str]) -> Retriever``; the env
builds it twice per corpus (over titles, for the ``Similar:`` list of a failed search, and over
``"title\\ntext"`` passages, for ``search_mode="passages"``) and the corpus keeps both.
`resolve_retriever` turns the env's ``retriever`` argument into a factory:

* ``"bm25"`` (default): `BM25Retriever`, bm25s's Lucene BM25 (k1=1.5, b=0.75) over lower-cased
  word tokens with English stop words removed and Snowball (PyStemmer) stems.
* ``"dense"``: ``lmgym.components.retrievers:DenseRetriever`` (all-MiniLM-L6-v2; needs torch, so it
  is imported by name at construction time and never by this package).
* ``"package.module:Name"``: any importable factory; or the factory itself.
"""

from __future__ import annotations

import functools
from typing import Callable, Protocol, Sequence

import numpy as np

from lmgym.entrypoints import load_entry_point

STRING_FACTORIES = {"bm25": "lmgym.envs.hotpotqa.retrieval:BM25Retriever",
                    "dense": "lmgym.components.retrievers:DenseRetriever"}


class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """Up to `k` (document index, score) pairs, best first; ties broken by lower index."""


RetrieverFactory = Callable[[Sequence[str]], Retriever]


@functools.lru_cache(maxsize=1)
def _stemmer():
    import Stemmer  # PyStemmer: the Snowball stemmer bm25s recommends

    return Stemmer.Stemmer("english")


class BM25Retriever:
    """Lucene BM25 over `documents` with bm25s (stop words removed, English stems).

    Ranking is fully deterministic: all scores are computed (`BM25.get_scores`) and ordered by
    score, then document index; documents sharing no term with the query (score 0) are not
    returned.
    """

    def __init__(self, documents: Sequence[str]):
        import bm25s

        self._bm25s = bm25s
        self.num_documents = len(documents)
        tokens = bm25s.tokenize(list(documents), stopwords="en", stemmer=_stemmer(), show_progress=False)
        self._index = bm25s.BM25()
        self._index.index(tokens, show_progress=False)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        tokens = self._bm25s.tokenize([query], stopwords="en", stemmer=_stemmer(), show_progress=False,
                                      return_ids=False)[0]
        if not tokens or self.num_documents == 0:
            return []
        scores = np.asarray(self._index.get_scores(tokens), dtype=np.float64)  # (num_documents,)
        order = np.lexsort((np.arange(len(scores)), -scores))  # score desc, then index asc
        return [(int(i), float(scores[i])) for i in order[:k] if scores[i] > 0]


def resolve_retriever(spec: str | RetrieverFactory) -> RetrieverFactory:
    """The factory named by `spec` ("bm25", "dense", "module:Name") or `spec` itself."""
    if callable(spec):
        return spec
    return load_entry_point(spec, aliases=STRING_FACTORIES, what="retriever")


def nearest_titles(query: str, titles: Sequence[str], title_index: Retriever, n: int) -> list[str]:
    """The `n` titles nearest to `query`: retriever hits first, then character similarity.

    Retriever hits come in its ranking; when fewer than `n` titles share a term with the query
    (a misspelt name), the rest are filled by rapidfuzz's normalised Indel similarity on
    lower-cased titles (ties: corpus order), the way a search engine suggests close spellings.
    """
    picked = [i for i, _ in title_index.search(query, n)]
    if len(picked) < n:
        from rapidfuzz import fuzz

        chosen = set(picked)
        rest = [i for i in range(len(titles)) if i not in chosen]
        similarity = [fuzz.ratio(query.lower(), titles[i].lower()) for i in rest]
        closest = sorted(range(len(rest)), key=lambda j: (-similarity[j], rest[j]))
        picked += [rest[j] for j in closest[: n - len(picked)]]
    return [titles[i] for i in picked]
