"""The frozen generator the prompt is written for: its interface, how it is resolved, a test stand-in.

Interface (all the env needs): an object with

    generate(prompts: list[str], n: int, seed: int) -> list[str]

returning ``len(prompts) * n`` raw texts, prompt-major (the n samples of prompt 0 first), a
pure function of its arguments in which a prompt's n texts depend only on (prompt, n, seed),
not on the other prompts of the call (each prompt's samples are drawn from a generator seeded
with `seed`; prompts are then compared on common random numbers). Any masked-diffusion or autoregressive model wrapped this way
works; the env never imports torch itself: it resolves a ``"module:attribute"`` entry point at
construction (as Gymnasium does for env entry points) and calls it with ``generator_kwargs``.

`RuleBasedGenerator` is **a seeded rule-based stand-in**, not a language model: it writes train
references (one coherent record each) and follows the prompt's cues, in any phrasing of
`lmgym.envs.promptedit.phrasings`, by fixed rules, so the env's dynamics can be tested fast.
The same rules are the curriculum of the trained generators: `training_pairs` gives (prompt,
text) pairs of varied specificity and phrasing on which the tiny diffusion and AR models learn.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from lmgym.entrypoints import load_entry_point
from lmgym.envs.promptedit.phrasings import PROSE_WRAPPERS, TRAIN_PHRASINGS, Cues, find_cues, phrase
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

    Not a language model. It reads the prompt's cues in any phrasing, train or held-out
    (`lmgym.envs.promptedit.phrasings.find_cues`), and writes each record from **one** source
    record, so a record stays coherent (a question with its own answers, a domain with its own
    slots):

    * with an example record in the prompt (and no novelty request) it copies one verbatim with
      probability 0.3;
    * the source is a random reference record (or a given ``base``) with probability equal to
      the share of fields the prompt asks to vary (1 with a novelty request), else one of two
      fixed "favourite" records (repetition, low diversity);
    * it keeps each field with probability 0.97 if the prompt hints that field (or quotes an
      example), else 0.6 (a dropped field fails the schema);
    * it writes bare JSON if the prompt tightens the format, else wraps it in chatty prose
      (one of `PROSE_WRAPPERS`) with probability 0.4 (unparseable).

    These rules are what an instruction-following generator does with a vague prompt (writes
    the fields it guesses, in a default style, with favourite content); `training_pairs` turns
    them into (prompt, text) pairs, so a model trained on them responds to the same cues.
    ``records`` defaults to the task's train split.
    """

    def __init__(self, task: str | SchemaTask, records: Sequence[dict] | None = None):
        self.task = load_task(task) if isinstance(task, str) else task
        self.records = list(records if records is not None else self.task.train)

    def generate(self, prompts: list[str], n: int, seed: int) -> list[str]:
        texts = []
        for prompt in prompts:  # one stream per prompt: its texts do not depend on the others
            rng = np.random.default_rng(seed)
            cues = find_cues(self.task, prompt)
            texts += [self.write(cues, rng) for _ in range(n)]
        return texts

    def write(self, cues: Cues, rng: np.random.Generator, base: dict | None = None) -> str:
        """One text for a prompt holding `cues`."""
        task, records = self.task, self.records
        if cues.examples and not cues.novelty and rng.random() < 0.3:
            record = cues.examples[int(rng.integers(len(cues.examples)))]
        else:
            varied_share = 1.0 if cues.novelty else len(cues.varied & set(task.fields)) / len(task.fields)
            if rng.random() < varied_share:
                source = base if base is not None else records[int(rng.integers(len(records)))]
            else:
                source = records[int(rng.integers(2))]
            record = {name: source[name] for name in task.fields if name in source
                      and rng.random() < (0.97 if (name in cues.hinted or cues.examples) else 0.6)}
        text = json.dumps(record, ensure_ascii=False)
        if not cues.tight_format and rng.random() < 0.4:
            text = PROSE_WRAPPERS[int(rng.integers(len(PROSE_WRAPPERS)))].format(text)
        return text


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
    """(prompt, text) pairs for training a generator that responds to prompt cues in many phrasings.

    Each prompt is the task's starting prompt followed, in a random order, by a random set of
    cues, each in a random **train** phrasing (`phrasings.TRAIN_PHRASINGS`; the held-out
    phrasings never occur): a field hint for each field with probability h (h drawn uniformly
    per prompt, so fully hinted and bare prompts are both common), a variety request for each
    field with probability v/2 (v uniform), the format cue with probability 1/2, the novelty
    request with probability 1/4, one example record (a random train record) with probability
    1/5. Each train record is the base of `per_record` pairs, and the text is what
    `RuleBasedGenerator` writes for those cues from that base: a vague prompt's text misses
    fields, repeats favourite records and comes wrapped in prose. With ``compact=k`` every
    record is first shortened by `compact_record` (strings cut to k words, lists to 2 items,
    still schema-valid and passing the same semantic checks).
    """
    rng = np.random.default_rng(seed)
    records = [compact_record(task, r, compact) for r in task.train] if compact else list(task.train)
    teacher = RuleBasedGenerator(task, records)

    def pick(kind: str) -> str:
        return TRAIN_PHRASINGS[kind][int(rng.integers(len(TRAIN_PHRASINGS[kind])))]

    pairs = []
    for record in records:
        for _ in range(per_record):
            hint_rate, vary_rate = rng.random(), rng.random() / 2
            cues = Cues(hinted={f for f in task.fields if rng.random() < hint_rate},
                        varied={f for f in task.fields if rng.random() < vary_rate},
                        tight_format=rng.random() < 0.5, novelty=rng.random() < 0.25)
            sentences = [phrase(pick("field_hint"), task, f) for f in task.fields if f in cues.hinted]
            sentences += [phrase(pick("variety"), task, f) for f in task.fields if f in cues.varied]
            sentences += [pick("format")] if cues.tight_format else []
            sentences += [pick("novelty")] if cues.novelty else []
            if rng.random() < 0.2:
                cues.examples = [records[int(rng.integers(len(records)))]]
                sentences.append(phrase(pick("example"), record=cues.examples[0]))
            order = rng.permutation(len(sentences))
            prompt = " ".join([task.initial_prompt] + [sentences[k] for k in order])
            pairs.append((prompt, teacher.write(cues, rng, base=record)))
    return pairs
