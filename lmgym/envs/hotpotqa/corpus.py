"""Titled paragraphs, questions over them, and the loaders of the real HotPotQA files.

Two official layouts are read (``$LMGYM_DATA/hotpotqa/``):

* ``hotpot_dev_distractor_sample100.json``, the HotPotQA distractor layout: a JSON list of
  ``{_id, question, answer, type, level, supporting_facts: [[title, sentence_id]], context:
  [[title, [sentence, ...]]]}``. Paragraphs come already split into sentences.
* ``ircot_hotpotqa_dev_subsampled.jsonl``, the IRCoT layout: one JSON object a line,
  ``{question_id, question_text, answers_objects: [{spans: [answer]}], contexts: [{title,
  paragraph_text, is_supporting}]}``. It has no question type and no sentence ids: the type is
  taken from ``hotpot_dev_v1_simplified.json`` (ReAct's question/answer/type file, matched by
  question text; all 500 match), and paragraphs are split into sentences on runs of two or more
  spaces. IRCoT built ``paragraph_text`` by joining HotPotQA's sentence list, whose sentences
  after the first start with a space, so a double space marks each official boundary: on the
  120 paragraphs that also appear in the distractor file this rule gives the official
  sentences for 119 (the other keeps two sentences together). A paragraph without a double
  space is one sentence.

``source="both"`` merges the two, dropping the 12 IRCoT questions already in the distractor
file (same ``_id``), which leaves 588 questions.

Splits (`SPLIT_SOURCES`; every file above is HotPotQA dev, so the split is by file): ``test`` is
the 100 questions of the official distractor sample; ``dev`` the 488 IRCoT questions not in it
(``source="ircot_only"``); ``train`` the official training file ``hotpot_train_v1.1.json`` (the
distractor layout, 90,447 questions) where a user puts it in the folder: the shared data does
not hold it, and nothing here is trained on real HotPotQA.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from lmgym.data import DataNotFoundError, find_data
from lmgym.envs.splits import task_id

DISTRACTOR_FILE = "hotpot_dev_distractor_sample100.json"
IRCOT_FILE = "ircot_hotpotqa_dev_subsampled.jsonl"
SIMPLIFIED_FILE = "hotpot_dev_v1_simplified.json"
TRAIN_FILE = "hotpot_train_v1.1.json"
SOURCES = ("distractor", "ircot", "both", "ircot_only", "train")
#: The questions of each split: a `SOURCES` entry (see the module docstring).
SPLIT_SOURCES = {"test": "distractor", "dev": "ircot_only", "train": "train"}

_LAYOUT = f"""  hotpotqa/
    {DISTRACTOR_FILE}   (HotPotQA distractor layout: _id, question, answer, type, supporting_facts, context)
    {IRCOT_FILE}    (IRCoT layout: question_id, question_text, answers_objects, contexts)
    {SIMPLIFIED_FILE}        (ReAct's question/answer/type triples, used for the IRCoT question types)
    {TRAIN_FILE}                (optional: the official train split, distractor layout)"""
_SOURCE = ("HotpotQA dev distractor set (https://hotpotqa.github.io, CC BY-SA 4.0); "
           "IRCoT's subsampled dev set (github.com/StonyBrookNLP/ircot, processed_data/hotpotqa); "
           "ReAct's data/hotpot_dev_v1_simplified.json (github.com/ysymyth/ReAct)")
_SENTENCE_BREAK = re.compile(r" {2,}")
_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")


@dataclass(frozen=True)
class Paragraph:
    """A titled paragraph (one "Wikipedia page" of the search env), split into sentences."""

    title: str
    sentences: tuple[str, ...]  # stripped; may hold "" where the source has an empty sentence

    @property
    def text(self) -> str:
        return " ".join(s for s in self.sentences if s)


@dataclass(frozen=True)
class Question:
    """One multi-hop question with the paragraphs it was asked over.

    ``hops`` are the supporting titles in the order a reader visits them (bridge: the page the
    question names, then the page it leads to; comparison: the two compared pages), and
    ``bridge_keywords[i]`` is the word to look up on ``hops[i]`` that names ``hops[i + 1]``
    ("" where the page never names it).
    """

    id: str
    question: str
    answer: str
    type: str  # "bridge" or "comparison"
    paragraphs: tuple[Paragraph, ...]
    hops: tuple[str, ...]
    bridge_keywords: tuple[str, ...]
    supporting_facts: tuple[tuple[str, int], ...] = ()  # (title, sentence id); empty if unknown
    level: str = ""


def short_title(title: str) -> str:
    """The title without a trailing parenthetical: ``"Creed (band)"`` -> ``"Creed"``."""
    return _PARENTHETICAL.sub("", title) or title


def question_task_id(question: Question) -> str:
    """The task id of a question: the sha256 of its text, answer and paragraphs (the official
    record without its ``_id``), so the same question over the same pages has one id whether
    an env searches or reads them."""
    return task_id({"family": "HotPotQA", "question": question.question, "answer": question.answer,
                    "context": [[p.title, list(p.sentences)] for p in question.paragraphs]})


def split_sentences(paragraph_text: str) -> tuple[str, ...]:
    """Sentences of an IRCoT ``paragraph_text`` (split on runs of two or more spaces)."""
    return tuple(s.strip() for s in _SENTENCE_BREAK.split(paragraph_text.strip()) if s.strip())


def mentions(paragraph: Paragraph, title: str) -> bool:
    return short_title(title).lower() in paragraph.text.lower()


def order_hops(question: str, answer: str, qtype: str, pages: Sequence[Paragraph]) -> tuple[str, ...]:
    """Order two supporting pages the way a reader visits them.

    Comparison questions keep the file's order. For bridge questions the first page is, in
    this order of preference: the one whose title the question names (and the other's not);
    the one whose text names the other's title (and not vice versa); the one not holding the
    answer when exactly one holds it; else the file's order.
    """
    titles = tuple(p.title for p in pages)
    if qtype != "bridge" or len(pages) != 2:
        return titles
    a, b = pages
    in_question = [short_title(p.title).lower() in question.lower() for p in pages]
    if in_question[0] != in_question[1]:
        return titles if in_question[0] else titles[::-1]
    if mentions(a, b.title) != mentions(b, a.title):
        return titles if mentions(a, b.title) else titles[::-1]
    holds_answer = [answer.lower() in p.text.lower() for p in pages]
    if holds_answer[0] != holds_answer[1]:
        return titles[::-1] if holds_answer[0] else titles
    return titles


def bridge_keywords(qtype: str, hops: Sequence[str], pages: dict[str, Paragraph]) -> tuple[str, ...]:
    """For bridge questions, the keyword on each page that names the next hop (or "")."""
    keywords = []
    for here, nxt in zip(hops, hops[1:]):
        keyword = short_title(nxt)
        keywords.append(keyword if qtype == "bridge" and mentions(pages[here], nxt) else "")
    return tuple(keywords + [""])


def build_question(*, id: str, question: str, answer: str, qtype: str, paragraphs: Sequence[Paragraph],
                   supporting_titles: Sequence[str], supporting_facts: Sequence[tuple[str, int]] = (),
                   level: str = "") -> Question:
    by_title = {p.title: p for p in paragraphs}
    unique = tuple(dict.fromkeys(t for t in supporting_titles if t in by_title))
    hops = order_hops(question, answer, qtype, [by_title[t] for t in unique])
    return Question(id=id, question=question.strip(), answer=answer, type=qtype, paragraphs=tuple(paragraphs),
                    hops=hops, bridge_keywords=bridge_keywords(qtype, hops, by_title),
                    supporting_facts=tuple((str(t), int(i)) for t, i in supporting_facts), level=level)


# -- the corpus an episode searches --------------------------------------------------------
class Corpus:
    """An ordered set of paragraphs with unique titles, searchable by exact title.

    Title lookup ignores case and surrounding/inner extra white space; when several titles
    differ only in case, an exact-case match wins, else the first in corpus order. Retrieval
    indexes are built lazily per retriever factory and kept on the corpus (never pickled:
    a corpus made by a cached loader pickles as a call to that loader, so an unpickled env
    shares its process's copy).
    """

    def __init__(self, paragraphs: Sequence[Paragraph], origin: tuple[Callable[..., "Corpus"], tuple] | None = None):
        unique: dict[str, Paragraph] = {}
        for paragraph in paragraphs:
            unique.setdefault(paragraph.title, paragraph)
        self.paragraphs = tuple(unique.values())
        self.titles = tuple(unique)
        self._exact = {t: i for i, t in enumerate(self.titles)}
        self._folded: dict[str, int] = {}
        for i, title in enumerate(self.titles):
            self._folded.setdefault(_fold(title), i)
        self._origin = origin
        self._indexes: dict[tuple[Any, str], Any] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.paragraphs)

    def find(self, title: str) -> Paragraph | None:
        """The paragraph titled `title` (case-insensitive), or None."""
        title = " ".join(title.split())
        index = self._exact.get(title, self._folded.get(_fold(title)))
        return None if index is None else self.paragraphs[index]

    def index(self, factory: Callable[[Sequence[str]], Any], kind: str) -> Any:
        """The retriever `factory` built over titles (``kind="titles"``) or passages (``"passages"``)."""
        key = (factory, kind)
        with self._lock:
            if key not in self._indexes:
                documents = self.titles if kind == "titles" else [f"{p.title}\n{p.text}" for p in self.paragraphs]
                self._indexes[key] = factory(list(documents))
            return self._indexes[key]

    def __reduce__(self):
        if self._origin is not None:
            return self._origin
        return Corpus, (self.paragraphs,)


def _fold(title: str) -> str:
    return " ".join(title.split()).casefold()


# -- real data -----------------------------------------------------------------------------
def hotpotqa_folder() -> Path:
    """``$LMGYM_DATA/hotpotqa`` checked for the three files (a clear error when missing)."""
    return find_data("hotpotqa", required=[DISTRACTOR_FILE, IRCOT_FILE, SIMPLIFIED_FILE],
                     layout=_LAYOUT, source=_SOURCE)


def source_folder(source: str) -> Path:
    """The folder `source` reads: the three dev files, or for ``"train"`` the train file."""
    if source == "train":
        return find_data("hotpotqa", required=[TRAIN_FILE], layout=_LAYOUT, source=_SOURCE)
    return hotpotqa_folder()


def load_questions(source: str = "both") -> tuple[Question, ...]:
    """The real questions of `source` (one of `SOURCES`), cached per process."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    return _load_questions(source, str(source_folder(source)))


def question_corpus(source: str, index: int) -> Corpus:
    """The distractor-setting corpus of question `index`: its own paragraphs."""
    return _question_corpus(source, str(source_folder(source)), index)


def shared_corpus(source: str) -> Corpus:
    """Every paragraph of every loaded question of `source` (a small Wikipedia)."""
    return _shared_corpus(source, str(source_folder(source)))


@functools.lru_cache(maxsize=None)
def _load_questions(source: str, folder: str) -> tuple[Question, ...]:
    root = Path(folder)
    if source == "train":
        questions = tuple(_read_distractor(root / TRAIN_FILE))
    elif source == "ircot_only":
        shared = {q.id for q in _load_questions("distractor", folder)}
        questions = tuple(q for q in _load_questions("ircot", folder) if q.id not in shared)
    else:
        distractor = _read_distractor(root / DISTRACTOR_FILE) if source in ("distractor", "both") else []
        ircot = _read_ircot(root / IRCOT_FILE, root / SIMPLIFIED_FILE) if source in ("ircot", "both") else []
        seen = {q.id for q in distractor}
        questions = tuple(distractor + [q for q in ircot if q.id not in seen])
    if not questions:
        raise DataNotFoundError(f"{folder} holds no HotPotQA questions for source={source!r}")
    return questions


@functools.lru_cache(maxsize=4096)
def _question_corpus(source: str, folder: str, index: int) -> Corpus:
    question = _load_questions(source, folder)[index]
    return Corpus(question.paragraphs, origin=(_question_corpus, (source, folder, index)))


@functools.lru_cache(maxsize=None)
def _shared_corpus(source: str, folder: str) -> Corpus:
    paragraphs = [p for q in _load_questions(source, folder) for p in q.paragraphs]
    return Corpus(paragraphs, origin=(_shared_corpus, (source, folder)))


def _read_distractor(path: Path) -> list[Question]:
    questions = []
    for row in json.loads(path.read_text(encoding="utf-8")):
        paragraphs = [Paragraph(title, tuple(s.strip() for s in sentences)) for title, sentences in row["context"]]
        facts = [(title, sent) for title, sent in row["supporting_facts"]]
        questions.append(build_question(
            id=row["_id"], question=row["question"], answer=row["answer"], qtype=row["type"],
            paragraphs=paragraphs, supporting_titles=[t for t, _ in facts], supporting_facts=facts,
            level=row.get("level", "")))
    return questions


def _read_ircot(path: Path, simplified_path: Path) -> list[Question]:
    types = {row["question"].strip(): row["type"] for row in json.loads(simplified_path.read_text(encoding="utf-8"))}
    questions = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        answer = row["answers_objects"][0]["spans"][0]
        fallback = "comparison" if answer.lower() in ("yes", "no") else "bridge"  # never needed on the shared file
        qtype = types.get(row["question_text"].strip(), fallback)
        paragraphs = [Paragraph(c["title"], split_sentences(c["paragraph_text"])) for c in row["contexts"]]
        questions.append(build_question(
            id=row["question_id"], question=row["question_text"], answer=answer, qtype=qtype,
            paragraphs=paragraphs, supporting_titles=[c["title"] for c in row["contexts"] if c["is_supporting"]]))
    return questions
