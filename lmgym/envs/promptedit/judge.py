"""The judge cluster: metrics on a batch, statements about them, a rubric judge, the reward.

One pass (`JudgeCluster.evaluate`) over a batch of generated texts:

1. parses, validates and checks each text (`lmgym.envs.promptedit.tasks`), and computes the
   metrics of `lmgym.envs.promptedit.metrics` against the reference records;
2. turns what it found into natural-language statements ("3 of 16 records miss the field
   correct_answers", "the category repeats the same value "Law" in 12 of 16 records");
3. hands the statements and metrics to a rubric judge, which answers the task's yes/no
   questions and writes the feedback text. `RuleRubricJudge` answers by thresholds; a language
   model judge (`lmgym.components.lm_judge.LMRubricJudge`) answers the same questions from the
   statements, behind the same `RubricJudge` interface;
4. scores the batch: ``reward = tsr * (0.5 + 0.25 * min(diversity, 1) + 0.25 * novelty)``
   (in [0, 1]; invalid records earn nothing however diverse, and among valid batches the
   varied, new ones earn up to twice as much), with the sub-reward vector
   ``(tsr, diversity, novelty, 1 - field_overlap, rubric)`` where ``rubric`` is the share of
   questions answered yes. ``won`` is every question answered yes.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, Sequence

import numpy as np

from lmgym.envs.promptedit.metrics import (
    Embedder,
    HashedNgramEmbedder,
    LanguageModel,
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
from lmgym.envs.promptedit.tasks import SchemaTask

METRIC_KEYS = ("tsr", "field_overlap", "similarity", "diversity", "entropy", "novelty", "perplexity")
SUB_REWARD_KEYS = ("tsr", "diversity", "novelty", "non_memorisation", "rubric")
REFERENCE_SPLITS = ("held_out", "train", "all")

#: Rubric thresholds (documented in docs/promptedit.md).
PASS_RATE = 0.9  # share of records that must parse / validate / pass each check
MAX_REPEAT_SHARE = 0.25  # a field value may fill at most a quarter of the records
MAX_COPY_SHARE = 0.1  # verbatim copies of reference records
MIN_NOVELTY = 0.5
MIN_DIVERSITY = 0.3
MAX_FEW_VALUES = 8  # fields with at most this many allowed values are exempt from the repetition question


@dataclass
class Findings:
    """What the metric pass found: counts and metrics the statements and rubric read."""

    batch_size: int
    parsed: int
    valid: int
    success: int
    missing_fields: Counter  # field -> records missing it
    other_errors: Counter  # "validator:path" -> records with that schema error
    failed_checks: Counter  # check name -> schema-valid records failing it
    repeats: list[tuple[str, str, int, int]]  # (field, value, count, records with the field)
    copies: int  # records identical (canonically) to a reference record
    metrics: dict[str, float]


@dataclass
class Verdict:
    reward: float
    sub_rewards: dict[str, float]
    metrics: dict[str, float]
    statements: list[str]
    answers: dict[str, bool]  # rubric question -> yes/no
    feedback: str
    won: bool


class RubricJudge(Protocol):
    """Answers a task's yes/no questions from the statements and metrics, and writes feedback."""

    def judge(self, task: SchemaTask, questions: list[tuple[str, str]], findings: Findings,
              statements: list[str]) -> tuple[dict[str, bool], str]: ...


def rubric_questions(task: SchemaTask) -> list[tuple[str, str]]:
    """(key, yes/no question) pairs, generic first, then one per semantic check of the task."""
    questions = [
        ("parse", f"Do at least {PASS_RATE:.0%} of the records parse as a JSON object?"),
        ("schema", f"Do at least {PASS_RATE:.0%} of the records validate against the schema?"),
    ]
    questions += [(f"check:{name}", question) for name, question, _ in task.checks]
    questions += [
        ("repetition", f"Does every field (booleans and small enums aside) avoid repeating one value in more than "
                       f"{MAX_REPEAT_SHARE:.0%} of the records?"),
        ("copies", f"Are at most {MAX_COPY_SHARE:.0%} of the records verbatim copies of reference records?"),
        ("novelty", f"Is the mean novelty at least {MIN_NOVELTY}?"),
        ("diversity", f"Is the diversity at least {MIN_DIVERSITY}?"),
    ]
    return questions


class RuleRubricJudge:
    """Answers every rubric question by its threshold; feedback lists statements and the no's."""

    def judge(self, task: SchemaTask, questions: list[tuple[str, str]], findings: Findings,
              statements: list[str]) -> tuple[dict[str, bool], str]:
        answers = {question: rule_answer(key, findings) for key, question in questions}
        return answers, compose_feedback(statements, answers)


