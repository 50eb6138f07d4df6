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
same more most first one ones name named called""".split())
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


# -- the heuristic reader of real questions ------------------------------------------------------
_YES_NO_START = re.compile(r"^(is|are|was|were|do|does|did|can|could|has|have|had|will|would|should)\b", re.I)
_EARLIER = re.compile(r"\b(first|earlier|earliest|older|oldest|before|longer ago|preceded)\b", re.I)
_LATER = re.compile(r"\b(later|latest|younger|youngest|newer|newest|more recent(ly)?|most recent(ly)?|last)\b", re.I)
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(rf"\b(?:\d{{1,2}} (?:{_MONTHS}) \d{{4}}|(?:{_MONTHS}) \d{{1,2}}, \d{{4}}|(?:{_MONTHS}) \d{{4}}|1\d{{3}}|20\d{{2}})\b")
_YEAR = re.compile(r"(?<![\w-])(1\d{3}|20\d{2})(?![\w-])")  # not inside codes (ISSN 0113-1141)
_NUMBER = re.compile(r"\b\d[\d,]*(?:\.\d+)?(?: (?:million|billion|thousand|hundred))?\b"
                     r"|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|hundred)\b", re.I)
_NAME_WORD = r"[A-Z\u00C0-\u024F][\w'’.\-&]*"
_NAME = re.compile(rf"{_NAME_WORD}(?:\s+(?:(?:of|the|de|von|van|and|du|la|le|da|del|di|y|for|in|on)\s+)*{_NAME_WORD})*")
#: Answer kinds by the question's words, checked in order (the wh-word rules of factoid QA).
_KINDS = (
    ("year", re.compile(r"\b(what|which|in what|in which) year\b", re.I)),
    ("date", re.compile(r"\b(when|what date|which date|what decade|what century)\b", re.I)),
    ("number", re.compile(r"\bhow (many|much|long|old|tall|far|large|big|high)\b|\bwhat (percentage|number|age)\b", re.I)),
    ("place", re.compile(r"\bwhere\b|\b(what|which) (city|country|state|county|town|village|region|province|island|"
                         r"continent|nation|area|location|district|borough|neighborhood|street)\b", re.I)),
    ("name", re.compile(r"\b(who|whom|whose)\b", re.I)),
    ("common", re.compile(r"\bin common\b|\bboth\b", re.I)),
)
_ARTICLE_START = re.compile(r"^(?:The|A|An)\s")


def answer_kind(question: str) -> str:
    """``year``, ``date``, ``number``, ``place``, ``name``, ``common`` or ``other``, by the
    question's wh-words."""
    return next((kind for kind, pattern in _KINDS if pattern.search(question)), "other")


def spans(kind: str, sentence: str) -> list[str]:
    """Candidate answer spans of `kind` in `sentence`, in order."""
    if kind == "year":
        return _YEAR.findall(sentence)
    if kind == "date":
        return _DATE.findall(sentence)
    if kind == "number":  # years are dates, not counts
        return [m.group(0) for m in _NUMBER.finditer(sentence) if not _YEAR.fullmatch(m.group(0))]
    found = [m.group(0).rstrip(".") for m in _NAME.finditer(sentence)]
    found = [f for f in found if f.lower() not in ("the", "a", "an", "it", "he", "she", "they", "in", "on")]
    if kind in ("name", "place"):  # people and places rarely start with an article
        found = [f for f in found if not _ARTICLE_START.match(f)] or found
    return found


