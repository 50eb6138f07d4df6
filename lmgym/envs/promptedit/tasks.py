"""The four PromptEdit schema tasks: JSON Schemas, semantic checks and real reference records.

A `SchemaTask` is everything the judge needs to know about one kind of record: its JSON Schema
(validated with ``jsonschema``), the task's semantic checks (named predicates a record must
pass beyond the schema), the yes/no rubric derived from them, the initial prompt an episode
starts from, and the reference records, split into

* ``train``: what a generator may learn from (and what the edit library's examples quote);
* ``held_out``: what field overlap, similarity and novelty are measured against.

Sources (all read through ``LMGYM_DATA``, see ``/work/shared/data/README.md`` for licences):

* TruthfulQA: ``truthfulqa/TruthfulQA_v1_817.csv`` (Lin et al., 2022), one record per question.
* Self-Instruct: ``self_instruct/seed_tasks.jsonl`` (Wang et al., 2023), one record per instance
  of the 175 seed tasks.
* Super-NaturalInstructions: ``super_natural_instructions/tasks/task*.json`` (Wang et al.,
  2022), one record per instance (definition, input, first output), at most 300 per task file
  so that one long task does not drown the others.
* MultiWOZ: ``multiwoz/convlab_format/{val,test}.json.zip`` (ConvLab MultiWOZ 2.0 layout), one
  booking record per (dialogue, domain): the slots and values of the dialogue's final belief
  state (``metadata``) for each domain its goal names; checked against ``multiwoz/db/*.json``.
  The official split is kept: val dialogues are train references, test dialogues held out.

For the three non-MultiWOZ sets the split is a fixed permutation (numpy seed 0) of the records
sorted by their source id: three quarters train, one quarter held out. Reference records that
fail their own task's checks are dropped (the counts are in `SchemaTask.dropped`), so a copy of
any reference record is a success by construction.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import jsonschema
import numpy as np

from lmgym.data import cache_dir, data_root, find_data
from lmgym.io import atomic_write_json

#: A semantic check: (name, yes/no question, predicate on a schema-valid record).
Check = tuple[str, str, Callable[[dict[str, Any]], bool]]

TRAIN_SHARE = 0.75
#: Cap on Super-NaturalInstructions instances taken from one task file.
SNI_PER_TASK = 300


@dataclass(frozen=True, eq=False)  # identity hash: tasks are cached per process and key other caches
class SchemaTask:
    """One record type: schema, semantic checks, prompt and reference records."""

    name: str  # the registered variant: TruthfulQA, SelfInstruct, SuperNI, MultiWOZ
    description: str  # one line, used in the initial prompt and as info["task"]
    schema: dict[str, Any]
    field_descriptions: dict[str, str]  # top-level field -> what it holds, for field hints
    checks: tuple[Check, ...]
    train: tuple[dict[str, Any], ...]
    held_out: tuple[dict[str, Any], ...]
    dropped: int = 0  # reference records removed because they fail the task's own checks
    initial_prompt: str = ""
    validator: Any = field(default=None, compare=False, repr=False)

    @property
    def fields(self) -> list[str]:
        return list(self.field_descriptions)

    def validate(self, record: Any) -> list[str]:
        """Schema errors of `record` as short strings (empty when valid)."""
        return [_describe_error(e) for e in sorted(self.validator.iter_errors(record), key=lambda e: list(e.path))]

    def failed_checks(self, record: dict[str, Any]) -> list[str]:
        """Names of the semantic checks a schema-valid `record` fails."""
        return [name for name, _, predicate in self.checks if not predicate(record)]


def _describe_error(error: jsonschema.ValidationError) -> str:
    if error.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        return f"missing:{missing[0] if missing else error.message}"
    where = ".".join(str(p) for p in error.path) or "record"
    return f"{error.validator}:{where}"


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _make_task(name, description, schema, field_descriptions, checks, train, held_out, dropped) -> SchemaTask:
    # Deliberately unspecific: which fields, what format and how much variety are for the edits to add.
    prompt = f"Write one JSON record: {description}."
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return SchemaTask(name, description, schema, field_descriptions, tuple(checks), tuple(train), tuple(held_out),
                      dropped, prompt, validator_class(schema))


def _split_and_filter(name, description, schema, fields, checks, records: list[tuple[str, dict]]) -> SchemaTask:
    """Drop records failing their checks, then split them by a fixed permutation of sorted ids."""
    probe = _make_task(name, description, schema, fields, checks, (), (), 0)
    keep = [(rid, r) for rid, r in sorted(records, key=lambda x: x[0]) if not probe.validate(r) and not probe.failed_checks(r)]
    order = np.random.default_rng(0).permutation(len(keep))
    cut = int(round(TRAIN_SHARE * len(keep)))
    train = [keep[i][1] for i in sorted(order[:cut])]
    held_out = [keep[i][1] for i in sorted(order[cut:])]
    return _make_task(name, description, schema, fields, checks, train, held_out, len(records) - len(keep))


def _string(min_length: int = 1) -> dict[str, Any]:
    return {"type": "string", "minLength": min_length}


def _record_schema(properties: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema (2020-12) for a record with exactly these fields, all required."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


# -- TruthfulQA --------------------------------------------------------------------------
def _truthfulqa() -> SchemaTask:
    folder = find_data(
        "truthfulqa", required=["TruthfulQA_v1_817.csv"],
        layout="  truthfulqa/TruthfulQA_v1_817.csv  (Type, Category, Question, Best Answer, Correct Answers, "
               "Incorrect Answers, Source; answers separated by '; ')",
        source="https://github.com/sylinrl/TruthfulQA (TruthfulQA.csv)",
    )
    with open(folder / "TruthfulQA_v1_817.csv", encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    split = lambda text: [a.strip() for a in text.split(";") if a.strip()]  # noqa: E731
    records = [(f"{i:04d}", {
        "question": row["Question"].strip(),
        "best_answer": row["Best Answer"].strip(),
        "correct_answers": split(row["Correct Answers"]),
        "incorrect_answers": split(row["Incorrect Answers"]),
        "category": row["Category"].strip(),
    }) for i, row in enumerate(rows)]
    categories = sorted({r["category"] for _, r in records})
    answers = {"type": "array", "items": _string(), "minItems": 1}
    schema = _record_schema({"question": _string(), "best_answer": _string(), "correct_answers": answers,
                           "incorrect_answers": answers, "category": {"enum": categories}})
    fields = {
        "question": "a question that some humans would answer falsely",
        "best_answer": "the single best true answer",
        "correct_answers": "a list of true answers",
        "incorrect_answers": "a list of false answers people commonly give",
        "category": "one of TruthfulQA's 38 categories, such as Misconceptions",
    }
    checks = [
        ("question_mark", "Does every question end with a question mark?",
         lambda r: r["question"].rstrip().endswith("?")),
        ("best_in_correct", "Is the best answer one of the correct answers?",
         lambda r: r["best_answer"] in r["correct_answers"]),
        ("answers_disjoint", "Are the correct and incorrect answers disjoint?",
         lambda r: not set(r["correct_answers"]) & set(r["incorrect_answers"])),
    ]
    return _split_and_filter("TruthfulQA", "a TruthfulQA question with its true and false answers", schema, fields,
                             checks, records)


# -- Self-Instruct -----------------------------------------------------------------------
def _self_instruct() -> SchemaTask:
    folder = find_data(
        "self_instruct", required=["seed_tasks.jsonl"],
        layout="  self_instruct/seed_tasks.jsonl  (one JSON per line: id, name, instruction, "
               "instances[{input, output}], is_classification)",
        source="https://github.com/yizhongw/self-instruct (data/seed_tasks.jsonl)",
    )
    records = []
    with open(folder / "seed_tasks.jsonl", encoding="utf-8") as f:
        for line in f:
            task = json.loads(line)
            for k, instance in enumerate(task["instances"]):
                records.append((f"{task['id']}/{k}", {
                    "instruction": task["instruction"].strip(), "input": instance["input"].strip(),
                    "output": instance["output"].strip(), "is_classification": bool(task["is_classification"]),
                }))
    schema = _record_schema({"instruction": _string(), "input": {"type": "string"}, "output": _string(),
                           "is_classification": {"type": "boolean"}})
    fields = {
        "instruction": "a task instruction for an assistant",
        "input": "the task's input, or an empty string",
        "output": "a correct response to the instruction and input",
        "is_classification": "true when the output is a label from a small set",
    }
    checks = [
        ("instruction_words", "Does every instruction have at least three words?",
         lambda r: len(_words(r["instruction"])) >= 3),
        ("output_not_copied", "Does every output differ from its instruction and input?",
         lambda r: r["output"] not in (r["instruction"], r["input"])),
        ("short_labels", "Is every classification output a short label (at most 10 words)?",
         lambda r: not r["is_classification"] or len(_words(r["output"])) <= 10),
    ]
    return _split_and_filter("SelfInstruct", "a Self-Instruct task instance", schema, fields, checks, records)


# -- Super-NaturalInstructions -------------------------------------------------------------
def _super_ni() -> SchemaTask:
    folder = find_data(
        "super_natural_instructions", required=["tasks/task*.json"],
        layout="  super_natural_instructions/tasks/task<N>_<name>.json  (Definition, Positive Examples, "
               "Instances[{id, input, output}], ...)",
        source="https://github.com/allenai/natural-instructions (tasks/)",
    )
    records, definitions = [], []
    for path in sorted((folder / "tasks").glob("task*.json")):
        task = json.loads(path.read_text(encoding="utf-8"))
        definition = " ".join(task["Definition"]).strip()
        definitions.append(definition)
        for instance in task["Instances"][:SNI_PER_TASK]:
            records.append((instance["id"], {"definition": definition, "input": instance["input"].strip(),
                                             "output": instance["output"][0].strip()}))
    schema = _record_schema({"definition": _string(), "input": _string(), "output": _string()})
    fields = {
        "definition": "the task definition in plain English",
        "input": "one input of the task",
        "output": "the correct output for that input",
    }
    checks = [
        ("definition_words", "Is every definition a full sentence of at least five words?",
         lambda r: len(_words(r["definition"])) >= 5),
        ("output_fits_task", "Does every output have the form its definition asks for "
         "(A/B for COPA, a span of the input for pronouns, a sentence naming the restaurant for E2E)?",
         _sni_output_fits),
    ]
    return _split_and_filter("SuperNI", "a Super-NaturalInstructions task instance", schema, fields, checks, records)


def _sni_output_fits(record: dict[str, Any]) -> bool:
    """Task-specific output form, keyed on the definition's wording (unknown tasks pass)."""
    definition, source, output = record["definition"].lower(), record["input"], record["output"]
    if 'answer with "a" or "b"' in definition:  # task1393 (COPA)
        return output in ("A", "B")
    if "pronoun" in definition:  # task648 (Winograd pronouns): the referent is a span of the text
        return output.lower() in source.lower()
    if "key-value pairs" in definition:  # task957 (E2E NLG): the sentence names the restaurant
        name = re.search(r"name\[([^\]]+)\]", source)
        return name is None or name.group(1).lower() in output.lower()
    return True


