"""ReAct's Wikipedia-environment semantics over an offline corpus, as pure functions.

Source of every rule: ysymyth/ReAct ``wikienv.py`` (WikiEnv.step, search_step, get_page_obs,
construct_lookup_list) and ``wrappers.py`` (HotPotQAWrapper). Differences, all deliberate:

* Pages are corpus paragraphs, matched by exact title ignoring case, instead of live
  Wikipedia (which also follows redirects and disambiguation pages).
* A failed search lists the five nearest corpus titles (`nearest_titles`) where Wikipedia
  listed its search results; the string format is ReAct's:
  ``Could not find {entity}. Similar: ['A', 'B', 'C', 'D', 'E'].``
* A page is shown as its first five sentences joined by a space; the corpus is already
  sentence-split, where ReAct split Wikipedia text on ``". "``.
* Observations carry no trailing newline (ReAct's ``"No more results.\\n"`` and
  ``"Episode finished, reward = ...\\n"`` lose theirs).
* Action verbs match case-insensitively (ReAct's agent loop lower-cases the first letter of
  ``Search[...]`` before stepping; here ``SEARCH[x]`` works too).

`search_mode="passages"` replaces the page semantics of ``search`` by Search-R1's retriever
call: the top-k passages, rendered like Search-R1's ``_passages2string`` (PeterGriffinJin/
Search-R1, ``search_r1/llm_agent/generation.py``) as ``Doc {i}(Title: {title}) {text}`` lines.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from lmgym.envs.hotpotqa.corpus import Corpus
from lmgym.envs.hotpotqa.retrieval import RetrieverFactory, nearest_titles

VERBS = ("search", "lookup", "think", "finish")
_ACTION = re.compile(r"^([A-Za-z]+)\[(.*)\]$", re.DOTALL)
PAGE_SENTENCES = 5  # ReAct's get_page_obs shows the first five sentences


def parse_action(action: str) -> tuple[str, str] | None:
    """``"search[Foo]"`` -> ``("search", "Foo")``; None for anything outside the grammar."""
    match = _ACTION.match(action.strip())
    if match is None or match.group(1).lower() not in VERBS:
        return None
    return match.group(1).lower(), match.group(2)


@dataclass(frozen=True)
class SearchOutcome:
    """What a ``search[query]`` shows; a pure function of the corpus and the query."""

    observation: str
    found: bool  # a page (page mode) or at least one passage (passages mode) was shown
    page_title: str | None  # page mode: the page shown; passages mode: the top passage's title
    sentences: tuple[str, ...]  # what a later lookup walks ("the last page")
    shown_titles: tuple[str, ...]  # titles whose text was shown
    suggested_titles: tuple[str, ...]  # the Similar list of a failed search


@dataclass
class SearchState:
    """Everything an episode remembers between steps (plain data, so it pickles)."""

    page_title: str | None = None
    page_sentences: tuple[str, ...] = ()
    lookup_keyword: str | None = None
    lookup_results: tuple[str, ...] = ()
    lookup_count: int = 0
    answer: str | None = None
    visited: set[str] = field(default_factory=set)  # titles whose text was shown
    searched: set[str] = field(default_factory=set)  # lower-cased queries searched
    surfaced: set[str] = field(default_factory=set)  # titles named in any observation


#: Characters of an invalid action echoed back (WebShop's limit): a megabyte of junk is not worth reading.
MAX_ECHO = 80


def invalid(action: str) -> str:
    """ReAct's ``Invalid action: <action>``, the action cut at `MAX_ECHO` characters."""
    return f"Invalid action: {action if len(action) <= MAX_ECHO else action[:MAX_ECHO] + '...'}"


def search_observation(engine: SearchEngine, query: str) -> str:
    """What ``step("search[query]")`` shows for `query` with `engine` (an empty query is invalid)."""
    if not query.strip():
        return invalid(f"search[{query}]")
    return engine.search(query).observation


