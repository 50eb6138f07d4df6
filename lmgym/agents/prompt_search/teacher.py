"""The edit demonstrator the tiny editor imitates, and the mutation instructions PromptBreeder uses.

`teacher_edit` reads only what the editor will read (the prompt, the judge's feedback text, a
mutation instruction) and answers with one library edit (`lmgym.envs.promptedit.edits`):

* with feedback: the edit that addresses the first problem the feedback names (text around the
  JSON: the format sentence; a missing field: its field hint; a repeated value: the variety
  request for that field; verbatim copies: the novelty request), else the first missing field
  hint, the format sentence, the novelty request;
* with an instruction: a random absent library sentence of the kind it asks for;
* with neither (EvoPrompt's and OPRO's blind mutation): a random absent library sentence.
"""

from __future__ import annotations

import re

import numpy as np

from lmgym.envs.promptedit.edits import EditLibrary, split_sentences

#: PromptBreeder-style mutation prompts, each with the library entries it asks for (name prefixes).
MUTATION_KINDS: dict[str, tuple[str, ...]] = {
    "Say which fields every record needs.": ("add a field hint",),
    "Ask for records that differ from each other.": ("ask for variety",),
    "Make the required output format strict.": ("tighten the format",),
    "Ask for new content, not copies of known records.": ("ask for novelty",),
    "Show the generator an example record.": ("add example",),
    "Change the prompt in any way that helps.": ("add a field hint", "ask for variety", "tighten the format",
                                                 "ask for novelty"),
}
MUTATION_INSTRUCTIONS = tuple(MUTATION_KINDS)
#: Library entries a blind mutation draws from (examples are long: only on request).
BLIND_KINDS = MUTATION_KINDS["Change the prompt in any way that helps."]

_MISSING = re.compile(r"miss the field (\S+?)\.")
_REPEATS = re.compile(r"The (\S+) repeats the same value")


def absent_entries(library: EditLibrary, prompt: str, kinds: tuple[str, ...]) -> list[int]:
    """Admissible library entries of the given kinds (name prefixes) for `prompt`."""
    admissible = library.admissible(prompt)
    return [i for i, name in enumerate(library.entries) if admissible[i] and name.startswith(kinds)]


def feedback_entry(library: EditLibrary, prompt: str, feedback: str) -> int | None:
    """The library entry that addresses the first problem `feedback` names (None: nothing fits)."""
    admissible = library.admissible(prompt)
    index = {name: i for i, name in enumerate(library.entries)}
    wanted = []
    for line in feedback.splitlines():
        if "not a bare JSON object" in line:
            wanted.append("tighten the format")
        elif match := _MISSING.search(line):
            wanted.append(f"add a field hint for {match.group(1)}")
        elif match := _REPEATS.search(line):
            wanted.append(f"ask for variety in {match.group(1)}")
        elif "copy a reference record verbatim" in line:
            wanted.append("ask for novelty")
    wanted += [f"add a field hint for {f}" for f in library.task.fields] + ["tighten the format", "ask for novelty"]
    return next((index[name] for name in wanted if name in index and admissible[index[name]]), None)


def teacher_edit(library: EditLibrary, prompt: str, rng: np.random.Generator, *, feedback: str | None = None,
                 instruction: str | None = None) -> str:
    """One edit command for `prompt` (see the module docstring); deleting the last sentence when
    no library sentence is left to add."""
    entry = feedback_entry(library, prompt, feedback) if feedback else None
    if entry is None:
        choices = absent_entries(library, prompt, MUTATION_KINDS.get(instruction or "", BLIND_KINDS)) \
            or absent_entries(library, prompt, BLIND_KINDS)
        entry = choices[int(rng.integers(len(choices)))] if choices else None
    if entry is None:
        return f"delete sentence {len(split_sentences(prompt))}"
    return library.command(entry, prompt)