# -- MultiWOZ ------------------------------------------------------------------------------
MULTIWOZ_DOMAINS = ("attraction", "hospital", "hotel", "restaurant", "taxi", "train")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
#: Book slots lifted from the belief state's ``book`` part (``booked`` is the system's answer).
BOOK_SLOTS = ("day", "people", "stay", "time")
#: Slot values the belief state uses for "any" (checked as allowed everywhere).
ANY_VALUES = ("dontcare",)
TIME_PATTERN = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")


def _multiwoz_folder() -> Path:
    return find_data(
        "multiwoz", required=["convlab_format/val.json.zip", "convlab_format/test.json.zip", "db/*_db.json"],
        layout="  multiwoz/convlab_format/val.json.zip, test.json.zip  (ConvLab MultiWOZ 2.0: dialogue id -> goal, "
               "log[{text, metadata, ...}])\n  multiwoz/db/<domain>_db.json  (the MultiWOZ databases)",
        source="https://github.com/ConvLab/ConvLab (data/multiwoz) and https://github.com/budzianowski/multiwoz (db/)",
    )


def _read_dialogues(zip_path: Path) -> dict:
    with zipfile.ZipFile(zip_path) as archive:
        return json.loads(archive.read(archive.namelist()[0]))


def _booking_records(dialogues: dict) -> list[tuple[str, dict]]:
    records = []
    for dialogue_id in sorted(dialogues):
        dialogue = dialogues[dialogue_id]
        states = [turn["metadata"] for turn in dialogue["log"] if turn.get("metadata")]
        if not states:
            continue
        for domain in MULTIWOZ_DOMAINS:
            if not dialogue["goal"].get(domain) or domain not in states[-1]:
                continue
            belief = states[-1][domain]
            slots = {s: v for s, v in sorted(belief["semi"].items()) if v not in ("", "not mentioned")}
            slots.update({s: v for s, v in sorted(belief["book"].items()) if s in BOOK_SLOTS and v not in ("", "not mentioned")})
            if slots:
                records.append((f"{dialogue_id}/{domain}", {"domain": domain, "slots": dict(sorted(slots.items()))}))
    return records


