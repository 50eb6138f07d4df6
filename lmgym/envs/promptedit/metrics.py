"""The judge cluster's metrics on a batch of generated records (numpy only, no neural net).

Agents of Diffusion (AoD) names these metrics but publishes no formulas; the definitions below
are lmgym's, and docs/promptedit.md says why each one measures what it claims.
Notation: a batch is B generated texts; "parsed" texts are those that load as a JSON object;
the reference set R is the task's held-out records (configurable in `JudgeCluster`).

* ``tsr`` (task success rate): share of the B texts that parse, validate against the schema
  and pass every semantic check of the task.
* ``field_overlap``: over all parsed texts, the share of flattened key-value pairs
  ``(key path, value)`` that occur verbatim in some reference record (memorisation; list items
  count one pair each, their order ignored). 0 when nothing parses.
* ``similarity``: mean over texts of the largest cosine between the text's embedding and any
  reference record's embedding.
* ``diversity``: 1 - mean pairwise cosine between the B texts' embeddings (0 for a batch of
  duplicates; 0 when B < 2). ``distinct_1`` / ``distinct_2``: distinct n-grams over all
  n-grams of the batch (Li et al., 2016, "A Diversity-Promoting Objective ...").
* ``entropy``: Shannon entropy, in bits, of the batch's pooled word-token distribution.
* ``novelty``: mean over texts of 1 - max over reference records of the share of the text's
  distinct word 3-grams that also occur in that record (an n-gram precision; a copy of a
  reference has novelty 0). Texts shorter than 3 tokens have novelty 1 (nothing copied).
* ``perplexity``: exp of the mean negative log-likelihood per word token of the batch's texts
  under a reference language model (default: `NgramLM`, fit on the train references).

Texts are embedded and n-grammed in a canonical form: a parsed record becomes its flattened
``key: value`` lines in sorted key order (so formatting and key order do not count as content);
an unparsed text is used as written.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter, OrderedDict
from typing import Any, Iterable, Protocol, Sequence

import numpy as np

TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")
FENCE_PATTERN = re.compile(r"^```(?:json)?\s*|\s*```$")


def tokenize(text: str) -> list[str]:
    """Lower-cased word and punctuation tokens (the unit of entropy, novelty and perplexity)."""
    return TOKEN_PATTERN.findall(text.lower())


def parse_record(text: str) -> dict[str, Any] | None:
    """The JSON object `text` holds (a Markdown code fence around it is allowed), else None."""
    try:
        value = json.loads(FENCE_PATTERN.sub("", text.strip()))
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def flatten_pairs(record: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """``(key path, value)`` pairs of a record; list items give one pair each under the list's path."""
    pairs = []
    for key in sorted(record):
        path = f"{prefix}{key}"
        values = record[key] if isinstance(record[key], list) else [record[key]]
        for value in values:
            if isinstance(value, dict):
                pairs += flatten_pairs(value, prefix=f"{path}.")
            else:
                pairs.append((path, value.strip() if isinstance(value, str) else json.dumps(value)))
    return pairs


def canonical_text(text: str, record: dict[str, Any] | None) -> str:
    """``key: value`` lines of a parsed record (sorted keys), or the text itself."""
    if record is None:
        return text.strip()
    return "\n".join(f"{key}: {value}" for key, value in flatten_pairs(record))


# -- batch metrics on already prepared inputs --------------------------------------------
def field_overlap(records: Sequence[dict[str, Any]], reference_pairs: set[tuple[str, str]]) -> float:
    pairs = [pair for record in records for pair in flatten_pairs(record)]
    return sum(pair in reference_pairs for pair in pairs) / len(pairs) if pairs else 0.0


def nearest_similarity(embeddings: np.ndarray, reference_embeddings: np.ndarray) -> float:
    """Mean over rows of `embeddings` (B, D) of the max cosine to `reference_embeddings` (R, D)."""
    if len(embeddings) == 0 or len(reference_embeddings) == 0:
        return 0.0
    return float(np.mean(np.max(embeddings @ reference_embeddings.T, axis=1)))  # (B, R) -> (B,)


def embedding_diversity(embeddings: np.ndarray) -> float:
    """1 - mean pairwise cosine of unit rows (B, D); 0 for B < 2."""
    count = len(embeddings)
    if count < 2:
        return 0.0
    cosines = embeddings @ embeddings.T  # (B, B)
    mean_pairwise = (cosines.sum() - np.trace(cosines)) / (count * (count - 1))
    return float(np.clip(1.0 - mean_pairwise, 0.0, 2.0))


