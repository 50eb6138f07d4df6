"""The scorer against the official hotpot_evaluate_v1.py rules, case by case.

Expected values are worked out by hand from the official script (hotpotqa/hotpot): lower case,
then drop string.punctuation, then drop whole-word a/an/the, then collapse white space; token
F1 over a multiset intersection; yes/no/noanswer that differ score (0, 0, 0).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lmgym.envs.hotpotqa.scoring import exact_match, f1, normalize_answer


@pytest.mark.parametrize("text, normalised", [
    ("The  Quick, Brown fox!", "quick brown fox"),
    ("An apple a day", "apple day"),
    ("theater Anarchy thematic", "theater anarchy thematic"),  # articles only as whole words
    ("the-end", "theend"),  # punctuation goes first, so "the" is no longer a word
    ("A.B.C.", "abc"),
    ("  Gesellschaft mit beschränkter Haftung ", "gesellschaft mit beschränkter haftung"),
    ("café—bar", "café—bar"),  # the em dash is not in string.punctuation: it stays
    ("THE", ""),
    ("\tNew\nYork\u00a0City", "new york city"),  # str.split: any white space
    ("1,024", "1024"),
])
def test_normalize_answer_official_cases(text, normalised):
    assert normalize_answer(text) == normalised


@pytest.mark.parametrize("prediction, gold, expected", [
    ("The Beatles", "beatles", True),
    ("No.", "no", True),
    ("Bath, Maine", "Bath Maine", True),
    ("Bath", "Bath, Maine", False),
    ("1,024", "1024", True),
])
def test_exact_match(prediction, gold, expected):
    assert exact_match(prediction, gold) is expected


@pytest.mark.parametrize("prediction, gold, expected", [
    ("the cat sat", "cat sat on mat", (2 / 3, 1.0, 0.5)),
    ("x x y", "x y y", (2 / 3, 2 / 3, 2 / 3)),  # multiset intersection: one x, one y
    ("Bath", "Bath, Maine", (2 / 3, 1.0, 0.5)),
    ("dog", "cat", (0.0, 0.0, 0.0)),
    ("yes", "yes sir", (0.0, 0.0, 0.0)),  # prediction is yes and differs
    ("yes indeed", "yes", (0.0, 0.0, 0.0)),  # gold is yes and differs
    ("no", "No!", (1.0, 1.0, 1.0)),
    ("noanswer", "no answer", (0.0, 0.0, 0.0)),
    ("", "anything", (0.0, 0.0, 0.0)),
    ("the", "a", (0.0, 0.0, 0.0)),  # both normalise to "": no common token
])
def test_f1_official_cases(prediction, gold, expected):
    assert f1(prediction, gold) == pytest.approx(expected)


@given(st.text(max_size=40), st.text(max_size=40))
def test_f1_is_a_score_and_exact_match_implies_f1_one(prediction, gold):
    score, precision, recall = f1(prediction, gold)
    assert 0.0 <= min(score, precision, recall) and max(score, precision, recall) <= 1.0
    if exact_match(prediction, gold) and normalize_answer(gold):
        assert score == pytest.approx(1.0)
