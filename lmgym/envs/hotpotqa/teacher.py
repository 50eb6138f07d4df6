"""The grounded HotPotQA teacher: search what the question names, read, answer with a span.

`lmgym.envs.hotpotqa.expert` walks the supporting facts and finishes with the gold answer;
a reader has neither. This teacher reads only the question (``info["task"]``), the titles it
is allowed to search (``search[T]`` in ``info["admissible_actions"]``: the question's pages
in the distractor setting, plus every title an observation named) and the pages its
searches showed. Every answer is a span of a sentence it read (or yes/no), and the
reasoning line quotes that sentence.

Two readers share one driver (`HotPotQATeacher`):

* ``"gen"`` (HotPotQA-Gen): the generator's question templates and page sentences are
  known (`lmgym.envs.hotpotqa.gen`), so the reader follows the relation each template
  names ("the director of X": the ``directed by`` sentence of X's page) page by page and
  reads the asked attribute off the last one. Exact whenever the pages are there.
* ``"heuristic"`` (real questions): the first page is the title the question names best;
  bridge questions go on to the searchable title that page's best-matching sentence names,
  comparison questions to the other named title; the answer is picked by question-type
  rules (yes/no: does each page state the asked property; "which first/older": the earlier
  year on the two pages; when / how many / who / where / which X: a date, number or name
  span of the sentence sharing most words with the question). Its exact match is far below
  the oracle expert's; that gap is the measurement (docs/teachers.md).

The driver searches at most `MAX_SEARCHES` pages and always finishes by its `FINISH_BY`-th
action, inside ReAct's 7-step budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from lmgym.envs.hotpotqa.corpus import short_title

#: The driver finishes on this action at the latest (ReAct's HotPotQA budget is 7 steps).
FINISH_BY = 6
MAX_SEARCHES = 4
_SEARCH = re.compile(r"^search\[(?P<t>.*)\]$", re.S)
_NOT_FOUND = re.compile(r"^Could not find (?P<q>.*?)\. Similar: \[(?P<similar>.*)\]\.$", re.S)
_LOOKUP_RESULT = re.compile(r"^\(Result \d+ / \d+\) (?P<s>.*)$", re.S)
#: Sentence ends: ., ! or ? then space then an upper-case letter, digit or quote. Pages are
#: shown as sentences joined by one space, so this recovers them up to abbreviations.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"“(A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


@dataclass
class Reading:
    """What the teacher has read: the question, searchable titles, the pages shown."""

    question: str = ""
    titles: list[str] = field(default_factory=list)  # searchable, in admissible order
    pages: dict[str, list[str]] = field(default_factory=dict)  # title -> sentences, in reading order
    searched: list[str] = field(default_factory=list)  # every query, found or not
    actions: int = 0

    def read(self, observation: str, last_action: str | None) -> None:
        if last_action is None:
            return
        search = _SEARCH.match(last_action)
        text = observation.strip()
        if search:
            title = search["t"]
            self.searched.append(title)
            if not _NOT_FOUND.match(text) and not text.startswith("Invalid action"):
                self.pages[title] = split_sentences(text)
        elif (result := _LOOKUP_RESULT.match(text)) and self.pages:
            page = list(self.pages)[-1]
            if result["s"] not in self.pages[page]:
                self.pages[page].append(result["s"])

    def unread(self) -> list[str]:
        done = {t.lower() for t in self.searched}
        return [t for t in self.titles if t.lower() not in done]


def quote(title: str, sentence: str) -> str:
    return f'{title} says: "{sentence}"'


class HotPotQATeacher:
    """``act(observation, info) -> (action, reasoning)`` from the question and pages read."""

    def __init__(self, reader: str = "heuristic"):
        if reader not in READERS:
            raise ValueError(f"reader must be one of {sorted(READERS)}, got {reader!r}")
        self.reader_name = reader
        self.reset()

    def reset(self) -> None:
        self.reading = Reading()
        self.reader = READERS[self.reader_name]()
        self.last_action: str | None = None

    def act(self, observation: str, info: Mapping[str, Any]) -> tuple[str, str]:
        reading = self.reading
        reading.question = info["task"]
        reading.read(observation, self.last_action)
        reading.titles = [m["t"] for a in info.get("admissible_actions") or () if (m := _SEARCH.match(a))]
        if reading.actions + 1 >= FINISH_BY or len(reading.searched) >= MAX_SEARCHES:
            action, reasoning = self.reader.answer(reading)
        else:
            action, reasoning = self.reader.step(reading)
        reading.actions += 1
        self.last_action = action
        return action, reasoning


# -- shared word tools ----------------------------------------------------------------------
_STOPWORDS = frozenset("""a an the of in on at to for from by with and or but is are was were be been being as
that this these those which who whom whose what when where why how it its his her their they he she
did do does has have had not no yes than then there also into about after before over under both
same more most first which one ones name named called""".split())
_WORD = re.compile(r"[\w']+")


def words(text: str) -> list[str]:
    return [w.lower().strip("'") for w in _WORD.findall(text)]


def content_words(text: str) -> set[str]:
    return {_stem(w) for w in words(text) if w not in _STOPWORDS and len(w) > 1}


def _stem(word: str) -> str:
    """A crude stem so "directed"/"director", "founded"/"founder" meet (first 5 letters)."""
    return word[:5] if len(word) > 5 else word


def title_in(title: str, text: str) -> bool:
    return short_title(title).lower() in text.lower()


def _first(patterns: tuple[str, ...], sentences: list[str]) -> tuple[str, str] | None:
    """(value, sentence) of the first sentence matching any of `patterns`, or None."""
    for sentence in sentences:
        for pattern in patterns:
            if match := re.search(pattern, sentence):
                return match["v"], sentence
    return None


# -- the HotPotQA-Gen reader: the generator's templates, read exactly -----------------------------
#: The facts a generated page states (`lmgym.envs.hotpotqa.gen.World._render`), as patterns.
GEN_FACTS: dict[str, tuple[str, ...]] = {
    "director": (r" film directed by (?P<v>.+)\.$",),
    "company": (r"^It was produced by (?P<v>.+)\.$",),
    "founder": (r" founded in \d+ by (?P<v>.+)\.$",),
    "city": (r"^Its headquarters are in (?P<v>.+)\.$", r" band from (?P<v>.+)\.$", r" was born in (?P<v>.+), [^,]+\.$"),
    "country": (r" is a city in (?P<v>.+)\.$", r" was born in .+, (?P<v>[^,]+)\.$"),
    "born": (r"\(born (?P<v>\d+)\)",),
    "founded": (r" founded in (?P<v>\d+)",),
    "released": (r" was released in (?P<v>\d+)\.$",),
}
#: The generator's bridge templates (`gen.BRIDGES`): pattern, relations to follow, attribute asked.
#: ``rel`` stands for the relation the question names (director or founder).
GEN_BRIDGES = (
    (re.compile(r"^When was the founder of the company that produced (?P<x>.+) born\?$"), ("company", "founder"), "born"),
    (re.compile(r"^When was the (?P<rel>director|founder) of (?P<x>.+) born\?$"), ("rel",), "born"),
    (re.compile(r"^In which city was the (?P<rel>director|founder) of (?P<x>.+) born\?$"), ("rel",), "city"),
    # The country of birth is on the person's own page ("born in <city>, <country>").
    (re.compile(r"^In which country was the (?P<rel>director|founder) of (?P<x>.+) born\?$"), ("rel",), "country"),
    (re.compile(r"^In which country is (?P<x>.+) headquartered\?$"), ("city",), "country"),
    (re.compile(r"^Which country is the band (?P<x>.+) from\?$"), ("city",), "country"),
)
#: The generator's comparison templates (`gen.COMPARISONS` and the yes/no one): attribute compared.
GEN_COMPARISONS = (
    (re.compile(r"^Which was founded first, (?P<a>.+) or (?P<b>.+)\?$"), "founded"),
    (re.compile(r"^Which band was formed first, (?P<a>.+) or (?P<b>.+)\?$"), "founded"),
    (re.compile(r"^Which film came out first, (?P<a>.+) or (?P<b>.+)\?$"), "released"),
    (re.compile(r"^Who was born first, (?P<a>.+) or (?P<b>.+)\?$"), "born"),
    (re.compile(r"^Were (?P<a>.+) and (?P<b>.+) born in the same country\?$"), "country"),
)


class GenReader:
    """Follows a HotPotQA-Gen template's relations page by page; exact on generated pages."""

    def step(self, reading: Reading) -> tuple[str, str]:
        return self._read(reading, final=False)

    def answer(self, reading: Reading) -> tuple[str, str]:
        return self._read(reading, final=True)

    def _read(self, reading: Reading, final: bool) -> tuple[str, str]:
        question = reading.question.strip()
        for pattern, attribute in GEN_COMPARISONS:
            if match := pattern.match(question):
                return self._compare(reading, match["a"], match["b"], attribute, final)
        for pattern, relations, attribute in GEN_BRIDGES:
            if match := pattern.match(question):
                names = tuple(match["rel"] if r == "rel" else r for r in relations)
                return self._bridge(reading, match["x"], names, attribute, final)
        return "finish[unknown]", "The question fits no pattern I know, so I cannot answer."

    def _bridge(self, reading: Reading, start: str, relations: tuple[str, ...], attribute: str,
                final: bool) -> tuple[str, str]:
        here, why = start, f"The question asks about {start}; I search it."
        for relation in relations + (attribute,):
            sentences = reading.pages.get(here)
            if sentences is None:
                if final or here in reading.searched:
                    return "finish[unknown]", f"I could not read the page of {here}, so I cannot answer."
                return f"search[{here}]", why
            found = _first(GEN_FACTS[relation], sentences)
            if found is None:
                return "finish[unknown]", f"The page of {here} does not say its {relation}, so I cannot answer."
            value, sentence = found
            if relation == attribute:
                return f"finish[{value}]", f"{quote(here, sentence)} So the answer is {value}."
            why = f"{quote(here, sentence)} So the {relation} is {value}; I search {value}."
            here = value
        raise AssertionError("unreachable: the loop returns at the asked attribute")

    def _compare(self, reading: Reading, a: str, b: str, attribute: str, final: bool) -> tuple[str, str]:
        for name, why in ((a, f"The question compares {a} and {b}; I search {a} first."),
                          (b, f"I have read {a}; I search {b} next.")):
            if name not in reading.pages and not final and name not in reading.searched:
                return f"search[{name}]", why
        facts = {n: _first(GEN_FACTS[attribute], reading.pages.get(n, [])) for n in (a, b)}
        if facts[a] is None or facts[b] is None:
            return f"finish[{a}]", f"I could not read both pages, so I guess {a}."
        (va, sa), (vb, sb) = facts[a], facts[b]
        evidence = f"{quote(a, sa)} {quote(b, sb)}"
        if attribute == "country":
            answer = "yes" if va == vb else "no"
            verdict = f"both were born in {va}" if va == vb else f"{va} is not {vb}"
            return f"finish[{answer}]", f"{evidence} So {verdict}: the answer is {answer}."
        first = a if int(va) < int(vb) else b
        return f"finish[{first}]", f"{evidence} {min(va, vb)} comes before {max(va, vb)}, so the answer is {first}."


READERS = {"gen": GenReader}
