"""The frozen generator the prompt is written for: its interface, how it is resolved, a test stand-in.

Interface (all the env needs): an object with

    generate(prompts: list[str], n: int, seed: int) -> list[str]

returning ``len(prompts) * n`` raw texts, prompt-major (the n samples of prompt 0 first), a
pure function of its arguments in which a prompt's n texts depend only on (prompt, n, seed),
not on the other prompts of the call (each prompt's samples are drawn from a generator seeded
with `seed`; prompts are then compared on common random numbers). Any masked-diffusion or autoregressive model wrapped this way
works; the env never imports torch itself: it resolves a ``"module:attribute"`` entry point at
construction (as Gymnasium does for env entry points) and calls it with ``generator_kwargs``.

`RuleBasedGenerator` is **a seeded rule-based stand-in**, not a language model: it recombines
train references and follows a few prompt cues by fixed rules, so the env's dynamics can be
tested fast. The same rules are the curriculum of the real generator: `training_pairs` gives
(prompt, text) pairs of varied specificity on which the tiny masked-diffusion model is trained.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from lmgym.entrypoints import load_entry_point
from lmgym.envs.promptedit.edits import (
    FORMAT_SENTENCE,
    NOVELTY_SENTENCE,
    apply_edit,
    field_hint,
    variety_request,
)
from lmgym.envs.promptedit.tasks import SchemaTask, load_task


class Generator(Protocol):
    def generate(self, prompts: list[str], n: int, seed: int) -> list[str]: ...


def resolve(entry_point: str | Callable[..., Any], kwargs: dict[str, Any] | None = None,
            context: dict[str, Any] | None = None) -> Any:
    """Build the object `entry_point` names (``"package.module:attribute"``, or a callable).

    ``context`` entries (e.g. the env's ``task``) are passed too when the factory takes a
    parameter of that name and ``kwargs`` does not set it.
    """
    factory = entry_point if callable(entry_point) else load_entry_point(entry_point)
    kwargs = dict(kwargs or {})
    accepted = inspect.signature(factory).parameters
    kwargs.update({k: v for k, v in (context or {}).items() if k in accepted and k not in kwargs})
    return factory(**kwargs)


class RuleBasedGenerator:
    """A seeded generator that follows prompt cues by fixed rules: the test stand-in, and the
    curriculum the tiny masked-diffusion generator is trained on.

    Not a language model. For each record it starts from a random reference record (or a given
    ``base``) and

    * keeps each field with probability 0.97 if the prompt holds that field's hint (or an
      example record), else 0.6 (a dropped field fails the schema);
    * draws a field's value from any reference record if the prompt asks for variety in it,
      else from two fixed "favourite" records (repetition, low diversity);
    * when the prompt asks for novelty, swaps the halves of string values between two records
      (new n-grams, but answers may stop agreeing with each other: semantic failures);
    * writes bare JSON if the prompt tightens the format, else adds chatty prose around it with
      probability 0.4 (unparseable);
    * copies an example in the prompt verbatim with probability 0.3.

    These rules are what an instruction-following generator does with a vague prompt (writes
    the fields it guesses, in a default style, with favourite content); `training_pairs` turns
    them into (prompt, text) pairs, so a model trained on them responds to the same edits.
    ``records`` defaults to the task's train split.
    """

    def __init__(self, task: str | SchemaTask, records: Sequence[dict] | None = None):
        self.task = load_task(task) if isinstance(task, str) else task
        self.records = list(records if records is not None else self.task.train)

    def generate(self, prompts: list[str], n: int, seed: int) -> list[str]:
        texts = []
        for prompt in prompts:  # one stream per prompt: its texts do not depend on the others
            rng = np.random.default_rng(seed)
            texts += [self.follow(prompt, rng) for _ in range(n)]
        return texts

    def follow(self, prompt: str, rng: np.random.Generator, base: dict | None = None) -> str:
        """One text for `prompt` by the rules above."""
        task, records = self.task, self.records
        examples: list[dict] = []  # the example records quoted in the prompt
        for sentence in prompt.split("Example: ")[1:]:
            try:
                examples.append(json.loads(sentence[: sentence.rindex("}") + 1]))
            except ValueError:
                continue
        if examples and rng.random() < 0.3:
            record = examples[int(rng.integers(len(examples)))]
        else:
            base = base if base is not None else records[int(rng.integers(len(records)))]
            record = {}
            for name in task.fields:
                keep = 0.97 if (field_hint(task, name) in prompt or examples) else 0.6
                if rng.random() >= keep:
                    continue
                varied = variety_request(name) in prompt
                donor = records[int(rng.integers(len(records)))] if varied else records[int(rng.integers(2))]
                value = (base if varied and rng.random() < 0.5 else donor)[name]
                if NOVELTY_SENTENCE in prompt and isinstance(value, str):
                    other = records[int(rng.integers(len(records)))][name]
                    value = _splice(value, other) if isinstance(other, str) else value
                record[name] = value
        text = json.dumps(record, ensure_ascii=False)
        if FORMAT_SENTENCE not in prompt and rng.random() < 0.4:
            text = f"Sure! Here is a record:\n{text}\nI hope this helps."
        return text


def _splice(first: str, second: str) -> str:
    """First half of `first`'s words, second half of `second`'s."""
    a, b = first.split(), second.split()
    return " ".join(a[: len(a) // 2] + b[len(b) // 2:]) or first


def _cut_words(value: Any, max_words: int, max_items: int, keep: frozenset[str] = frozenset()) -> Any:
    """`value` with every string cut to its first `max_words` words (a final "?" kept) and
    every list cut to its first `max_items` items plus any item in `keep`, recursively."""
    if isinstance(value, str):
        words = value.split()
        if len(words) <= max_words:
            return value
        cut = " ".join(words[:max_words])
        return cut.rstrip("?") + "?" if value.rstrip().endswith("?") else cut
    if isinstance(value, list):
        items = [v for k, v in enumerate(value) if k < max_items or v in keep]
        return [_cut_words(v, max_words, max_items, keep) for v in items]
    if isinstance(value, dict):
        return {k: _cut_words(v, max_words, max_items, keep) for k, v in value.items()}
    return value


def compact_record(task: SchemaTask, record: dict[str, Any], max_words: int = 6, max_items: int = 2) -> dict[str, Any]:
    """A shorter version of `record` that is still schema-valid and passes the same semantic checks.

    String values are cut to their first `max_words` words (a question keeps its "?") and lists
    to their first `max_items` items, plus any item equal to another field's value; every string
    is cut the same way, so equal strings stay equal (TruthfulQA's best answer stays one of the
    correct answers). When the cut record
    fails the schema or a semantic check the original passes (an empty list, correct and
    incorrect answers cut into the same words, a pronoun referent cut out of the input), both
    budgets double, up to the original record. A tiny generator with a short answer window
    then learns every record's shape instead of only the short records'.
    """
    if task.validate(record):
        return record
    failed = set(task.failed_checks(record))
    keep = frozenset(v for v in record.values() if isinstance(v, str))  # list items other fields point to
    words, items = max_words, max_items
    while True:
        candidate = _cut_words(record, words, items, keep)
        if candidate == record:
            return record
        if not task.validate(candidate) and set(task.failed_checks(candidate)) <= failed:
            return candidate
        words, items = words * 2, items * 2


def training_pairs(task: SchemaTask, seed: int = 0, per_record: int = 1, compact: int | None = None) -> list[tuple[str, str]]:
    """(prompt, text) pairs for training a generator that responds to prompt edits.

    Prompts vary in specificity: the task's starting prompt followed by a seeded random subset
    of the edit library's appends (field hints, variety and novelty requests, the format
    sentence); examples are left out so the generator learns records, not copying. Each train
    record is the base of `per_record` pairs, and the text is what `RuleBasedGenerator`
    writes for that prompt from that base: a vague prompt's text misses fields, repeats
    favourite values and comes wrapped in prose, so the trained model answers edits the way the
    rules do. With ``compact=k`` every record is first shortened by `compact_record` (strings
    cut to k words, lists to 2 items, still schema-valid and passing the same semantic checks).
    """
    rng = np.random.default_rng(seed)
    records = [compact_record(task, r, compact) for r in task.train] if compact else list(task.train)
    teacher = RuleBasedGenerator(task, records)
    appends = [field_hint(task, f) for f in task.fields] + [variety_request(f) for f in task.fields]
    appends += [FORMAT_SENTENCE, NOVELTY_SENTENCE]
    pairs = []
    for record in records:
        for _ in range(per_record):
            prompt = task.initial_prompt
            for k in sorted(rng.permutation(len(appends))[: int(rng.integers(len(appends) + 1))]):
                prompt = apply_edit(prompt, f"append: {appends[k]}").prompt
            pairs.append((prompt, teacher.follow(prompt, rng, base=record)))
    return pairs
