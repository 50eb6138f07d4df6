"""The tools API returns exactly what the step returns, under concurrent calls, with latency.

Uses the generated env (no data needed), medium difficulty, whole-world corpus (about 50
pages), so both hits and misses are plentiful.
"""

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import pytest

import lmgym  # noqa: F401

ENV_ID = "lmgym/HotPotQA-Gen-v0"


def make(**kwargs):
    env = gym.make(ENV_ID, corpus="all", **kwargs)
    env.reset(seed=3)
    return env


def queries_for(env):
    titles = list(env.unwrapped.engine.corpus.titles)
    rng = random.Random(0)
    misspelt = [t[:-1] + "x" for t in rng.sample(titles, 10)]
    return titles[:20] + [t.lower() for t in titles[20:30]] + misspelt + ["", "   ", "founded in 1950"]


def step_observations(queries):
    """What ``step("search[q]")`` returns for each query, from a fresh env each time."""
    env = make()
    expected = {}
    for query in queries:
        env.reset(seed=3)
        expected[query] = env.step(f"search[{query}]")[0]
    return expected


def test_tool_search_equals_step_for_hits_misses_and_junk():
    queries = queries_for(make())
    expected = step_observations(queries)
    env = make()
    for query in queries:
        assert env.unwrapped.tools.search(query) == expected[query]
    assert any(o.startswith("Could not find ") for o in expected.values())
    assert expected[""] == "Invalid action: search[]"


def test_concurrent_tool_calls_equal_sequential_steps_while_the_env_steps():
    queries = queries_for(make())
    expected = step_observations(queries)
    env = make()
    tools = env.unwrapped.tools
    calls = [queries[i % len(queries)] for i in range(400)]
    stop = threading.Event()

    def keep_stepping():  # the main loop keeps acting while tools run
        while not stop.is_set():
            env.step("think[still thinking]")
            env.step("lookup[born]")

    stepper = threading.Thread(target=keep_stepping)
    stepper.start()
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(tools.search, calls))
    finally:
        stop.set()
        stepper.join()
    assert results == [expected[q] for q in calls]


def test_tool_lookup_previews_the_next_step_without_advancing():
    env = make()
    title = env.unwrapped.question.hops[0]
    tools = env.unwrapped.tools
    assert tools.lookup("born") == "No more results."  # no page yet, as the step would say
    env.step(f"search[{title}]")
    keyword = title.split()[-1]
    for _ in range(4):  # walk past the end: each preview equals the step that follows it
        preview = tools.lookup(keyword)
        assert tools.lookup(keyword) == preview  # previewing twice changes nothing
        assert env.step(f"lookup[{keyword}]")[0] == preview
    assert preview == "No more results."
    with ThreadPoolExecutor(max_workers=8) as pool:
        env.step(f"lookup[{title}]")
        previews = list(pool.map(tools.lookup, [title] * 32))
    assert len(set(previews)) == 1 and previews[0] == env.step(f"lookup[{title}]")[0]


def test_dispatch_parses_tool_actions_only():
    env = make()
    tools = env.unwrapped.tools
    title = env.unwrapped.question.hops[0]
    assert tools.dispatch(f"search[{title}]") == tools.search(title)
    assert tools.dispatch("lookup[x]") == "No more results."
    assert tools.dispatch("finish[x]") is None and tools.dispatch("junk") is None


def test_latency_overlaps_across_threads_and_a_prefetched_step_does_not_pay_it():
    latency = 0.25
    env = make(tool_latency_s=latency)
    tools = env.unwrapped.tools
    titles = list(env.unwrapped.engine.corpus.titles)[:6]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(tools.search, titles))
    concurrent = time.perf_counter() - start
    assert latency <= concurrent < 6 * latency / 2  # the six sleeps overlap (generous under load)

    start = time.perf_counter()
    env.step(f"search[{titles[0]}]")  # fetched above: no second wait
    assert time.perf_counter() - start < latency
    start = time.perf_counter()
    env.step(f"search[{titles[0]} again]")  # not fetched: the step pays the latency
    assert time.perf_counter() - start >= latency


def test_negative_latency_is_rejected():
    with pytest.raises(ValueError, match="tool_latency_s"):
        gym.make(ENV_ID, tool_latency_s=-1)


def test_a_tool_call_in_flight_across_a_reset_answers_for_its_own_episode():
    # The latency used to be slept before the env's state was read: a reset in the meantime
    # made the call answer with the new episode's pages.
    env = gym.make(ENV_ID, tool_latency_s=0.4)
    env.reset(seed=3)
    tools = env.unwrapped.tools
    title = env.unwrapped.question.hops[0]
    old_page = env.unwrapped.engine.search(title).observation
    env.step(f"search[{title}]")
    keyword = title.split()[-1]
    old_lookup = env.unwrapped.preview_lookup(keyword)
    with ThreadPoolExecutor(max_workers=2) as pool:
        search, lookup = pool.submit(tools.search, title), pool.submit(tools.lookup, keyword)
        time.sleep(0.1)  # both calls are waiting out their latency now
        env.reset(seed=4)
        new_page = env.unwrapped.engine.search(title).observation
        assert search.result() == old_page and lookup.result() == old_lookup
    assert new_page != old_page  # the new episode's world answers differently


class SlowBM25:
    """BM25 that takes 0.2 s a query: a retriever whose work is worth running in parallel."""

    def __init__(self, documents):
        from lmgym.envs.hotpotqa.retrieval import BM25Retriever

        self.inner = BM25Retriever(documents)

    def search(self, query, k):
        time.sleep(0.2)
        return self.inner.search(query, k)


def test_retrieval_runs_outside_the_lock():
    env = gym.make(ENV_ID, search_mode="passages", retriever=SlowBM25)
    env.reset(seed=3)
    tools = env.unwrapped.tools
    queries = [f"{title} facts" for title in env.unwrapped.engine.corpus.titles[:6]]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(tools.search, queries))
    assert time.perf_counter() - start < 6 * 0.2 / 2  # six retrievals overlap instead of queueing
    assert results == [env.unwrapped.engine.search(q).observation for q in queries]
