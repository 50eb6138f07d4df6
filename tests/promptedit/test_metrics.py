"""Every judge metric on hand-made batches whose values are known by hand."""

import json
import math

import numpy as np
import pytest

from lmgym.envs.promptedit.metrics import (
    HashedNgramEmbedder,
    NgramIndex,
    NgramLM,
    canonical_text,
    distinct_n,
    embedding_diversity,
    field_overlap,
    flatten_pairs,
    nearest_similarity,
    parse_record,
    token_entropy,
    tokenize,
)

REFERENCES = [
    {"city": "cambridge", "answers": ["yes", "no"], "note": "the river cam runs through the town"},
    {"city": "oxford", "answers": ["maybe"], "note": "the river thames runs past the colleges"},
]


def test_parse_record_accepts_bare_or_fenced_objects_only():
    assert parse_record('{"a": 1}') == {"a": 1}
    assert parse_record('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_record('Sure! {"a": 1}') is None
    assert parse_record("[1, 2]") is None
    assert parse_record("") is None


def test_flatten_pairs_gives_one_pair_per_list_item_and_nested_paths():
    pairs = flatten_pairs({"b": [" x ", "y"], "a": {"c": 1, "d": True}})
    assert pairs == [("a.c", "1"), ("a.d", "true"), ("b", "x"), ("b", "y")]


def test_field_overlap_of_a_reference_copy_is_one_and_of_a_half_copy_is_half():
    reference_pairs = {p for r in REFERENCES for p in flatten_pairs(r)}
    assert field_overlap([REFERENCES[0]], reference_pairs) == 1.0
    half = {"city": "oxford", "note": "something never seen"}  # 1 of 2 pairs is in a reference
    assert field_overlap([half], reference_pairs) == 0.5
    assert field_overlap([], reference_pairs) == 0.0


def test_novelty_of_a_reference_copy_is_zero_and_of_unseen_text_is_one():
    canonical = [canonical_text("", r) for r in REFERENCES]
    index = NgramIndex([tokenize(t) for t in canonical])
    assert index.novelty([tokenize(canonical[1])]) == 0.0
    assert index.novelty([tokenize("completely different words here today")]) == 1.0
    # 3-grams of "the river cam flows north": (the river cam) is in reference 0, the other two are not
    assert index.max_overlap(tokenize("the river cam flows north")) == pytest.approx(1 / 3)


def test_diversity_is_zero_for_duplicates_and_positive_for_different_texts():
    embedder = HashedNgramEmbedder()
    duplicates = embedder.embed(["the same record"] * 5)
    assert embedding_diversity(duplicates) == pytest.approx(0.0, abs=1e-6)
    assert embedding_diversity(embedder.embed(["", ""])) == pytest.approx(0.0, abs=1e-6)
    assert embedding_diversity(embedder.embed(["alpha beta", "gamma delta"])) > 0.5
    assert embedding_diversity(embedder.embed(["one text"])) == 0.0


def test_orthogonal_unit_vectors_have_diversity_one_and_similarity_of_self_is_one():
    eye = np.eye(3, dtype=np.float32)
    assert embedding_diversity(eye) == pytest.approx(1.0)
    assert nearest_similarity(eye[:2], eye) == pytest.approx(1.0)
    assert nearest_similarity(eye[:1], eye[1:]) == pytest.approx(0.0)


def test_hashed_embedder_is_unit_norm_deterministic_and_cached():
    embedder = HashedNgramEmbedder(idf_corpus=["a river", "the town"])
    first = embedder.embed(["the river cam", "oxford"])
    assert first.shape == (2, embedder.dim)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0)
    assert np.array_equal(first, HashedNgramEmbedder(idf_corpus=["a river", "the town"]).embed(["the river cam", "oxford"]))
    assert "oxford" in embedder._cache