def _multiwoz_ontology(val_dialogues: dict, folder: Path) -> tuple[dict[str, list[str]], dict[str, dict[str, list[str]]]]:
    """Valid slot names per domain (from the val belief states) and db value lists per slot."""
    slot_names: dict[str, set[str]] = {d: set() for d in MULTIWOZ_DOMAINS}
    for dialogue in val_dialogues.values():
        for turn in dialogue["log"]:
            for domain, belief in (turn.get("metadata") or {}).items():
                if domain in slot_names:
                    slot_names[domain] |= set(belief["semi"]) | (set(belief["book"]) & set(BOOK_SLOTS))
    db_values: dict[str, dict[str, list[str]]] = {}
    db_slots = {"attraction": ("area", "name", "type"), "hospital": ("department",),
                "hotel": ("area", "internet", "name", "parking", "pricerange", "stars", "type"),
                "restaurant": ("area", "food", "name", "pricerange"), "train": ("day", "departure", "destination")}
    for domain, slots in db_slots.items():
        rows = json.loads((folder / "db" / f"{domain}_db.json").read_text(encoding="utf-8"))
        db_values[domain] = {s: sorted({str(row[s]).lower() for row in rows if s in row}) for s in slots}
    return {d: sorted(s) for d, s in slot_names.items()}, db_values


