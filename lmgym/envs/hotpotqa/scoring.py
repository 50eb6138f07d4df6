"""HotPotQA answer scoring, identical to the official evaluation script.

Source: ``hotpot_evaluate_v1.py`` of hotpotqa/hotpot (the script the leaderboard runs):
`normalize_answer` lower-cases, drops ASCII punctuation (``string.punctuation``), drops the
articles a/an/the as whole words and collapses white space, in that order; `exact_match`
compares normalised strings; `f1` is token-level F1 over normalised tokens (a multiset
intersection), except that when either side normalises to ``yes``, ``no`` or ``noanswer`` and
the two differ, all three figures are 0. ReAct's wrappers.py copies the same functions.
"""

from __future__ import annotations

import re
import string
from collections import Counter

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPECIAL_ANSWERS = ("yes", "no", "noanswer")


def normalize_answer(text: str) -> str:
    """Lower case, remove punctuation, remove articles, collapse white space (official order)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> bool:
    """Whether the normalised prediction equals the normalised gold answer."""
    return normalize_answer(prediction) == normalize_answer(gold)


def f1(prediction: str, gold: str) -> tuple[float, float, float]:
    """Token F1, precision and recall of `prediction` against `gold` (official yes/no rule)."""
    pred_norm, gold_norm = normalize_answer(prediction), normalize_answer(gold)
    if pred_norm != gold_norm and (pred_norm in _SPECIAL_ANSWERS or gold_norm in _SPECIAL_ANSWERS):
        return 0.0, 0.0, 0.0
    pred_tokens, gold_tokens = pred_norm.split(), gold_norm.split()
    num_same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if num_same == 0:
        return 0.0, 0.0, 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall), precision, recall


def cover_match(prediction: str, gold: str) -> bool:
    """Whether every normalised gold word is among the prediction's (cover-EM: the ACC_R of the
    search-agent papers, R1-Searcher and DLLM-Searcher, which credit an answer that contains the
    gold one, e.g. "Paris, France" for "Paris")."""
    gold_tokens = normalize_answer(gold).split()
    return bool(gold_tokens) and set(gold_tokens) <= set(normalize_answer(prediction).split())