def test_distinct_n_and_entropy_by_hand():
    tokens = [["a", "b"], ["a", "b"]]
    assert distinct_n(tokens, 1) == 0.5  # 2 distinct of 4
    assert distinct_n(tokens, 2) == 0.5  # (a b) twice
    assert token_entropy(tokens) == pytest.approx(1.0)  # p(a) = p(b) = 1/2
    assert token_entropy([["a", "a", "a", "a"]]) == 0.0
    assert token_entropy([["w", "x", "y", "z"]]) == pytest.approx(2.0)


def test_trigram_perplexity_by_hand():
    lm = NgramLM(["a"])  # unigrams a:1, </s>:1 (N = 2, V = 3 with <unk>)
    # each of the two predictions: 0.2 * 2/5 + 0.3 * 1 + 0.5 * 1 = 0.88
    assert lm.perplexity(["a"]) == pytest.approx(1 / 0.88)
    # "zzz": 0.2 * 1/5 (bigram and trigram contexts seen, counts 0), then </s> after an unseen
    # context: only the unigram term remains, renormalised: 2/5
    assert lm.perplexity(["zzz"]) == pytest.approx(math.exp(-(math.log(0.04) + math.log(0.4)) / 2))


def test_canonical_text_ignores_key_order_and_formatting():
    a = json.dumps({"x": "1", "y": ["p", "q"]})
    b = json.dumps({"y": ["p", "q"], "x": "1"}, indent=2)
    assert canonical_text(a, parse_record(a)) == canonical_text(b, parse_record(b)) == "x: 1\ny: p\ny: q"
    assert canonical_text("  not json ", None) == "not json"


def _traced_bytes(action) -> int:
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        action()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_embedding_cache_is_bounded_in_megabytes():
    # It was bounded at 50,000 texts: 400 MB of 2048-d vectors before it evicted anything.
    embedder = HashedNgramEmbedder(dim=2048, cache_mb=0.5)
    sizes = []

    def judge_many_batches():
        for k in range(60):  # 60 batches of 16 new texts: 7.5 MB of vectors pass through
            rows = embedder.embed([f"record {k} {i}: a fresh text" for i in range(16)])
            assert rows.shape == (16, 2048)
            sizes.append(embedder.cached_bytes)

    held = _traced_bytes(judge_many_batches)
    assert max(sizes) <= 0.5 * 2**20 and held < 0.6 * 2**20  # the count is honest: tracemalloc agrees
    assert np.allclose(embedder.embed(["record 59 15: a fresh text"]), embedder._embed_new(["record 59 15: a fresh text"]))


def test_language_model_memo_is_bounded_in_megabytes():
    lm = NgramLM([json.dumps(r) for r in REFERENCES], memo_mb=0.25)
    texts = [" ".join(f"w{k}x{i}" for i in range(30)) for k in range(3000)]  # ~90,000 new trigrams
    lm.perplexity(texts[:200])  # a few thousand entries: measure what one costs
    fresh = NgramLM([json.dumps(r) for r in REFERENCES])
    per_entry = _traced_bytes(lambda: fresh.perplexity(texts[:200])) / len(fresh._memo)
    assert per_entry <= NgramLM.MEMO_ENTRY_BYTES
    lm.perplexity(texts)
    assert len(lm._memo) <= lm.memo_entries == int(0.25 * 2**20) // NgramLM.MEMO_ENTRY_BYTES


@pytest.mark.parametrize("value", [
    "a short value",
    'He said "no" to the ' + "very " * 20 + "long question",
    "ünïcödé " * 20,
    ["first answer", "second answer", "third answer", "fourth answer", "fifth answer"],
    {"question": "What is " + "x" * 80, "answer": "y"},
])
def test_feedback_shortens_a_repeated_value_keeping_its_closing_quote_or_bracket(value):
    from lmgym.envs.promptedit.judge import shorten_json

    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    shown = shorten_json(text)
    assert len(shown) <= 60
    if len(text) <= 60:
        assert shown == text
    elif isinstance(value, str):
        assert json.loads(shown).endswith("...") and shown.endswith('..."')  # still one JSON string
    else:
        assert shown.endswith("..." + text[-1])