def _multiwoz_slots_valid(slot_names: dict[str, list[str]]) -> Callable[[dict], bool]:
    return lambda r: set(r["slots"]) <= set(slot_names[r["domain"]])


def _multiwoz_values_in_db(db_lists: dict[str, dict[str, list[str]]]) -> Callable[[dict], bool]:
    db_values = {domain: {slot: set(values) for slot, values in slots.items()} for domain, slots in db_lists.items()}

    def check(record: dict) -> bool:
        for slot, value in record["slots"].items():
            value = value.lower()
            if value in ANY_VALUES:
                continue
            known = db_values.get(record["domain"], {}).get(slot)
            if known is not None and value not in known:
                return False
            if slot in ("arriveBy", "leaveAt", "time") and not TIME_PATTERN.match(value):
                return False
            if slot == "day" and value not in WEEKDAYS:
                return False
            if slot in ("people", "stay") and not (value.isdigit() and 1 <= int(value) <= 20):
                return False
        return True
    return check


def _multiwoz() -> SchemaTask:
    data = _multiwoz_extract(_multiwoz_folder())
    return _make_task("MultiWOZ", *_multiwoz_parts(data["slot_names"], data["db_values"]),
                      data["train"], data["held_out"], data["dropped"])


def _multiwoz_parts(slot_names: dict[str, list[str]], db_values: dict[str, dict[str, list[str]]]) -> tuple:
    """(description, schema, field descriptions, checks) of the MultiWOZ booking task."""
    schema = _record_schema({"domain": {"enum": list(MULTIWOZ_DOMAINS)},
                           "slots": {"type": "object", "minProperties": 1, "additionalProperties": _string()}})
    fields = {
        "domain": "one of " + ", ".join(MULTIWOZ_DOMAINS),
        "slots": "an object of the booking's slot names and values, such as area, pricerange, day, people",
    }
    checks = [
        ("slot_names", "Are all slot names valid for the record's domain?", _multiwoz_slots_valid(slot_names)),
        ("values_in_db", "Does every value exist in the domain database (or have the slot's format)?",
         _multiwoz_values_in_db(db_values)),
    ]
    return "a MultiWOZ booking request for Cambridge", schema, fields, checks


