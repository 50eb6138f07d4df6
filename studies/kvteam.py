"""The KV-communicating team, four ways: single, TextMAS, LatentMAS and DiffMAS on a held-out panel.

Every mode answers the same questions (seeds 0..N-1 of ``--env`` made with ``split=--split``,
the test split by default) with the same backbone (`lmgym.agents.kvteam`). The panel (env, split,
seeds, n, hash of the task ids: `lmgym.benchmarks.panels.panel_of`) is in ``summary.json`` and
heads the table, and every row records its task id. Before any question is asked, each row's
checkpoints (the backbone and its adapter) are checked against the panel with
`lmgym.benchmarks.panels.contamination`: a row whose checkpoint recorded training on one of the
panel's tasks is refused (one-line error); the verdicts (clean, or unknown where a checkpoint does
not record all its training tasks) are in the summary and under the table. Per question:

* EM (and F1 on HotPotQA) of the greedy answer, scored by the env itself (``finish[answer]``);
* answer perplexity: exp of the mean NLL per token of the env's reference completion (its
  worked solution, ending ``Answer: <gold>``) after the Solver's prompt on the mode's trace;
* self-consistency: the majority answer of ``--samples`` Solver samples (temperature 0.7,
  top-p 0.95) over the greedy communication (the same trace, or TextMAS's greedy messages),
  scored by the env (Wang et al. 2023, arXiv:2203.11171);
* seconds end to end (greedy run: every agent, the Solver's decoding included), tokens generated
  by every agent, and the trace memory in bytes (what the Solver reads before its prompt).

``--adapters LABEL=FOLDER`` adds a row per `lmgym.training.kvteam_sft` output, run as it was
trained: an adapter trained over the team's trace is row ``diffmas-LABEL``; one trained with
``--num-agents 1`` (the Solver and its LoRA alone, no team: the same data, steps and budget
without the shared trace) is row ``lora-LABEL``, the control that separates the latent channel
from the SFT. ``--no-trace-control`` adds ``diffmas-LABEL-notrace``: the DiffMAS adapter with its
trace removed at test time, an ablation out of the distribution it was trained on (not the control).

Rows are written one per (row, latent steps, seed) to ``episodes.jsonl`` and skipped when the
run is resumed (a folder holding rows of another panel is refused). ``--ablation`` repeats LatentMAS (and each DiffMAS adapter, trained at its own
number of steps) at other numbers of latent steps. Writes ``summary.json``, ``table.md`` (rows
modes, columns metrics, 95% intervals: Wilson for rates, normal for means; then each DiffMAS row
against every other row on the seeds both answered: questions only one of them got right, and the
exact McNemar p) and ``latent_steps.png`` (EM against latent steps) under ``--out``.

    python studies/kvteam.py --backbone arith-ar --env lmgym/Arith-v0 --split test --episodes 100 \\
        --adapters stop=arith-diffmas-stop flow=arith-diffmas-flow --ablation 0 5 10 20 40 --out runs/kvteam/arith-tiny
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import torch

import lmgym  # noqa: F401  (registers the envs)
from lmgym.agents.kvteam import KVTeam, load_adapters, load_backbone, majority_answer, resolve_installed
from lmgym.agents.runner import agent_seed
from lmgym.benchmarks.panels import EVAL_SPLIT, Panel, panel_of, refuse_contaminated
from lmgym.benchmarks.report import _pyplot
from lmgym.envs.registry import family_of
from lmgym.envs.splits import ALL, SPLITS
from lmgym.errors import InputError
from lmgym.io import append_jsonl, atomic_write_json, atomic_write_text, read_jsonl
from lmgym.models.checkpoints import read_meta
from lmgym.stats import mcnemar_exact, mean_interval, wilson_interval

SC_TEMPERATURE = 0.7
NO_TRACE = "-notrace"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backbone", default="arith-ar", help="'smollm2', an installed name or a model folder")
    parser.add_argument("--env", default="lmgym/Arith-v0")
    parser.add_argument("--split", default=EVAL_SPLIT, choices=[*SPLITS, ALL],
                        help="the env's split the seeds draw from (test: held out from every training split)")
    parser.add_argument("--episodes", type=int, default=100, help="seeds 0..N-1 of the split")
    parser.add_argument("--modes", nargs="*", default=["single", "textmas", "latentmas"],
                        help="training-free modes (DiffMAS rows come from --adapters)")
    parser.add_argument("--adapters", nargs="*", default=[],
                        help="trained rows as LABEL=FOLDER (kvteam_sft output): diffmas-LABEL, or lora-LABEL when trained "
                             "with --num-agents 1 (the Solver LoRA with no team)")
    parser.add_argument("--latent-steps", type=int, default=10)
    parser.add_argument("--ablation", type=int, nargs="*", default=[], help="other latent steps for the latent rows")
    parser.add_argument("--ablation-episodes", type=int, default=None, help="seeds per ablation cell (default --episodes)")
    parser.add_argument("--no-trace-control", action="store_true",
                        help="also run each DiffMAS adapter with its trace removed at test time (an out-of-distribution "
                             "ablation; the SFT control is a --num-agents 1 adapter in --adapters)")
    parser.add_argument("--samples", type=int, default=5, help="self-consistency samples (0: skip)")
    parser.add_argument("--no-perplexity", action="store_true")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--text-tokens", type=int, default=48, help="TextMAS message budget per upstream agent")
    parser.add_argument("--out", default="runs/kvteam/bench")
    return parser


def score(env, seed: int, answer: str) -> dict:
    """The env's own verdict on ``finish[answer]`` for the question of `seed`."""
    env.reset(seed=seed)
    info = env.step(f"finish[{answer}]")[4]
    return {"em": float(info["em"]), "f1": float(info.get("f1", info["em"]))}