class SearchEngine:
    """Search and lookup over one corpus; results of `search` are memoised (thread-safe: the
    memo is read and written under a lock, the search itself, pure, runs outside it, so
    concurrent tool calls retrieve in parallel)."""

    def __init__(self, corpus: Corpus, retriever: RetrieverFactory, *, search_mode: str = "page",
                 top_k: int = 3, num_similar: int = 5):
        self.corpus = corpus
        self.retriever = retriever
        self.search_mode = search_mode
        self.top_k = top_k
        self.num_similar = num_similar
        self._memo: dict[str, SearchOutcome] = {}
        self._lock = threading.Lock()

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_lock")
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def is_memoised(self, query: str) -> bool:
        with self._lock:
            return query in self._memo

    def search(self, query: str) -> SearchOutcome:
        with self._lock:
            known = self._memo.get(query)
        if known is not None:
            return known
        outcome = self._search(query)  # two threads may both compute a new query: same result
        with self._lock:
            return self._memo.setdefault(query, outcome)

    def _search(self, query: str) -> SearchOutcome:
        if self.search_mode == "passages":
            return self._search_passages(query)
        page = self.corpus.find(query)
        if page is not None:
            sentences = tuple(s for s in page.sentences if s)
            return SearchOutcome(" ".join(sentences[:PAGE_SENTENCES]), True, page.title, sentences,
                                 (page.title,), ())
        similar = tuple(nearest_titles(query, self.corpus.titles, self.corpus.index(self.retriever, "titles"),
                                       self.num_similar))
        return SearchOutcome(f"Could not find {query}. Similar: {list(similar)}.", False, None, (), (), similar)

    def _search_passages(self, query: str) -> SearchOutcome:
        titles = nearest_passages(query, self.corpus, self.retriever, self.top_k)
        pages = [self.corpus.find(t) for t in titles]
        lines = [f"Doc {i}(Title: {p.title}) {p.text}" for i, p in enumerate(pages, 1)]
        sentences = tuple(s for p in pages for s in p.sentences if s)
        return SearchOutcome("\n".join(lines), bool(pages), titles[0] if titles else None, sentences,
                             tuple(titles), ())


def nearest_passages(query: str, corpus: Corpus, retriever: RetrieverFactory, k: int) -> list[str]:
    """Titles of the `k` passages nearest to `query` (retriever hits, then close titles)."""
    return nearest_titles(query, corpus.titles, corpus.index(retriever, "passages"), k)


def apply_search(state: SearchState, query: str, outcome: SearchOutcome) -> None:
    """Update `state` after ``search[query]`` showed `outcome` (ReAct: a new page resets lookup)."""
    state.searched.add(" ".join(query.split()).lower())
    state.surfaced.update(outcome.shown_titles + outcome.suggested_titles)
    if outcome.found:
        state.visited.update(outcome.shown_titles)
        state.page_title, state.page_sentences = outcome.page_title, outcome.sentences
        state.lookup_keyword, state.lookup_results, state.lookup_count = None, (), 0


@dataclass(frozen=True)
class LookupOutcome:
    observation: str
    results: tuple[str, ...]  # the sentences being walked
    count: int  # how many have been shown after this lookup


def lookup(state: SearchState, keyword: str) -> LookupOutcome:
    """What ``lookup[keyword]`` shows now, without changing `state`.

    ReAct: a keyword different from the last one restarts the walk over the last page's
    sentences containing it (case-insensitive); each call shows ``(Result i / N) sentence``
    and advances; past the end it shows ``No more results.``. Without a page there are no
    results.
    """
    if keyword != state.lookup_keyword:
        results = tuple(s for s in state.page_sentences if keyword.lower() in s.lower())
        count = 0
    else:
        results, count = state.lookup_results, state.lookup_count
    if count >= len(results):
        return LookupOutcome("No more results.", results, count)
    return LookupOutcome(f"(Result {count + 1} / {len(results)}) {results[count]}", results, count + 1)


def apply_lookup(state: SearchState, keyword: str, outcome: LookupOutcome) -> None:
    state.lookup_keyword, state.lookup_results, state.lookup_count = keyword, outcome.results, outcome.count
