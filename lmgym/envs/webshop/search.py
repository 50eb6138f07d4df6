"""WebShop's search engine: BM25 over the text the original's Lucene index holds, top 50.

The original indexes, per product, ``" ".join([Title, Description, BulletPoints[0],
option_text]).lower()`` where option_text is ``"name: v1, v2, and name2: ..."``
(``search_engine/convert_product_file_format.py``), searches it with pyserini's LuceneSearcher
(BM25 with k1=0.9, b=0.4, Lucene's English analyzer) and keeps the top ``SEARCH_RETURN_N = 50``
hits (``web_agent_site/engine/engine.py:get_top_n_product_from_keywords``).

Here the same document text goes through an analyzer that mirrors Lucene's EnglishAnalyzer
(word tokens that keep inner dots and apostrophes like "6.76" and "l'eau", possessive "'s"
removed, lowercase, Lucene's 33 English stop words, Porter stemming via PyStemmer for words of
three letters or more: Lucene's PorterStemmer leaves shorter words as they are (``stem(i0)`` runs
its steps only ``if (k > k0 + 1)``), where Snowball's Porter would stem "s" to "") into a
``bm25s`` index with Lucene's BM25 variant and the same k1/b. Ties are broken by catalogue
order, so identical queries give identical results in every process. Known difference: Lucene
stores document lengths lossily (one byte), bm25s exactly, so near-tied scores can order
differently than in the original.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import bm25s
import numpy as np
import Stemmer

#: engine.py: how many hits a search returns.
SEARCH_RETURN_N = 50
#: pyserini's LuceneSearcher defaults.
BM25_K1 = 0.9
BM25_B = 0.4
#: Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET.
LUCENE_ENGLISH_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)
_WORD = re.compile(r"\w+(?:[.'’]\w+)*")


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("porter")


def analyze(text: str) -> list[str]:
    """Lucene-EnglishAnalyzer-like tokens of `text` (lowercase, no stop words, Porter stems)."""
    words = []
    for word in _WORD.findall(text.lower()):
        word = word.replace("’", "'")
        if word.endswith("'s"):  # EnglishPossessiveFilter
            word = word[:-2]
        if word and word not in LUCENE_ENGLISH_STOP_WORDS:
            words.append(word)
    stems = _stemmer().stemWords(words)
    return [word if len(word) <= 2 else stem for word, stem in zip(words, stems)]


def document_text(product: dict[str, Any]) -> str:
    """The text the original indexes for `product` (convert_product_file_format.py)."""
    option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in product.get("options", {}).items())
    bullets = product.get("BulletPoints") or [""]
    return " ".join([product["Title"], product["Description"], bullets[0], option_text]).lower()


class SearchIndex:
    """BM25 index over a catalogue's products; `search` returns the top-50 asins.

    Args:
        products: processed product dicts (`lmgym.envs.webshop.catalog.Catalog.products`).
    """

    def __init__(self, products: list[dict[str, Any]]):
        self.asins = [p["asin"] for p in products]
        corpus = [analyze(document_text(p)) for p in products]
        self.retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
        self.retriever.index(corpus, show_progress=False)
        self._results: dict[str, list[str]] = {}

    def search(self, keywords: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """Asins of the best `k` products for `keywords` (only products matching a query term)."""
        key = f"{k}\x00{keywords}"
        if key not in self._results:
            if len(self._results) > 4096:  # a bound on the memo for long-running servers
                self._results.clear()
            self._results[key] = self._search(keywords, k)
        return list(self._results[key])

    def _search(self, keywords: str, k: int) -> list[str]:
        vocab = self.retriever.vocab_dict
        # bm25s keeps "" in its vocabulary as a placeholder with no score column: never a term.
        token_ids = [vocab[t] for t in analyze(keywords) if t and t in vocab]
        if not token_ids:
            return []
        scores = self.retriever.get_scores(token_ids)  # (num_products,)
        matching = np.flatnonzero(scores > 0)
        if len(matching) > k:
            # Everything at least as good as the k-th best, then a stable order on (-score, index).
            kth = np.partition(scores[matching], len(matching) - k)[len(matching) - k]
            matching = matching[scores[matching] >= kth]
        order = np.lexsort((matching, -scores[matching]))[:k]
        return [self.asins[i] for i in matching[order]]


def index_for(catalog) -> SearchIndex:
    """The catalogue's search index, built once per catalogue object."""
    return catalog.cached("search_index", lambda: SearchIndex(catalog.products))