def rule_answer(key: str, findings: Findings) -> bool:
    """The threshold answer to rubric question `key` (also the fallback of LM judges)."""
    b, m = findings.batch_size, findings.metrics
    if key == "parse":
        return findings.parsed >= PASS_RATE * b
    if key == "schema":
        return findings.valid >= PASS_RATE * b
    if key.startswith("check:"):
        return findings.valid > 0 and findings.failed_checks[key[6:]] <= (1 - PASS_RATE) * findings.valid
    if key == "repetition":
        return not findings.repeats
    if key == "copies":
        return findings.copies <= MAX_COPY_SHARE * b
    if key == "novelty":
        return m["novelty"] >= MIN_NOVELTY
    if key == "diversity":
        return m["diversity"] >= MIN_DIVERSITY
    raise KeyError(f"unknown rubric question key {key!r}")


def compose_feedback(statements: list[str], answers: dict[str, bool]) -> str:
    failed = [question for question, yes in answers.items() if not yes]
    lines = list(statements)
    lines.append(f"Rubric: {len(answers) - len(failed)} of {len(answers)} questions answered yes."
                 + (" No: " + " ".join(failed) if failed else ""))
    return "\n".join(lines)


@dataclass(frozen=True)
class References:
    """A task's reference records prepared once: pairs, canonical texts, tokens, n-gram index."""

    pairs: frozenset
    canonical: tuple[str, ...]
    canonical_set: frozenset
    index: NgramIndex
    lm_texts: tuple[str, ...]  # the train references as JSON, what the default LM is fit on


@lru_cache(maxsize=None)
def prepare_references(task: SchemaTask, split: str) -> References:
    if split not in REFERENCE_SPLITS:
        raise ValueError(f"reference split must be one of {REFERENCE_SPLITS}, got {split!r}")
    records = {"held_out": task.held_out, "train": task.train, "all": task.train + task.held_out}[split]
    canonical = tuple(canonical_text("", r) for r in records)
    return References(
        pairs=frozenset(pair for r in records for pair in flatten_pairs(r)),
        canonical=canonical, canonical_set=frozenset(canonical),
        index=NgramIndex([tokenize(t) for t in canonical]),
        lm_texts=tuple(json.dumps(r, ensure_ascii=False) for r in task.train),
    )


@lru_cache(maxsize=None)
def default_embedder(task: SchemaTask) -> HashedNgramEmbedder:
    """The fallback embedder with idf fit on all of the task's references (one per process)."""
    return HashedNgramEmbedder(idf_corpus=[canonical_text("", r) for r in task.train + task.held_out])


@lru_cache(maxsize=None)
def default_language_model(task: SchemaTask) -> NgramLM:
    return NgramLM(prepare_references(task, "train").lm_texts)


class JudgeCluster:
    """Metrics, statements, rubric and reward for batches of one task's records.

    Args:
        task: the `SchemaTask`.
        embedder: object with ``embed(texts) -> (N, D)`` unit rows; default `HashedNgramEmbedder`.
        language_model: object with ``perplexity(texts)``; default `NgramLM` on the train split.
        rubric_judge: a `RubricJudge`; default `RuleRubricJudge`.
        reference_split: what overlap, similarity, novelty and copies are measured against:
            ``"held_out"`` (default, as the issue specifies), ``"train"`` or ``"all"``.
    """

    def __init__(self, task: SchemaTask, embedder: Embedder | None = None,
                 language_model: LanguageModel | None = None, rubric_judge: RubricJudge | None = None,
                 reference_split: str = "held_out"):
        self.task = task
        self.references = prepare_references(task, reference_split)
        self.embedder = embedder or default_embedder(task)
        self.language_model = language_model or default_language_model(task)
        self.rubric_judge = rubric_judge or RuleRubricJudge()
        self.questions = rubric_questions(task)
        self.exempt_from_repeats = few_valued_fields(task)
        self.reference_embeddings = self.embedder.embed(list(self.references.canonical))  # (R, D)

    def evaluate(self, texts: Sequence[str]) -> Verdict:
        findings = self.measure(texts)
        statements = describe(findings)
        answers, feedback = self.rubric_judge.judge(self.task, self.questions, findings, statements)
        return score(findings, statements, answers, feedback)

    def measure(self, texts: Sequence[str]) -> Findings:
        task, refs = self.task, self.references
        records = [parse_record(t) for t in texts]
        parsed = [r for r in records if r is not None]
        missing, other, failed = Counter(), Counter(), Counter()
        valid = success = 0
        for record in parsed:
            errors = task.validate(record)
            missing.update({e[8:] for e in errors if e.startswith("missing:")})
            other.update({e for e in errors if not e.startswith("missing:")})
            if errors:
                continue
            valid += 1
            fails = task.failed_checks(record)
            failed.update(fails)
            success += not fails
        canonical = [canonical_text(t, r) for t, r in zip(texts, records)]
        token_lists = [tokenize(t) for t in canonical]
        embeddings = self.embedder.embed(canonical)  # (B, D)
        metrics = {
            "tsr": success / len(texts) if texts else 0.0,
            "field_overlap": field_overlap(parsed, refs.pairs),
            "similarity": nearest_similarity(embeddings, self.reference_embeddings),
            "diversity": embedding_diversity(embeddings),
            "entropy": token_entropy(tokenize(t) for t in texts),
            "novelty": refs.index.novelty(token_lists),
            "perplexity": self.language_model.perplexity(list(texts)),
            "distinct_1": distinct_n(token_lists, 1),
            "distinct_2": distinct_n(token_lists, 2),
            "parse_rate": len(parsed) / len(texts) if texts else 0.0,
        }
        return Findings(len(texts), len(parsed), valid, success, missing, other, failed,
                        find_repeats(parsed, len(texts), self.exempt_from_repeats), sum(c in refs.canonical_set for c in canonical),
                        {k: round(float(v), 6) for k, v in metrics.items()})


