"""The env's search and lookup as tools an agent can call outside ``step()``.

A search agent that decodes its tool call first (DLLM-Searcher's P-ReAct) dispatches the call,
keeps decoding its reasoning while the tool runs, then commits the action with ``env.step``.
`SearchTools` serves that pattern:

* ``tools.search(query)`` returns exactly the observation ``step("search[query]")`` returns:
  a search is a pure function of the corpus and the query, computed once per episode and
  memoised, so the committing step reuses it (and does not pay the latency again).
* ``tools.lookup(keyword)`` returns exactly what ``step("lookup[keyword]")`` would return from
  the env's state at the moment of the call, without advancing the lookup cursor (the step
  does that); a step taken in between changes what the next call returns, as it would change
  what the step returns.
* Calls are thread-safe and belong to the episode they were made in: when called, a tool takes
  that episode's search engine (a search) or its lookup answer (a lookup) under the env's lock;
  then the simulated latency (``tool_latency_s``) is slept, and the search itself runs, outside
  the lock (it is pure). Concurrent calls overlap their waits, a step never waits for a tool
  call's sleep, and a call in flight across a reset returns the old episode's result, never a
  page of the new one.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from lmgym.envs.hotpotqa.engine import parse_action, search_observation

if TYPE_CHECKING:
    from lmgym.envs.hotpotqa.env import SearchQAEnv


class SearchTools:
    """``search(query)`` and ``lookup(keyword)`` of one env, callable from any thread."""

    def __init__(self, env: "SearchQAEnv", latency_s: float = 0.0):
        if latency_s < 0:
            raise ValueError(f"tool_latency_s must be >= 0, got {latency_s}")
        self._env = env
        self.latency_s = float(latency_s)

    def search(self, query: str) -> str:
        """The observation of ``search[query]`` in the episode of the call (page, ``Could not
        find ...`` or passages)."""
        engine = self._env.current_engine()
        self._wait()
        return search_observation(engine, query)

    def lookup(self, keyword: str) -> str:
        """The observation ``lookup[keyword]`` would give at the call (the cursor is not advanced)."""
        observation = self._env.preview_lookup(keyword)
        self._wait()
        return observation

    def dispatch(self, action: str) -> str | None:
        """Run a ``search[...]``/``lookup[...]`` action text as a tool call; None for other text."""
        parsed = parse_action(action)
        if parsed is None or parsed[0] not in ("search", "lookup"):
            return None
        verb, argument = parsed
        return self.search(argument) if verb == "search" else self.lookup(argument)

    def _wait(self) -> None:
        if self.latency_s:
            time.sleep(self.latency_s)
