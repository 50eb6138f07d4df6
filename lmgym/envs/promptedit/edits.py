"""The prompt-edit grammar, and the edit library that lists concrete edits for a state.

A prompt is a list of sentences. Sentences end at ``.``, ``!`` or ``?`` followed by space, but
never inside braces, brackets or double quotes, so a quoted JSON example stays one sentence.

Grammar (command words are case-insensitive; sentences are numbered from 1):

* ``replace prompt: <text>``: the whole prompt becomes <text>.
* ``append: <sentence>``: add a sentence at the end.
* ``delete sentence <k>``: remove sentence k.
* ``replace "<old>" with "<new>"``: replace every occurrence of a phrase (``<old>`` must occur).

The edit library is the finite menu an RL policy picks from (`EditLibrary.entries`, fixed order
per task, so a ``Discrete`` index always names the same kind of edit): a field hint per field,
a variety request per field, three examples from the train references, a tighter format, a
novelty request, delete the last sentence, and back to the starting prompt.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from lmgym.envs.promptedit.phrasings import LIBRARY, phrase, specified_prompt_in
from lmgym.envs.promptedit.tasks import SchemaTask

#: Longest prompt an edit may produce (characters); longer results are refused.
MAX_PROMPT_CHARS = 1_500

FORMAT_SENTENCE = LIBRARY["format"]
NOVELTY_SENTENCE = LIBRARY["novelty"]
NUM_EXAMPLES = 3

_REPLACE_PROMPT = re.compile(r"^replace prompt:\s*(.*)$", re.IGNORECASE | re.DOTALL)
_APPEND = re.compile(r"^append:\s*(.+)$", re.IGNORECASE | re.DOTALL)
_DELETE = re.compile(r"^delete sentence\s+(\d+)\s*$", re.IGNORECASE)
_REPLACE_PHRASE = re.compile(r'^replace\s+"(.+?)"\s+with\s+"(.*)"\s*$', re.IGNORECASE | re.DOTALL)


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, not splitting inside {...}, [...] or "..."."""
    sentences, start, depth, quoted, escaped = [], 0, 0, False, False
    for i, char in enumerate(text):
        if quoted:  # inside "...": only an unescaped quote ends it
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
            continue
        if char == '"':
            quoted = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth = max(0, depth - 1)
        elif char in ".!?" and depth == 0 and (i + 1 == len(text) or text[i + 1].isspace()):
            sentences.append(text[start:i + 1])
            start = i + 1
    sentences.append(text[start:])
    return [s.strip() for s in sentences if s.strip()]


def join_sentences(sentences: list[str]) -> str:
    return " ".join(sentences)


@dataclass(frozen=True)
class EditResult:
    prompt: str
    valid: bool
    message: str  # what the edit did, or why it was refused


def apply_edit(prompt: str, command: str) -> EditResult:
    """Apply one edit command to `prompt`; a malformed or no-op edit leaves it unchanged."""
    command = command.strip()
    sentences = split_sentences(prompt)
    if match := _REPLACE_PROMPT.match(command):
        new_prompt = join_sentences(split_sentences(match.group(1)))
        message = "Replaced the prompt."
    elif match := _APPEND.match(command):
        new_prompt = join_sentences(sentences + split_sentences(match.group(1)))
        message = "Appended a sentence."
    elif match := _DELETE.match(command):
        index = int(match.group(1))
        if not 1 <= index <= len(sentences):
            return EditResult(prompt, False, f"Invalid edit: the prompt has {len(sentences)} sentences, not {index}.")
        new_prompt = join_sentences(sentences[:index - 1] + sentences[index:])
        message = f"Deleted sentence {index}."
    elif match := _REPLACE_PHRASE.match(command):
        old, new = match.group(1), match.group(2)
        if old not in prompt:
            return EditResult(prompt, False, f'Invalid edit: the phrase "{old}" is not in the prompt.')
        new_prompt = join_sentences(split_sentences(prompt.replace(old, new)))
        message = "Replaced a phrase."
    else:
        return EditResult(prompt, False, 'Invalid edit. Use "replace prompt: <text>", "append: <sentence>", '
                                         '"delete sentence <k>" or "replace "<old>" with "<new>"".')
    if not new_prompt:
        return EditResult(prompt, False, "Invalid edit: the prompt would be empty.")
    if len(new_prompt) > MAX_PROMPT_CHARS:
        return EditResult(prompt, False, f"Invalid edit: the prompt would exceed {MAX_PROMPT_CHARS} characters.")
    if new_prompt == prompt:
        return EditResult(prompt, False, "Invalid edit: the prompt is unchanged.")
    return EditResult(new_prompt, True, message)


def field_hint(task: SchemaTask, field: str) -> str:
    return phrase(LIBRARY["field_hint"], task, field)


def variety_request(field: str) -> str:
    return phrase(LIBRARY["variety"], field_name=field)


def specified_prompt(task: SchemaTask) -> str:
    """The starting prompt with every field hint and the format sentence appended: the prompt a
    generator trained on `training_pairs` answers with schema-valid records most often."""
    return specified_prompt_in(task, held_out=False)  # the library's phrasing of each cue


def example_sentence(record: dict) -> str:
    return phrase(LIBRARY["example"], record=record)


def example_records(task: SchemaTask) -> list[dict]:
    """The library's example records: the shortest train references (fixed per task)."""
    return sorted(task.train, key=lambda r: (len(json.dumps(r, ensure_ascii=False)), json.dumps(r, sort_keys=True)))[:NUM_EXAMPLES]


class EditLibrary:
    """The fixed, ordered menu of edits for one task; `command` makes an entry concrete."""

    def __init__(self, task: SchemaTask, starting_prompt: str | None = None):
        self.task = task
        appends = [(f"add a field hint for {f}", field_hint(task, f)) for f in task.fields]
        appends += [(f"ask for variety in {f}", variety_request(f)) for f in task.fields]
        appends += [(f"add example {k + 1}", example_sentence(r)) for k, r in enumerate(example_records(task))]
        appends += [("tighten the format", FORMAT_SENTENCE), ("ask for novelty", NOVELTY_SENTENCE)]
        self._appends = dict(appends)
        self.entries: list[str] = [name for name, _ in appends] + ["delete the last sentence", "restart from the task prompt"]
        self.starting_prompt = starting_prompt or task.initial_prompt

    def __len__(self) -> int:
        return len(self.entries)

    def command(self, index: int, prompt: str) -> str:
        """The concrete grammar command that entry `index` means for `prompt`."""
        name = self.entries[index]
        if name in self._appends:
            return f"append: {self._appends[name]}"
        if name == "delete the last sentence":
            return f"delete sentence {len(split_sentences(prompt))}"
        return f"replace prompt: {self.starting_prompt}"

    def admissible(self, prompt: str) -> list[bool]:
        """Which entries change `prompt` into a valid new prompt without repeating a sentence."""
        present = set(split_sentences(prompt))
        return [self._appends.get(name) not in present and apply_edit(prompt, self.command(i, prompt)).valid
                for i, name in enumerate(self.entries)]

    def admissible_commands(self, prompt: str) -> list[str]:
        return sorted({self.command(i, prompt) for i, ok in enumerate(self.admissible(prompt)) if ok})
