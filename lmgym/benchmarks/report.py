"""Summaries, tables and plots of a benchmark's episode rows.

Per env x agent of the rows (`lmgym.benchmarks.rows`): success rate with its Wilson 95% interval
(`lmgym.stats`), mean return, mean score (where the env reports ``info["score"]``: WebShop's
purchase reward, HotPotQA's F1, PromptEdit's reward), mean EM and F1 (where the env reports ``info["em"]``/``info["f1"]``), mean steps,
invalid-action rate (invalid actions / steps), tokens and seconds per episode, and the number
of episodes that raised. Episodes that raised are counted apart: every rate and mean is over
the finished episodes (``episodes``), never a silent loss.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from lmgym.benchmarks.rows import Row
from lmgym.benchmarks.spec import BenchmarkSpec
from lmgym.io import atomic_write_json, atomic_write_text
from lmgym.stats import wilson_interval

LOAD_NOTE = ("Seconds are wall time on the machine that ran the benchmark; on a shared machine "
             "compare them only within one run.")


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(spec: BenchmarkSpec, rows: list[Row]) -> dict[str, Any]:
    """The summary dict written to ``summary.json`` (cells in spec order)."""
    by_cell: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        by_cell[row["env"], row["agent"]].append(row)
    cells = []
    for env in spec.envs:
        for agent in (a for a in spec.agents if spec.plays(env, a)):
            rows_here = sorted(by_cell.get((env.name, agent.name), []), key=lambda r: r["episode"])
            failed = [r for r in rows_here if r.get("error") is not None]
            group = [r for r in rows_here if r.get("error") is None]
            n = len(group)
            wins = sum(bool(r["won"]) for r in group)
            low, high = wilson_interval(wins, n)
            steps = sum(r["steps"] for r in group)
            cells.append({
                "env": env.name, "agent": agent.name, "episodes": n,
                **{key: next((r.get(key) for r in rows_here), None) for key in ("panel", "contaminated")},
                "expected_episodes": spec.episodes_in(env), "wins": wins,
                "success_rate": wins / n if n else None, "success_ci95": [low, high],
                "mean_return": _mean([r["return"] for r in group]),
                **{f"mean_{key}": _mean([r[key] for r in group if r.get(key) is not None])
                   for key in ("score", "em", "f1")},
                "mean_steps": steps / n if n else None,
                "invalid_action_rate": sum(r["invalid_actions"] for r in group) / steps if steps else None,
                # Steps whose completion had no `Action:` line; only LM agents write completions.
                "format_error_rate": (sum(r.get("format_errors", 0) for r in group) / steps
                                      if steps and any(r["completion_tokens"] for r in group) else None),
                "tokens_per_episode": _mean([r["prompt_tokens"] + r["completion_tokens"] for r in group]),
                "prompt_tokens_per_episode": _mean([r["prompt_tokens"] for r in group]),
                "completion_tokens_per_episode": _mean([r["completion_tokens"] for r in group]),
                "seconds_per_episode": _mean([r["seconds"] for r in group]),
                "errors": len(failed),
                "first_error": failed[0]["error"].splitlines()[0] if failed else None,
            })
    return {"spec_id": spec.id, "cells": cells, "notes": list(spec.notes), "load_note": LOAD_NOTE}


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary_markdown(summary: dict[str, Any]) -> str:
    """The summary as a Markdown table; EM and F1 columns appear when some env reports them."""
    qa = any(c.get("mean_em") is not None for c in summary["cells"])
    qa_head, qa_rule = (" EM | F1 |", " ---: | ---: |") if qa else ("", "")
    lines = [f"## Benchmark `{summary['spec_id']}`", "",
             f"| env | agent | episodes | success (95% CI) | mean return | score |{qa_head} mean steps | "
             "invalid-action rate | format-error rate | prompt tokens/episode | completion tokens/episode | s/episode | errors |",
             f"| --- | --- | ---: | --- | ---: | ---: |{qa_rule} ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c in summary["cells"]:
        success = "-" if c["success_rate"] is None else (
            f"{c['success_rate']:.2f} [{c['success_ci95'][0]:.2f}, {c['success_ci95'][1]:.2f}]")
        episodes = f"{c['episodes']}" + ("" if c["episodes"] == c["expected_episodes"] else f"/{c['expected_episodes']}")
        qa_cells = f" {_fmt(c.get('mean_em'), 3)} | {_fmt(c.get('mean_f1'), 3)} |" if qa else ""
        lines.append(f"| {c['env']} | {c['agent']} | {episodes} | {success} | {_fmt(c['mean_return'])} | "
                     f"{_fmt(c['mean_score'], 3)} |{qa_cells} {_fmt(c['mean_steps'], 1)} | "
                     f"{_fmt(c['invalid_action_rate'])} | {_fmt(c.get('format_error_rate'))} | {_fmt(c['prompt_tokens_per_episode'], 1)} | "
                     f"{_fmt(c['completion_tokens_per_episode'], 1)} | {_fmt(c['seconds_per_episode'], 3)} | {c['errors']} |")
    errors = [c for c in summary["cells"] if c["first_error"]]
    if errors:
        lines += ["", "Episodes that raised are not in the rates above (a rerun retries them). Errors (first per cell):"] + [f"- {c['env']} / {c['agent']}: `{c['first_error']}`" for c in errors]
    if summary["notes"]:
        lines += ["", "Left out:"] + [f"- {note}" for note in summary["notes"]]
    lines += ["", f"_{summary['load_note']}_", ""]
    return "\n".join(lines)


def plot_success(summary: dict[str, Any], path: Path) -> None:
    """Grouped bars: success rate by agent within each env, Wilson 95% error bars, and each
    bar labelled wins/n (a zero-success bar is a labelled line on the axis, not a blank)."""
    plt = _pyplot()
    envs = list(dict.fromkeys(c["env"] for c in summary["cells"]))
    agents = list(dict.fromkeys(c["agent"] for c in summary["cells"]))
    width = 0.8 / max(len(agents), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(envs)), 4))
    for i, agent in enumerate(agents):
        cells = {c["env"]: c for c in summary["cells"] if c["agent"] == agent}
        here = [e for e in envs if e in cells]
        xs = [envs.index(e) + i * width for e in here]
        rates = [cells[e]["success_rate"] or 0.0 for e in here]
        lows = [cells[e]["success_ci95"][0] for e in here]
        highs = [cells[e]["success_ci95"][1] for e in here]
        errors = [[r - lo for r, lo in zip(rates, lows)], [hi - r for r, hi in zip(rates, highs)]]
        bars = ax.bar(xs, rates, width, yerr=errors, capsize=3, label=agent)
        ax.hlines(rates, [x - width / 2 for x in xs], [x + width / 2 for x in xs], color=bars[0].get_facecolor(),
                  linewidth=2)  # visible at 0 too
        for x, e, high in zip(xs, here, highs):
            ax.annotate(f"{cells[e]['wins']}/{cells[e]['episodes']}", (x, high), xytext=(0, 2),
                        textcoords="offset points", ha="center", fontsize=6)
    ax.set_xticks([x + width * (len(agents) - 1) / 2 for x in range(len(envs))])
    ax.set_xticklabels([e.removeprefix("lmgym/") for e in envs], rotation=30, ha="right", fontsize=8)
    ax.set(ylabel="success rate (share of episodes won; Wilson 95% CI)", ylim=(0, 1.12),
           title=f"Success by agent: {summary['spec_id']} (bars labelled wins/episodes)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_returns(summary: dict[str, Any], rows: list[Row], path: Path) -> None:
    """Return of each finished episode (markers) and its running mean (line), one panel per env."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    envs = list(dict.fromkeys(c["env"] for c in summary["cells"]))
    agents = list(dict.fromkeys(c["agent"] for c in summary["cells"]))
    columns = min(3, len(envs))
    rows_of_panels = math.ceil(len(envs) / columns)
    fig, axes = plt.subplots(rows_of_panels, columns, figsize=(4.5 * columns, 3 * rows_of_panels), squeeze=False)
    for ax, env in zip(axes.flat, envs):
        for agent in agents:
            group = sorted((r for r in rows if r["env"] == env and r["agent"] == agent and r.get("error") is None),
                           key=lambda r: r["episode"])
            if not group:
                continue
            returns = [r["return"] for r in group]
            running = [sum(returns[: i + 1]) / (i + 1) for i in range(len(returns))]
            line, = ax.plot([r["episode"] for r in group], running, label=f"{agent} (n={len(group)})")
            ax.scatter([r["episode"] for r in group], returns, s=6, alpha=0.4, color=line.get_color())
        ax.set_title(env.removeprefix("lmgym/"), fontsize=9)
        ax.set(xlabel="episode k (seed base_seed + k)", ylabel="return (sum of env rewards)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=7, title="running mean", title_fontsize=7)
    for ax in list(axes.flat)[len(envs):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_report(out: Path, spec: BenchmarkSpec, rows: list[Row], plots: bool = True) -> dict[str, Any]:
    """Write summary.json, summary.md and (unless `plots` is False) success.png, returns.png."""
    summary = summarize(spec, rows)
    atomic_write_json(out / "summary.json", summary)
    atomic_write_text(out / "summary.md", summary_markdown(summary))
    if plots and rows:
        plot_success(summary, out / "success.png")
        plot_returns(summary, rows, out / "returns.png")
    return summary
