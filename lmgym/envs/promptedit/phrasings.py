"""Many phrasings of each prompt cue, some held out of the generator's training.

A cue is one thing a prompt can ask of the generator: a field hint (name a field and what it
holds), a variety request for a field, the format sentence (bare JSON, no prose), the novelty
request, or an example record. The edit library (`lmgym.envs.promptedit.edits`) writes each cue
in one fixed sentence; a generator trained only on those sentences reacts to them and to
nothing else, so "edits matter" would hold only for the library's words. Here every cue has
several phrasings:

* ``TRAIN_PHRASINGS[kind]``: what the generator's curriculum (`training_pairs`) writes its
  prompts with; the first one is always the edit library's own sentence, so the library's
  edits stay in the training distribution;
* ``HELD_OUT_PHRASINGS[kind]``: never in a training prompt; an evaluation asks with these to
  measure whether the generator learned the cue or only memorised its words.

The edit library's sentences are defined here (`LIBRARY`: the first train phrasing of each
cue) and `lmgym.envs.promptedit.edits` builds its edits from them.

The phrasings are templates with ``{field}`` (a field name), ``{description}`` (what the field
holds, `SchemaTask.field_descriptions`) and ``{record}`` (an example's JSON). Each is one
sentence under `lmgym.envs.promptedit.edits.split_sentences` (a test checks it), so an edit
can append or delete it whole. `find_cues` reads the cues back out of a prompt, whatever
phrasing (train or held-out) they were written in: the rule-based generator follows them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from lmgym.envs.promptedit.tasks import SchemaTask

CUE_KINDS = ("field_hint", "variety", "format", "novelty", "example")

#: The curriculum's phrasings; index 0 is the edit library's sentence (a test checks it).
TRAIN_PHRASINGS: dict[str, tuple[str, ...]] = {
    "field_hint": (
        'Every record must have the field "{field}": {description}.',
        'Include the field "{field}", which is {description}.',
        'Give each record a "{field}" key holding {description}.',
        'The "{field}" field is required: {description}.',
        'Add "{field}" to the object ({description}).',
        'Do not leave out "{field}"; it is {description}.',
        'Each object needs a "{field}" entry with {description}.',
        'Fill in "{field}" with {description}.',
    ),
    "variety": (
        'Vary the "{field}" across records; never repeat a value.',
        'Use a different "{field}" in every record.',
        'No two records may share the same "{field}".',
        'Make the "{field}" values diverse.',
        'Pick an unusual "{field}" each time.',
        'Avoid repeating any "{field}" value.',
    ),
    "format": (
        "Answer with only the JSON object, no other text.",
        "Output raw JSON only.",
        "Reply with the JSON object and nothing else.",
        "Do not add any explanation before or after the JSON.",
        "Return just the object, without prose.",
        "No commentary: print only the JSON record.",
    ),
    "novelty": (
        "Write new content; do not copy known examples.",
        "Invent fresh content instead of reusing examples.",
        "Be original and do not repeat known records.",
        "Create a record that appears in no dataset.",
        "Avoid copying any example you know.",
    ),
    "example": (
        "Example: {record}",
        "For example: {record}",
        "Here is a sample record: {record}",
        "A record looks like this: {record}",
    ),
}

#: The edit library's phrasing of each cue.
LIBRARY = {kind: phrasings[0] for kind, phrasings in TRAIN_PHRASINGS.items()}

#: Never in a training prompt: an evaluation asks with these (documented in docs/promptedit.md).
HELD_OUT_PHRASINGS: dict[str, tuple[str, ...]] = {
    "field_hint": (
        'Never omit the "{field}" key, {description}.',
        'Provide "{field}" as {description}.',
    ),
    "variety": (
        'Keep the "{field}" fresh and different from one record to the next.',
        'Every record should have its own distinct "{field}".',
    ),
    "format": (
        "Respond solely with a valid JSON object.",
        "Skip any greeting or explanation and give only the JSON.",
    ),
    "novelty": (
        "Come up with something nobody has written before.",
        "Make it novel rather than a copy of existing data.",
    ),
    "example": (
        "Sample: {record}",
        "Something like: {record}",
    ),
}

#: The prose a vague prompt's records come wrapped in (the rule-based generator's chatty style).
PROSE_WRAPPERS = (
    "Sure! Here is a record:\n{}\nI hope this helps.",
    "Here you go:\n{}",
    "{}\nLet me know if you need another one.",
    "Of course. {}",
)


def phrase(template: str, task: SchemaTask | None = None, field_name: str | None = None,
           record: dict | None = None) -> str:
    """One cue sentence: `template` filled with a field (and its description) or a record."""
    description = task.field_descriptions[field_name] if task is not None and field_name else ""
    return template.format(field=field_name or "", description=description,
                           record=json.dumps(record, ensure_ascii=False) if record is not None else "")


def all_phrasings(kind: str) -> tuple[str, ...]:
    return TRAIN_PHRASINGS[kind] + HELD_OUT_PHRASINGS[kind]


@dataclass
class Cues:
    """What a prompt asks for: fields hinted, fields to vary, format, novelty, example records."""

    hinted: set[str] = field(default_factory=set)
    varied: set[str] = field(default_factory=set)
    tight_format: bool = False
    novelty: bool = False
    examples: list[dict] = field(default_factory=list)


def find_cues(task: SchemaTask, prompt: str) -> Cues:
    """The cues `prompt` holds, in any train or held-out phrasing; examples are the JSON objects
    quoted in it (any phrasing around them)."""
    return Cues(
        hinted={f for f in task.fields if any(phrase(t, task, f) in prompt for t in all_phrasings("field_hint"))},
        varied={f for f in task.fields if any(phrase(t, task, f) in prompt for t in all_phrasings("variety"))},
        tight_format=any(t in prompt for t in all_phrasings("format")),
        novelty=any(t in prompt for t in all_phrasings("novelty")),
        examples=quoted_records(prompt),
    )


def quoted_records(text: str) -> list[dict]:
    """The JSON objects written in `text` (outermost ones, left to right)."""
    decoder, records, start = json.JSONDecoder(), [], text.find("{")
    while start >= 0:
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            records.append(value)
        start = text.find("{", end)
    return records


def cue_sentences(task: SchemaTask, held_out: bool, variant: int = 0) -> list[str]:
    """The fully specified prompt's cue sentences (every field hint, then the format sentence),
    all in the `variant`-th train or held-out phrasing (cycling through each list)."""
    table = HELD_OUT_PHRASINGS if held_out else TRAIN_PHRASINGS
    hint = table["field_hint"][variant % len(table["field_hint"])]
    return [phrase(hint, task, f) for f in task.fields] + [table["format"][variant % len(table["format"])]]


def specified_prompt_in(task: SchemaTask, held_out: bool, variant: int = 0) -> str:
    """The starting prompt plus every field hint and the format cue, phrased from the train or
    the held-out set (train variant 0 is exactly `edits.specified_prompt`)."""
    return " ".join([task.initial_prompt] + cue_sentences(task, held_out, variant))