class HeuristicReader:
    """Reads real questions with question-type rules and word overlap (module docstring)."""

    def step(self, reading: Reading) -> tuple[str, str]:
        question, read = reading.question, list(reading.pages)
        ranked = self.rank(reading)
        unread = [t for t in ranked if t in reading.unread()]
        kind = self.kind(question)
        if not read:
            if not unread:
                return self.answer(reading)
            return f"search[{unread[0]}]", self._first_reason(question, unread[0])
        if len(read) < 2 and unread:
            if kind == "bridge":
                nxt = self.bridge_target(reading, unread)
                if nxt is not None:
                    title, sentence = nxt
                    return f"search[{title}]", f"{quote(read[0], sentence)} It leads to {title}; I search {title}."
            named = [t for t in unread if title_in(t, question)] or unread
            return f"search[{named[0]}]", f"I have read {read[0]}; the question also names {named[0]}, so I search it."
        return self.answer(reading)

    # -- what to search ------------------------------------------------------------------
    @staticmethod
    def kind(question: str) -> str:
        if _YES_NO_START.match(question.strip()):
            return "yesno"
        if re.search(r"\bor\b", question) and re.match(r"^(which|who|what)\b", question.strip(), re.I):
            return "choice"
        return "bridge"

    @staticmethod
    def rank(reading: Reading) -> list[str]:
        """Searchable titles, best named by the question first (named whole, then word overlap)."""
        q_words = content_words(reading.question)

        def score(title: str) -> float:
            t_words = content_words(short_title(title))
            overlap = len(t_words & q_words) / len(t_words) if t_words else 0.0
            return 2.0 * title_in(title, reading.question) + overlap

        return sorted(reading.titles, key=lambda t: (-score(t), reading.titles.index(t)))

    def _first_reason(self, question: str, title: str) -> str:
        if title_in(title, question):
            return f"The question names {short_title(title)}; I search {title}."
        return f"{title} is the page that best matches the question's words; I search it."

    @staticmethod
    def bridge_target(reading: Reading, unread: list[str]) -> tuple[str, str] | None:
        """(title, sentence): the unread title named in the first page's sentence that shares
        most words with the question (ties: the earlier sentence)."""
        first = list(reading.pages)[0]
        q_words = content_words(reading.question) - content_words(first)
        best, best_score = None, -1.0
        for sentence in reading.pages[first]:
            named = [t for t in unread if title_in(t, sentence)]
            if not named:
                continue
            score = len(content_words(sentence) & q_words)
            if score > best_score:
                best, best_score = (named[0], sentence), score
        return best

    # -- what to answer ------------------------------------------------------------------
    def answer(self, reading: Reading) -> tuple[str, str]:
        if not reading.pages:
            return "finish[unknown]", "I could not read any page, so I cannot answer."
        kind = self.kind(reading.question)
        if kind == "yesno":
            return self._yes_no(reading)
        if kind == "choice" and len(reading.pages) >= 2:
            chosen = self._choose(reading)
            if chosen is not None:
                return chosen
        return self._span(reading)

    def _yes_no(self, reading: Reading) -> tuple[str, str]:
        """Yes when every page read states the question's property words (those not naming
        the pages themselves), else no."""
        pages = list(reading.pages)
        titles = set().union(*(content_words(short_title(t)) for t in pages))
        wanted = content_words(reading.question) - titles
        if not wanted:
            return "finish[yes]", "The question asks nothing the pages could deny, so the answer is yes."
        evidence, missing = [], []
        for title in pages[:2]:
            sentences = reading.pages[title]
            best = max(sentences, key=lambda s: len(content_words(s) & wanted), default="")
            evidence.append(quote(title, best))
            if not content_words(" ".join(sentences)) & wanted:
                missing.append(title)
        if missing:
            return "finish[no]", f"{' '.join(evidence)} {missing[0]} does not say so, so the answer is no."
        return "finish[yes]", f"{' '.join(evidence)} Both say so, so the answer is yes."

    def _choose(self, reading: Reading) -> tuple[str, str] | None:
        """Which of the two pages read: by the earlier/later year where the question asks
        for one, else by the words of the question each page shares."""
        a, b = list(reading.pages)[:2]
        question = reading.question
        earlier, later = _EARLIER.search(question), _LATER.search(question)
        if earlier or later:
            years = {}
            for title in (a, b):
                for sentence in reading.pages[title]:
                    if found := _YEAR.search(sentence):
                        years[title] = (int(found.group(0)), sentence)
                        break
            if len(years) == 2 and years[a][0] != years[b][0]:
                pick = min if earlier else max
                title = pick((a, b), key=lambda t: years[t][0])
                evidence = f"{quote(a, years[a][1])} {quote(b, years[b][1])}"
                word = "earlier" if earlier else "later"
                return (f"finish[{short_title(title)}]",
                        f"{evidence} {short_title(title)} is {word} ({years[title][0]}), so the answer is {short_title(title)}.")
        wanted = content_words(question) - content_words(short_title(a)) - content_words(short_title(b))
        overlap = {t: max(((len(content_words(s) & wanted), s) for s in reading.pages[t]), default=(0, ""))
                   for t in (a, b)}
        if overlap[a][0] == overlap[b][0]:
            return None
        title = a if overlap[a][0] > overlap[b][0] else b
        return (f"finish[{short_title(title)}]",
                f"{quote(title, overlap[title][1])} It fits the question better, so the answer is {short_title(title)}.")

    def _span(self, reading: Reading) -> tuple[str, str]:
        """The best span of the asked kind over the sentences read.

        A sentence scores the question words it shares that do not name a page read (plus two
        on the page read last: bridge answers sit on the page the bridge leads to); a span within it scores
        higher the closer it stands to a question word (the sliding-window rule of early
        reading-comprehension baselines), and most when it directly follows the noun a
        "what/which <noun>" question asks for ("... by German musical project Enigma").
        """
        question = reading.question
        kind = answer_kind(question)
        if kind == "common" and len(reading.pages) >= 2:
            shared = self._shared(reading)
            if shared is not None:
                return shared
            kind = "other"
        titles = list(reading.pages)
        q_words = content_words(question) - set().union(*(content_words(short_title(t)) for t in titles))
        nouns = self._asked_nouns(question)
        best = None  # (key, span, title, sentence)
        for page_rank, title in enumerate(reversed(titles)):
            for position, sentence in enumerate(reading.pages[title]):
                tokens = [_stem(w) for w in words(sentence)]
                anchors = [i for i, t in enumerate(tokens) if t in q_words]
                overlap = len(set(tokens) & q_words) + (2.0 if page_rank == 0 else 0.0)
                for span in spans(kind, sentence):
                    if (span.lower() in question.lower() or span.lower() == short_title(title).lower()
                            or (kind not in ("year", "date", "number") and content_words(span) <= content_words(question))):
                        continue
                    start = self._token_index(sentence, span)
                    distance = min((abs(start - i) for i in anchors), default=20)
                    follows_noun = start > 0 and tokens[start - 1] in nouns
                    key = (overlap + 1.0 / (1 + distance) + 2.0 * follows_noun, -page_rank, -position)
                    if best is None or key > best[0]:
                        best = (key, span, title, sentence)
        if best is None:
            title = titles[-1]
            return (f"finish[{short_title(title)}]",
                    f"No sentence I read gives a {kind}; I answer with the page I read last, {short_title(title)}.")
        _, span, title, sentence = best
        return f"finish[{span}]", f"{quote(title, sentence)} So the answer is {span}."

    @staticmethod
    def _asked_nouns(question: str) -> set[str]:
        """Stems of the (up to three) words after a leading what/which: the asked noun is among them."""
        match = re.match(r"^\W*(?:what|which)\s+(?P<rest>.*)", question.strip(), re.I)
        if match is None:
            return set()
        return {_stem(w) for w in words(match["rest"])[:3] if w not in _STOPWORDS}

    @staticmethod
    def _token_index(sentence: str, span: str) -> int:
        """Index (in `words(sentence)`) of the first word of `span`."""
        at = sentence.find(span)
        return len(words(sentence[:at])) if at >= 0 else 0

    @staticmethod
    def _shared(reading: Reading) -> tuple[str, str] | None:
        """For "what do A and B have in common" questions: the first word of the first page's
        opening sentence that the second page's opening sentence also has (not a question word)."""
        a, b = list(reading.pages)[:2]
        first_a, first_b = reading.pages[a][0], reading.pages[b][0]
        excluded = content_words(reading.question) | content_words(a) | content_words(b)
        b_words = {_stem(w) for w in words(first_b)}
        for word in words(first_a):
            if (word not in _STOPWORDS and len(word) > 2 and word.islower() and _stem(word) in b_words
                    and _stem(word) not in excluded and not word.isdigit()):
                return (f"finish[{word}]",
                        f"{quote(a, first_a)} {quote(b, first_b)} Both say {word}, so the answer is {word}.")
        return None


READERS = {"gen": GenReader, "heuristic": HeuristicReader}
