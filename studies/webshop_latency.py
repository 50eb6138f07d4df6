"""Latency and memory of WebShop at 1k, 10k and 100k products (lmgym/WebShop-Gen-v0).

For each catalogue size a fresh Python process builds the env (generate, process, index,
goals), then measures, in this order:

* ``search``: `SearchIndex.search` on distinct queries (the instructions of goals no episode
  uses, so every call misses the query memo): BM25 scoring over the whole catalogue and the
  top-50 selection, the figure the 10 ms target is about;
* ``reset``: `env.reset(seed=k)`; it includes the expert's look-ahead searches for the new goal;
* ``step:search`` / ``step:click`` / ``step:buy``: every step of expert episodes, by kind
  (``step:buy`` includes the reward, with spaCy loaded beforehand);
* peak resident memory of the whole process (Python, numpy, spaCy and its model, the env).

Timings are medians and 95th percentiles in milliseconds. The machine is shared, so absolute
figures move with its load; each process also times a fixed calibration workload
(`calibration_ms`), and the report gives every latency as a ratio to the 1k catalogue's
measured in the same run, both of which move much less with load.

Run: ``python studies/webshop_latency.py`` (1k, 10k, 100k; a few minutes) or
``--quick`` (300 and 1k products, 2 episodes, 10 searches: seconds). `run(quick)` returns the
same table as a dict.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SIZES_FULL = (1_000, 10_000, 100_000)
SIZES_QUICK = (300, 1_000)
TARGET_SEARCH_MS_AT_100K = 10.0
TARGET_PEAK_MB_AT_100K = 1024.0
REPO = Path(__file__).resolve().parents[1]


def _rss_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _calibration_ms() -> float:
    """A fixed mixed workload (Python loop + numpy sort); median of 5, in ms."""
    data = np.random.default_rng(0).random(200_000)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        sum(i * i for i in range(200_000))
        np.sort(data)
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def _summary(samples_ms: list[float]) -> dict[str, float]:
    values = np.asarray(samples_ms)
    return {"median_ms": float(np.median(values)), "p95_ms": float(np.percentile(values, 95)), "n": len(values)}


def _step_kind(action: str) -> str:
    if action == "click[buy now]":
        return "step:buy"
    return "step:search" if action.startswith("search[") else "step:click"


def measure(num_products: int, episodes: int, searches: int) -> dict:
    """Every figure for one catalogue size, measured in this process."""
    from lmgym.envs.webshop.expert import instruction_query
    from lmgym.envs.webshop.gen import WebShopGenEnv
    from lmgym.envs.webshop.reward import noun_tagger

    baseline_mb = _rss_peak_mb()
    calibration = _calibration_ms()
    start = time.perf_counter()
    env = WebShopGenEnv(num_products=num_products)
    build_s = time.perf_counter() - start

    # Distinct queries from goals the episodes below never draw (episodes use task_index < episodes).
    queries = []
    for goal in reversed(env.goals):
        query = instruction_query(goal["instruction_text"])
        if query not in queries:
            queries.append(query)
        if len(queries) == searches:
            break
    search_ms = []
    for query in queries:
        t = time.perf_counter()
        env.index.search(query)
        search_ms.append((time.perf_counter() - t) * 1e3)

    noun_tagger()  # load spaCy outside the timed steps
    reset_ms: list[float] = []
    steps: dict[str, list[float]] = {"step:search": [], "step:click": [], "step:buy": []}
    rewards = []
    for episode in range(episodes):
        t = time.perf_counter()
        _, info = env.reset(seed=episode, options={"task_index": episode})
        reset_ms.append((time.perf_counter() - t) * 1e3)
        for _ in range(15):
            action = info["expert_action"]
            t = time.perf_counter()
            _, reward, terminated, _, info = env.step(action)
            elapsed = (time.perf_counter() - t) * 1e3
            steps[_step_kind(action)].append(elapsed)
            if terminated:
                rewards.append(reward)
                break
    return {
        "num_products": num_products,
        "num_goals": len(env.goals),
        "build_s": build_s,
        "calibration_ms": calibration,
        "search": _summary(search_ms),
        "reset": _summary(reset_ms),
        **{kind: _summary(samples) for kind, samples in steps.items() if samples},
        "expert_success": float(np.mean([r == 1.0 for r in rewards])) if rewards else None,
        "baseline_rss_mb": baseline_mb,
        "peak_rss_mb": _rss_peak_mb(),
    }


def _measure_in_fresh_process(num_products: int, episodes: int, searches: int) -> dict:
    """`measure` in a child process, so that peak memory is this size's alone."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, __file__, "--child", str(num_products), str(episodes), str(searches)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"benchmark child for {num_products} products failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> dict:
    """The latency table: one row per size, with ratios to the smallest size's row."""
    sizes = SIZES_QUICK if quick else SIZES_FULL
    episodes, searches = (2, 10) if quick else (30, 200)
    rows = [_measure_in_fresh_process(n, episodes, searches) for n in sizes]
    reference = rows[0]
    for row in rows:
        row["ratio_to_reference"] = {
            kind: row[kind]["median_ms"] / reference[kind]["median_ms"]
            for kind in ("search", "reset", "step:search", "step:click", "step:buy") if kind in row and kind in reference
        }
    result = {"sizes": list(sizes), "reference_size": reference["num_products"], "rows": rows,
              "note": "absolute ms depend on the shared machine's load; compare ratios and calibration_ms"}
    largest = rows[-1]
    if largest["num_products"] == 100_000:
        result["targets"] = {
            "search_median_ms_at_100k": largest["search"]["median_ms"],
            "search_under_10ms": largest["search"]["median_ms"] < TARGET_SEARCH_MS_AT_100K,
            "peak_rss_mb_at_100k": largest["peak_rss_mb"],
            "under_1gb": largest["peak_rss_mb"] < TARGET_PEAK_MB_AT_100K,
        }
    return result


def markdown_table(result: dict) -> str:
    kinds = ("search", "reset", "step:search", "step:click", "step:buy")
    lines = [
        "| products | goals | build s | " + " | ".join(f"{k} median / p95 ms" for k in kinds)
        + " | search x ref | peak RSS MB | calibration ms |",
        "|" + " --- |" * (len(kinds) + 6),
    ]
    for row in result["rows"]:
        cells = [f"{row[k]['median_ms']:.2f} / {row[k]['p95_ms']:.2f}" if k in row else "-" for k in kinds]
        lines.append(
            f"| {row['num_products']:,} | {row['num_goals']:,} | {row['build_s']:.1f} | " + " | ".join(cells)
            + f" | {row['ratio_to_reference']['search']:.2f} | {row['peak_rss_mb']:.0f} | {row['calibration_ms']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="300 and 1k products, 2 episodes, 10 searches (seconds)")
    parser.add_argument("--json", type=Path, help="also write the result as JSON here")
    parser.add_argument("--child", nargs=3, type=int, metavar=("PRODUCTS", "EPISODES", "SEARCHES"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(*args.child)))
        return 0
    result = run(quick=args.quick)
    print(markdown_table(result))
    if "targets" in result:
        print(json.dumps(result["targets"]))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