@functools.cache
def adapter_model(backbone: str, folder: str):
    """A fresh backbone with the adapters of `folder`, loaded once for all of its cells (peft
    injects the LoRA layers into the model it wraps, so the shared backbone stays plain)."""
    model, tokenizer = load_backbone(backbone)
    return load_adapters(model, folder), tokenizer


def adapter_folder(args: argparse.Namespace, label: str) -> str:
    return resolve_installed(dict(a.split("=", 1) for a in args.adapters)[label])


def adapter_rows(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(row label, mode) per --adapters entry: ``lora`` for a Solver LoRA trained with no team
    (``num_agents`` 1 in its meta), else ``diffmas``."""
    rows = []
    for entry in args.adapters:
        label = entry.split("=", 1)[0]
        alone = read_meta(adapter_folder(args, label))["kvteam"]["num_agents"] == 1
        rows.append((f"lora-{label}", "lora") if alone else (f"diffmas-{label}", "diffmas"))
    return rows


def make_team(args: argparse.Namespace, backbone, label: str, mode: str, latent_steps: int) -> KVTeam:
    agents = 4
    if mode in ("diffmas", "lora"):
        folder = adapter_folder(args, label.split("-", 1)[1].removesuffix(NO_TRACE))
        trained = read_meta(folder)["kvteam"]
        model, tokenizer = adapter_model(args.backbone, folder)
        keep, upstream, agents = trained["keep"], trained["gradient"] == "flow", trained["num_agents"]
    else:
        model, tokenizer = backbone
        keep, upstream = "all", False
    if label.endswith(NO_TRACE):  # the ablation: the DiffMAS adapter with its trace removed
        agents = 1
    return KVTeam(model, tokenizer, "diffmas" if mode == "lora" else mode, num_agents=agents, latent_steps=latent_steps,
                  keep=keep, text_tokens=args.text_tokens, max_new_tokens=args.max_new_tokens, upstream_adapter=upstream)


def run_cell(args: argparse.Namespace, backbone, label: str, mode: str, latent_steps: int, seeds: range,
             full: bool) -> None:
    """Evaluate one (row, latent steps) on `seeds` of the panel's split, appending one line per seed
    not done yet."""
    rows_path, numeric = Path(args.out) / "episodes.jsonl", family_of(args.env) == "Arith"
    done = {(r["label"], r["latent_steps"], r["seed"]) for r in read_jsonl(rows_path)} if rows_path.exists() else set()
    todo = [s for s in seeds if (label, latent_steps, s) not in done]
    if not todo:
        return
    team, env = make_team(args, backbone, label, mode, latent_steps), gym.make(args.env, split=args.split)
    for seed in todo:
        observation, info = env.reset(seed=seed)
        shared = team.prepare(observation)  # the upstream agents run once; every Solver pass below reads it
        greedy = team.solve(observation, seed=agent_seed(seed), numeric=numeric, communication=shared)[0]
        row = {"label": label, "mode": mode, "latent_steps": latent_steps, "seed": seed, "split": args.split,
               "task_id": info["task_id"], "answer": greedy.answer,
               "text": greedy.text, **score(env, seed, greedy.answer), "seconds": greedy.seconds,
               "generated_tokens": greedy.generated_tokens, "trace_bytes": greedy.trace_bytes,
               "trace_tokens": greedy.trace_tokens}
        if full and not args.no_perplexity:
            row["nll"], row["nll_tokens"] = team.reference_nll(observation, info["expert_reasoning"], shared)
        if full and args.samples:
            answers = [o.answer for o in team.solve(observation, temperature=SC_TEMPERATURE, seed=agent_seed(seed),
                                                    samples=args.samples, numeric=numeric, communication=shared)]
            row["sc_answer"] = majority_answer(answers)
            row["sc_em"] = score(env, seed, row["sc_answer"])["em"]
        append_jsonl(rows_path, row)
        print(f"{label} m={latent_steps} seed {seed}: em {row['em']:.0f} ({row['answer']!r}) {row['seconds']:.1f} s",
              file=sys.stderr, flush=True)


def row_checkpoints(args: argparse.Namespace, label: str, mode: str) -> dict[str, str]:
    """The checkpoints a row loads, as agent kwargs for `lmgym.benchmarks.panels.contamination`:
    the backbone's folder (SmolLM2 records no lmgym training) and the adapter's."""
    loads = {"backbone": resolve_installed(args.backbone)}
    if mode in ("diffmas", "lora"):
        loads["adapter"] = adapter_folder(args, label.split("-", 1)[1])
    return loads


def check_panel(args: argparse.Namespace, rows_spec: list[tuple[str, str]], panel: Panel) -> dict[str, bool | None]:
    """Each row's contamination verdict on `panel` (False: clean, None: unknown); InputError, one
    line, when a row's checkpoint trained on one of its tasks, or when ``--out`` holds rows of
    another panel (a task id that is not the panel's at that seed)."""
    where = f"{args.env} (split {args.split}, seeds 0..{panel.n - 1}, panel {panel.hash[:12]})"
    verdicts = {label: refuse_contaminated(row_checkpoints(args, label, mode), panel, label, where,
                                           "evaluate it on the test split, or retrain it on the train split")
                for label, mode in rows_spec}
    rows_path = Path(args.out) / "episodes.jsonl"
    for row in read_jsonl(rows_path) if rows_path.exists() else []:
        if row["seed"] >= panel.n or row.get("task_id") != panel.task_ids[row["seed"]]:
            raise InputError(f"{rows_path} holds rows of another panel (seed {row['seed']} of row {row['label']} "
                             f"is not the task of {where}): write to another --out")
    return verdicts


def summarize(rows: list[dict]) -> list[dict]:
    cells = {}
    for row in rows:
        cells.setdefault((row["label"], row["latent_steps"]), []).append(row)
    result = []
    for (label, steps), group in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        n, wins = len(group), sum(r["em"] for r in group)
        cell = {"label": label, "mode": group[0]["mode"], "latent_steps": steps, "n": n, "em": wins / n,
                "em_ci": wilson_interval(int(wins), n), "f1": mean_interval([r["f1"] for r in group]),
                "seconds": mean_interval([r["seconds"] for r in group]),
                "generated_tokens": mean_interval([r["generated_tokens"] for r in group]),
                "trace_bytes": statistics.fmean(r["trace_bytes"] for r in group)}
        scored = [r for r in group if "nll" in r]
        if scored:  # perplexity over all reference tokens; interval from the per-question mean log-perplexity
            cell["perplexity"] = math.exp(sum(r["nll"] for r in scored) / sum(r["nll_tokens"] for r in scored))
            low, high = mean_interval([r["nll"] / r["nll_tokens"] for r in scored])[1:]
            cell["perplexity_ci"] = (math.exp(low), math.exp(high)) if len(scored) > 1 else (math.nan, math.nan)
        voted = [r for r in group if "sc_em" in r]
        if voted:
            sc = sum(r["sc_em"] for r in voted)
            cell["sc_em"], cell["sc_em_ci"], cell["sc_n"] = sc / len(voted), wilson_interval(int(sc), len(voted)), len(voted)
        result.append(cell)
    return result


def paired(rows: list[dict], latent_steps: int) -> list[dict]:
    """Each DiffMAS row against every other row at the main latent steps (or 0), on the seeds both
    answered: questions only the first got right, only the second, and the exact McNemar p."""
    main = {}
    for r in rows:
        if r["latent_steps"] == (latent_steps if r["mode"] in ("latentmas", "diffmas") and not r["label"].endswith(NO_TRACE) else 0):
            main.setdefault(r["label"], {})[r["seed"]] = r["em"]
    result = []
    for first in sorted(label for label in main if label.startswith("diffmas-") and not label.endswith(NO_TRACE)):
        for second in sorted(label for label in main if label != first):
            seeds = main[first].keys() & main[second].keys()
            only_first = sum(main[first][s] > main[second][s] for s in seeds)
            only_second = sum(main[second][s] > main[first][s] for s in seeds)
            result.append({"first": first, "second": second, "n": len(seeds), "only_first": only_first,
                           "only_second": only_second, "p": mcnemar_exact(only_first, only_second)})
    return result


def ci(value: float, interval, digits: int = 2) -> str:
    return f"{value:.{digits}f} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def table(args: argparse.Namespace, panel: dict, verdicts: dict[str, bool | None], cells: list[dict],
          comparisons: list[dict]) -> str:
    unknown = sorted(label for label, verdict in verdicts.items() if verdict is None)
    lines = [f"`{args.env}`, split {panel['split']}, seeds 0..{panel['n'] - 1} (n = {panel['n']}, panel "
             f"`{panel['hash'][:12]}`), backbone `{args.backbone}`, {args.latent_steps} latent steps; "
             f"self-consistency over {args.samples} samples at temperature {SC_TEMPERATURE}. Training tasks in the "
             "panel: none recorded" + (f"; unknown for {', '.join(unknown)} (a checkpoint does not record all its "
                                       "training tasks)" if unknown else "") + ".", "",
             "| mode | n | EM [95% CI] | F1 | answer perplexity [95% CI] | self-consistency EM [95% CI] "
             "| seconds / question [95% CI] | generated tokens | trace memory (KiB) |",
             "| --- | ---: | --- | ---: | --- | --- | --- | ---: | ---: |"]
    for c in cells:
        if (c["latent_steps"] != args.latent_steps and c["mode"] in ("latentmas", "diffmas")
                and not c["label"].endswith(NO_TRACE)):
            continue
        ppl = ci(c["perplexity"], c["perplexity_ci"]) if "perplexity" in c else "-"
        sc = f"{ci(c['sc_em'], c['sc_em_ci'])} (n={c['sc_n']})" if "sc_em" in c else "-"
        lines.append(f"| {c['label']} | {c['n']} | {ci(c['em'], c['em_ci'])} | {c['f1'][0]:.2f} | {ppl} | {sc} "
                     f"| {ci(c['seconds'][0], c['seconds'][1:])} | {c['generated_tokens'][0]:.1f} "
                     f"| {c['trace_bytes'] / 1024:.1f} |")
    ablation = sorted({c["latent_steps"] for c in cells if c["mode"] in ("latentmas", "diffmas")
                       and not c["label"].endswith(NO_TRACE)})
    if len(ablation) > 1:
        lines += ["", "EM against latent steps per upstream agent:", "",
                  "| mode | " + " | ".join(f"m={m}" for m in ablation) + " |",
                  "| --- |" + " --- |" * len(ablation)]
        for label in sorted({c["label"] for c in cells if c["mode"] in ("latentmas", "diffmas")
                             and not c["label"].endswith(NO_TRACE)}):
            by_steps = {c["latent_steps"]: c for c in cells if c["label"] == label}
            lines.append(f"| {label} | " + " | ".join(
                f"{ci(by_steps[m]['em'], by_steps[m]['em_ci'])} (n={by_steps[m]['n']})" if m in by_steps else "-"
                for m in ablation) + " |")
    if comparisons:
        lines += ["", "Paired by seed (EM): questions only the first row got right, only the second, exact McNemar p:", "",
                  "| DiffMAS row | against | n | only DiffMAS | only the other | p |", "| --- | --- | ---: | ---: | ---: | ---: |"]
        lines += [f"| {c['first']} | {c['second']} | {c['n']} | {c['only_first']} | {c['only_second']} | {c['p']:.2g} |"
                  for c in comparisons]
    return "\n".join(lines) + "\n"


def plot(args: argparse.Namespace, cells: list[dict], path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label in sorted({c["label"] for c in cells}):
        group = sorted((c for c in cells if c["label"] == label), key=lambda c: c["latent_steps"])
        if group[0]["mode"] in ("single", "textmas", "lora") or label.endswith(NO_TRACE):
            c = group[0]
            ax.axhline(c["em"], linestyle="--", linewidth=1, label=f"{label} (n={c['n']})",
                       color={"single": "grey", "textmas": "tab:brown"}.get(label, "black"))
            continue
        xs = [c["latent_steps"] for c in group]
        ems = [c["em"] for c in group]
        errors = [[c["em"] - c["em_ci"][0] for c in group], [c["em_ci"][1] - c["em"] for c in group]]
        ax.errorbar(xs, ems, yerr=errors, marker="o", capsize=3, label=label)
    ax.set(xlabel="latent steps per upstream agent", ylabel="EM (Wilson 95% CI)", ylim=(0, 1),
           title=f"{args.env.split('/')[-1]} ({args.split} split), backbone {args.backbone}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def study(args: argparse.Namespace) -> dict:
    """Every row of `args` on its seeds (resuming what ``--out`` holds), then the summary, table
    and plot; returns the summary."""
    torch.set_num_threads(1)
    out, started = Path(args.out), time.time()
    rows_spec = [(mode, mode) for mode in args.modes] + adapter_rows(args)
    panel = panel_of(args.env, {"split": args.split}, range(max(args.episodes, args.ablation_episodes or 0)))
    verdicts = check_panel(args, rows_spec, panel)  # before any question: a contaminated row is refused
    out.mkdir(parents=True, exist_ok=True)
    backbone = load_backbone(args.backbone)  # it resolves installed names
    for label, mode in rows_spec:
        steps = args.latent_steps if mode in ("latentmas", "diffmas") else 0
        run_cell(args, backbone, label, mode, steps, range(args.episodes), full=True)
        if mode == "diffmas" and args.no_trace_control:
            run_cell(args, backbone, label + NO_TRACE, mode, 0, range(args.episodes), full=True)
    for m in args.ablation:
        for label, mode in rows_spec:
            if mode in ("latentmas", "diffmas") and m != args.latent_steps:
                run_cell(args, backbone, label, mode, m, range(args.ablation_episodes or args.episodes), full=False)
    rows = list(read_jsonl(out / "episodes.jsonl"))
    cells, comparisons = summarize(rows), paired(rows, args.latent_steps)
    markdown = table(args, panel.record(), verdicts, cells, comparisons)
    summary = {"args": vars(args), "panel": panel.record(), "contamination": verdicts, "cells": cells,
               "paired": comparisons, "wall_s_this_run": time.time() - started}
    atomic_write_json(out / "summary.json", summary)
    atomic_write_text(out / "table.md", markdown)
    if args.ablation:
        plot(args, cells, out / "latent_steps.png")
    return {**summary, "table": markdown}


#: Quick: the installed tiny backbone, one DiffMAS adapter and the control (the Solver's LoRA with no
#: team) on 2 seeds, 2 latent steps, short answers.
QUICK = ["--episodes", "2", "--latent-steps", "2", "--samples", "0", "--no-perplexity", "--max-new-tokens", "24",
         "--text-tokens", "8", "--adapters", "stop=arith-diffmas-stop", "solo=arith-solver-lora"]


def run(quick: bool = False, argv: list[str] | None = None) -> dict:
    """The study with the defaults (`argv` overrides them); quick: `QUICK` into a fresh temporary folder."""
    options = [*QUICK, "--out", tempfile.mkdtemp(prefix="lmgym-kvteam-")] if quick else []
    return study(build_parser().parse_args(options + list(argv or [])))


def main() -> None:
    try:
        print(study(build_parser().parse_args())["table"])
    except InputError as error:
        raise SystemExit(f"kvteam: error: {error}") from None


if __name__ == "__main__":
    main()