def few_valued_fields(task: SchemaTask) -> frozenset[str]:
    """Fields whose schema allows at most MAX_FEW_VALUES values (booleans, small enums): a
    repeated value there is expected, not a lack of variety."""
    properties = task.schema.get("properties", {})
    return frozenset(name for name, spec in properties.items()
                     if spec.get("type") == "boolean" or len(spec.get("enum", ())) <= MAX_FEW_VALUES and "enum" in spec)


def find_repeats(records: Sequence[dict[str, Any]], batch_size: int,
                 exempt: frozenset[str] = frozenset()) -> list[tuple[str, str, int, int]]:
    """Top-level fields (not `exempt`) whose most common value fills more than MAX_REPEAT_SHARE of the batch."""
    repeats = []
    fields = sorted({k for r in records for k in r} - exempt)
    for name in fields:
        values = [json.dumps(r[name], ensure_ascii=False, sort_keys=True) for r in records if name in r]
        value, count = min(Counter(values).items(), key=lambda kv: (-kv[1], kv[0])) if values else ("", 0)
        if count >= 2 and count > MAX_REPEAT_SHARE * batch_size:
            repeats.append((name, value, count, len(values)))
    return sorted(repeats, key=lambda r: (-r[2], r[0]))


def shorten_json(value: str, limit: int = 60) -> str:
    """A JSON value cut to about `limit` characters with its closing quote or bracket kept:
    ``"a long answer..."``, ``["one", "two", ...]``."""
    if len(value) <= limit:
        return value
    decoded = json.loads(value)
    if isinstance(decoded, str):  # cut the text, not its JSON: no half escape, the closing quote stays
        text = decoded[:limit]
        while len(json.dumps(text + "...", ensure_ascii=False)) > limit and text:
            text = text[:-1]
        return json.dumps(text.rstrip() + "...", ensure_ascii=False)
    closing = value[-1] if value[-1] in "]}" else ""
    return value[:limit - 3 - len(closing)] + "..." + closing


def describe(findings: Findings) -> list[str]:
    """Natural-language statements about a batch, worst problems first, metrics last."""
    b, m = findings.batch_size, findings.metrics
    statements = []
    if findings.parsed < b:
        statements.append(f"{b - findings.parsed} of {b} records are not a bare JSON object "
                          "(text around the JSON, or broken JSON).")
    for name, count in sorted(findings.missing_fields.items(), key=lambda kv: (-kv[1], kv[0])):
        statements.append(f"{count} of {b} records miss the field {name}.")
    for error, count in sorted(findings.other_errors.items(), key=lambda kv: (-kv[1], kv[0]))[:3]:
        kind, _, where = error.partition(":")
        statements.append(f"{count} of {b} records break the schema at {where} ({kind}).")
    for name, count in sorted(findings.failed_checks.items(), key=lambda kv: (-kv[1], kv[0])):
        statements.append(f"{count} of {findings.valid} schema-valid records fail the check {name}.")
    for name, value, count, present in findings.repeats[:2]:
        statements.append(f"The {name} repeats the same value {shorten_json(value)} in {count} of {present} records.")
    if findings.copies:
        statements.append(f"{findings.copies} of {b} records copy a reference record verbatim.")
    statements.append(
        f"TSR {m['tsr']:.2f}, field overlap {m['field_overlap']:.2f}, similarity {m['similarity']:.2f}, "
        f"diversity {m['diversity']:.2f}, novelty {m['novelty']:.2f}, entropy {m['entropy']:.1f} bits, "
        f"perplexity {m['perplexity']:.1f}.")
    return statements


def score(findings: Findings, statements: list[str], answers: dict[str, bool], feedback: str) -> Verdict:
    m = findings.metrics
    diversity = min(m["diversity"], 1.0)
    rubric = float(np.mean(list(answers.values()))) if answers else 0.0
    reward = m["tsr"] * (0.5 + 0.25 * diversity + 0.25 * m["novelty"])
    sub_rewards = {"tsr": m["tsr"], "diversity": diversity, "novelty": m["novelty"],
                   "non_memorisation": 1.0 - m["field_overlap"], "rubric": rubric}
    return Verdict(round(reward, 6), {k: round(v, 6) for k, v in sub_rewards.items()}, dict(m), statements,
                   answers, feedback, all(answers.values()))