def distinct_n(token_lists: Iterable[list[str]], n: int) -> float:
    grams = [tuple(tokens[i:i + n]) for tokens in token_lists for i in range(len(tokens) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def token_entropy(token_lists: Iterable[list[str]]) -> float:
    """Shannon entropy (bits) of the pooled token distribution."""
    counts = np.array(list(Counter(t for tokens in token_lists for t in tokens).values()), dtype=np.float64)
    if counts.size == 0:
        return 0.0
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


def ngrams(tokens: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


class NgramIndex:
    """Inverted index from word n-grams to the reference records holding them (for novelty)."""

    def __init__(self, reference_token_lists: Sequence[list[str]], n: int = 3):
        self.n = n
        postings: dict[tuple[str, ...], list[int]] = {}
        for ref_id, tokens in enumerate(reference_token_lists):
            for gram in sorted(ngrams(tokens, n)):
                postings.setdefault(gram, []).append(ref_id)
        self.postings = {gram: np.array(ids, dtype=np.int64) for gram, ids in postings.items()}
        self.size = len(reference_token_lists)

    def max_overlap(self, tokens: list[str]) -> float:
        """Largest share of `tokens`' distinct n-grams found in any one reference record."""
        grams = ngrams(tokens, self.n)
        hits = [self.postings[g] for g in grams if g in self.postings]
        if not grams or not hits:
            return 0.0
        return float(np.bincount(np.concatenate(hits), minlength=self.size).max() / len(grams))

    def novelty(self, token_lists: Sequence[list[str]]) -> float:
        return float(np.mean([1.0 - self.max_overlap(t) for t in token_lists])) if token_lists else 0.0


# -- embedders ------------------------------------------------------------------------------
class Embedder(Protocol):
    """Anything with ``embed(texts) -> (N, D) float32 array of unit rows``."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class CachingEmbedder:
    """Base of embedders with a per-text LRU cache: subclasses write ``_embed_new(texts)``.

    `embed` embeds only texts not in the cache, in chunks of `batch_size` sorted by length (so
    padded batches hold similar lengths and the work order is fixed), then reads every row from
    the cache. The cache holds at most `cache_mb` megabytes (vectors and their keys, counted
    by `sys.getsizeof`), least recently used out first: memory stays flat however many
    batches a run judges.
    """

    dim: int

    def __init__(self, batch_size: int = 256, cache_mb: float = 32.0):
        if cache_mb < 0:
            raise ValueError(f"cache_mb must be >= 0, got {cache_mb}")
        self.batch_size, self.cache_bytes = batch_size, int(cache_mb * 2**20)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.cached_bytes = 0  # what the cache holds now

    def _embed_new(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def _entry_bytes(text: str, vector: np.ndarray) -> int:
        return sys.getsizeof(text) + vector.nbytes

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        fresh: dict[str, np.ndarray] = {}
        new = sorted({t for t in texts if t not in self._cache}, key=lambda t: (len(t), t))
        for start in range(0, len(new), self.batch_size):
            chunk = new[start:start + self.batch_size]
            fresh.update(zip(chunk, self._embed_new(chunk)))
        rows = []
        for text in texts:
            if text in self._cache:
                self._cache.move_to_end(text)
                rows.append(self._cache[text])
            else:
                rows.append(fresh[text])
        for text, vector in fresh.items():  # then cache what fits, oldest out first
            self._cache[text] = vector
            self.cached_bytes += self._entry_bytes(text, vector)
        while self.cached_bytes > self.cache_bytes and self._cache:
            text, vector = self._cache.popitem(last=False)
            self.cached_bytes -= self._entry_bytes(text, vector)
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)


class HashedNgramEmbedder(CachingEmbedder):
    """Dependency-free fallback embedder: hashed byte n-gram TF-IDF, L2-normalised.

    Each text is lower-cased, its whitespace collapsed, framed by start/end marks and encoded as
    UTF-8; every byte n-gram (n in `ngram_range`; character n-grams for ASCII text) is hashed
    by a polynomial hash modulo the Mersenne prime 2^31 - 1 (stable across processes, unlike
    ``hash()``) into `dim` buckets. Counts are log-scaled (1 + log tf) and weighted by a
    smoothed idf fit on `idf_corpus` (``log((1 + N) / (1 + df)) + 1``, scikit-learn's
    smooth_idf formula). Cosine of these vectors measures shared surface form, not meaning: the
    documented stand-in for all-MiniLM-L6-v2 (`lmgym.components.embeddings.MiniLMEmbedder`) when
    torch is not wanted. Embeddings are cached per text (`CachingEmbedder`).
    """

    PRIME = 2**31 - 1
    BASE = 257

    def __init__(self, idf_corpus: Sequence[str] = (), dim: int = 2048, ngram_range: tuple[int, int] = (3, 5),
                 cache_mb: float = 32.0):
        super().__init__(cache_mb=cache_mb)
        self.dim, self.ngram_range = dim, ngram_range
        self.idf = np.ones(dim, dtype=np.float32)
        if idf_corpus:
            df = np.zeros(dim, dtype=np.float64)
            for start in range(0, len(idf_corpus), self.batch_size):
                df += (self._counts(idf_corpus[start:start + self.batch_size]) > 0).sum(axis=0)
            self.idf = (np.log((1 + len(idf_corpus)) / (1 + df)) + 1).astype(np.float32)

    def _counts(self, texts: Sequence[str]) -> np.ndarray:
        """Bucket counts (len(texts), dim): all texts hashed in one pass over their joined bytes."""
        # \x02 and \x03 mark the ends, so even an empty text has n-grams (and equals itself)
        encoded = [f"\x02 {' '.join(t.lower().split())} \x03".encode("utf-8") for t in texts]
        lengths = np.array([len(e) for e in encoded], dtype=np.int64)
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8).astype(np.int64)  # (L,)
        owner = np.repeat(np.arange(len(texts)), lengths)  # (L,) text of each byte
        counts = np.zeros(len(texts) * self.dim, dtype=np.float32)
        low, high = self.ngram_range
        for n in range(low, high + 1):
            starts = len(data) - n + 1
            if starts <= 0:
                continue
            hashes = np.zeros(starts, dtype=np.int64)
            for k in range(n):  # Horner: every partial value stays below 2^31 * 257 + 256
                hashes = (hashes * self.BASE + data[k:k + starts]) % self.PRIME
            inside = owner[:starts] == owner[n - 1:]  # drop n-grams spanning two texts
            keys = owner[:starts][inside] * self.dim + hashes[inside] % self.dim
            counts += np.bincount(keys, minlength=counts.size).astype(np.float32)
        return counts.reshape(len(texts), self.dim)

    def _embed_new(self, texts: Sequence[str]) -> np.ndarray:
        counts = self._counts(texts)  # (N, dim)
        vectors = np.where(counts > 0, 1.0 + np.log(np.maximum(counts, 1.0)), 0.0).astype(np.float32) * self.idf
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)


# -- perplexity -------------------------------------------------------------------------------
class LanguageModel(Protocol):
    """Anything with ``perplexity(texts) -> float`` (per token, pooled over the texts)."""

    def perplexity(self, texts: Sequence[str]) -> float: ...


class NgramLM:
    """Word-token trigram model with Jelinek-Mercer interpolation (pure Python/numpy).

    ``P(w | u, v) = l3 c(u,v,w)/c(u,v) + l2 c(v,w)/c(v) + l1 (c(w) + 1)/(N + V + 1)``, with the
    add-one unigram giving unseen tokens (one shared <unk>) non-zero mass and terms whose
    context is unseen dropped (their weight moved to the lower orders). Interpolation as in
    Chen & Goodman (1998), "An Empirical Study of Smoothing Techniques for Language Modeling".
    Texts are padded with two <s> and one </s>.

    Log-probabilities are memoised in at most `memo_mb` megabytes (cleared when full), counted
    as `MEMO_ENTRY_BYTES` per entry: the key tuple, its float, its dict slot and the token
    strings it keeps alive (tests/promptedit/test_metrics.py measures an entry with tracemalloc).
    """

    MEMO_ENTRY_BYTES = 400

    def __init__(self, texts: Sequence[str], weights: tuple[float, float, float] = (0.2, 0.3, 0.5),
                 memo_mb: float = 32.0):
        self.weights = weights
        self.memo_entries = int(memo_mb * 2**20) // self.MEMO_ENTRY_BYTES
        self.unigrams: Counter = Counter()
        self.bigrams: Counter = Counter()
        self.trigrams: Counter = Counter()
        self.contexts1: Counter = Counter()  # c(v) as a bigram context
        self.contexts2: Counter = Counter()  # c(u, v) as a trigram context
        for text in texts:
            tokens = ["<s>", "<s>"] + tokenize(text) + ["</s>"]
            self.unigrams.update(tokens[2:])
            for i in range(2, len(tokens)):
                self.bigrams[(tokens[i - 1], tokens[i])] += 1
                self.trigrams[(tokens[i - 2], tokens[i - 1], tokens[i])] += 1
                self.contexts1[tokens[i - 1]] += 1
                self.contexts2[(tokens[i - 2], tokens[i - 1])] += 1
        self.total = sum(self.unigrams.values())
        self.vocabulary = len(self.unigrams) + 1  # + <unk>
        self._memo: dict[tuple[str, str, str], float] = {}

    def log_prob(self, u: str, v: str, w: str) -> float:
        """ln P(w | u, v); memoised, since generated batches repeat most of their trigrams."""
        key = (u, v, w)
        value = self._memo.get(key)
        if value is None:
            l1, l2, l3 = self.weights
            numerator, weight = l1 * (self.unigrams.get(w, 0) + 1) / (self.total + self.vocabulary), l1
            if context := self.contexts1.get(v, 0):
                numerator, weight = numerator + l2 * self.bigrams.get((v, w), 0) / context, weight + l2
            if context := self.contexts2.get((u, v), 0):
                numerator, weight = numerator + l3 * self.trigrams.get(key, 0) / context, weight + l3
            value = math.log(numerator / weight)
            if len(self._memo) >= self.memo_entries:
                self._memo.clear()
            self._memo[key] = value
        return value

    def perplexity(self, texts: Sequence[str]) -> float:
        total_log_prob, count = 0.0, 0
        for text in texts:
            tokens = ["<s>", "<s>"] + tokenize(text) + ["</s>"]
            for i in range(2, len(tokens)):
                total_log_prob += self.log_prob(tokens[i - 2], tokens[i - 1], tokens[i])
                count += 1
        return math.exp(-total_log_prob / count) if count else float("inf")

