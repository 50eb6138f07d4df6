"""Search latency and step throughput of the HotPotQA search envs, against KeyDoor in the same run.

Absolute times on a shared machine move with its load, so every throughput is also given as
a ratio to the KeyDoor-v0 expert measured in the same process just before (a ratio below 1
means slower than KeyDoor); data loading and index building happen before the timing.
Search latencies are per distinct query (the per-episode memo is bypassed by never
repeating a query): a page hit, a miss (``Similar:`` list: BM25 over titles plus close
spellings) and a passages search (top 3 by BM25 over title and text).

Run: ``LMGYM_DATA=../shared/data python studies/hotpotqa.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import gymnasium as gym

import lmgym  # noqa: F401
from lmgym.agents import ExpertAgent, run_episode
from lmgym.data import DataNotFoundError
from lmgym.envs.hotpotqa.engine import SearchEngine


def expert_steps_per_second(env_id: str, episodes: int, **kwargs) -> float:
    env = gym.make(env_id, **kwargs)
    env.reset(seed=0)  # load the data and build the shared indexes outside the timing
    finite = env.unwrapped.num_tasks is not None
    steps, start = 0, time.perf_counter()
    for k in range(episodes):
        steps += run_episode(env, ExpertAgent(), seed=k, options={"task_index": k} if finite else None).length
    return steps / (time.perf_counter() - start)


def search_latency_ms(env_id: str, queries: int, **kwargs) -> dict[str, float]:
    """Median milliseconds per search of each kind, over distinct queries on one corpus."""
    env = gym.make(env_id, **kwargs)
    env.reset(seed=0)
    base = env.unwrapped.engine
    corpus, retriever = base.corpus, base.retriever
    titles = list(corpus.titles)[:queries]
    kinds = {"page_hit": ("page", titles), "page_miss": ("page", [t + " qz" for t in titles]),
             "passages_top3": ("passages", [f"{t} history" for t in titles])}
    result = {"pages": len(corpus)}
    for kind, (mode, batch) in kinds.items():
        engine = SearchEngine(corpus, retriever, search_mode=mode, top_k=3)
        engine.search(batch[0])  # build the lazy indexes outside the timing
        times = []
        for query in batch[1:]:
            start = time.perf_counter()
            engine.search(query)
            times.append((time.perf_counter() - start) * 1e3)
        result[kind] = round(statistics.median(times), 3)
    return result


def run(quick: bool = False) -> dict:
    """Steps/s and search latencies per env (the data-backed ones skipped without LMGYM_DATA);
    quick: 5 episodes and 5 timed queries per kind (seconds), full: 200 and 100."""
    episodes = 5 if quick else 200
    queries = 6 if quick else 101
    reference = expert_steps_per_second("lmgym/KeyDoor-v0", episodes)
    report: dict = {"reference": {"env": "lmgym/KeyDoor-v0 expert", "steps_per_s": round(reference, 1)},
                    "steps_per_s": {}, "ratio_to_reference": {}, "search_latency_ms": {},
                    "note": "absolute figures depend on machine load; compare ratios"}
    runs = [("lmgym/HotPotQA-Gen-v0", {}), ("lmgym/HotPotQA-Gen-Hard-v0", {}),
            ("lmgym/HotPotQA-Gen-v0", {"corpus": "all"}),
            ("lmgym/HotPotQA-v0", {}), ("lmgym/HotPotQA-AllPages-v0", {})]
    for env_id, kwargs in runs:
        name = env_id.split("/")[1] + "".join(f" {k}={v}" for k, v in kwargs.items())
        try:
            rate = expert_steps_per_second(env_id, episodes, **kwargs)
            report["search_latency_ms"][name] = search_latency_ms(env_id, queries, **kwargs)
        except DataNotFoundError:
            report["steps_per_s"][name] = "skipped: no LMGYM_DATA"
            continue
        report["steps_per_s"][name] = round(rate, 1)
        report["ratio_to_reference"][name] = round(rate / reference, 3)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 episodes and 5 queries per kind (seconds)")
    print(json.dumps(run(quick=parser.parse_args().quick), indent=2))


if __name__ == "__main__":
    main()