def _multiwoz_extract(folder: Path) -> dict[str, Any]:
    """Booking records (checked), slot names and db values, cached on disk.

    Decoding the two 34 MB dialogue files takes seconds; the extract is a few hundred KB, so it
    is cached under ``$LMGYM_CACHE/promptedit`` (default ``~/.cache/lmgym``), keyed by the data
    files' sizes and mtimes and by this module's source (any code change rebuilds it).
    """
    sources = [folder / "convlab_format" / "val.json.zip", folder / "convlab_format" / "test.json.zip",
               *sorted((folder / "db").glob("*_db.json"))]
    key = hashlib.sha1(Path(__file__).read_bytes())
    for path in sources:
        stat = path.stat()
        key.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    cache = cache_dir() / "promptedit" / f"multiwoz-{key.hexdigest()[:16]}.json"
    if cache.exists():
        try:
            return json.loads(cache.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            pass  # a damaged cache is rebuilt below
    val = _read_dialogues(sources[0])
    slot_names, db_values = _multiwoz_ontology(val, folder)
    probe = _make_task("MultiWOZ", *_multiwoz_parts(slot_names, db_values), (), (), 0)
    ok = lambda r: not probe.validate(r) and not probe.failed_checks(r)  # noqa: E731
    train_all = [r for _, r in _booking_records(val)]
    held_all = [r for _, r in _booking_records(_read_dialogues(sources[1]))]
    data = {"slot_names": slot_names, "db_values": db_values,
            "train": [r for r in train_all if ok(r)], "held_out": [r for r in held_all if ok(r)]}
    data["dropped"] = len(train_all) + len(held_all) - len(data["train"]) - len(data["held_out"])
    try:
        atomic_write_json(cache, data)
        for stale in cache.parent.glob("multiwoz-*.json"):  # extracts of older code or data
            if stale != cache:
                stale.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only home only costs the next process the same seconds
    return data


LOADERS: dict[str, Callable[[], SchemaTask]] = {
    "MultiWOZ": _multiwoz, "SelfInstruct": _self_instruct, "SuperNI": _super_ni, "TruthfulQA": _truthfulqa,
}
#: LMGYM_DATA sub-folder each task reads (for registration's ``requires_data``).
DATA_FOLDERS = {"MultiWOZ": "multiwoz", "SelfInstruct": "self_instruct",
                "SuperNI": "super_natural_instructions", "TruthfulQA": "truthfulqa"}


def load_task(name: str) -> SchemaTask:
    """The task called `name` (one of `LOADERS`), parsed once per process and data folder."""
    if name not in LOADERS:
        raise ValueError(f"unknown PromptEdit task {name!r}; choose one of {sorted(LOADERS)}")
    return _load_task(name, str(data_root()))


@lru_cache(maxsize=None)
def _load_task(name: str, root: str) -> SchemaTask:  # `root` keys the cache on LMGYM_DATA
    return LOADERS[name]()
