"""Multi-turn RL from the tiny SFT agents: GRPO, RLOO and GiGPO at an equal number of env steps.

Per family (ALFWorld-Gen, HotPotQA-Gen, WebShop-Gen), from the family's best tiny SFT model:

1. the starting agent on the family's TEST panel (`lmgym panels`), greedy, at most the family's
   step limit: success with its Wilson 95% interval, and what limited it (format errors: no
   ``Action:`` line; invalid actions; where episodes end: won, ended lost, step limit);
2. `lmgym.training.grpo` on the TRAIN split with each estimator, in chunks of ``--chunk``
   iterations resumed from the run's own checkpoint until it has played ``--env-steps`` env
   steps (so every estimator stops within one iteration of the same count; the count reached
   is reported), the DEV panel played after each chunk: the learning curve, success on dev
   against env steps and against training seconds, and env steps per second of training;
3. each final model on the same TEST panel, and the paired exact McNemar test
   (`lmgym.stats.mcnemar_exact`) against the starting agent on the same episodes;
4. ``--real``: the starting agent and the best RL agent of the family on the real-data panel
   (ALFWorld valid_unseen, HotPotQA dev, WebShop test; needs ``LMGYM_DATA``).

Every evaluation is the `lm` agent (batched, greedy), episode k of a panel the same task for
every model. Played episodes are kept in ``OUT/evals/<label>.jsonl`` and a rerun plays only
the missing ones; a training run resumes from ``OUT/runs/<family>-<estimator>``, so an
interrupted study continues.

    LMGYM_DATA=../shared/data python studies/rl.py --out runs/rl --families hotpotqa alfworld \
        --real --docs     # the tables of docs/results/rl.md (the exact commands are on that page)
    python studies/rl.py --quick                                     # seconds: two HotPotQA-Gen episodes

``--install`` installs each family's RL model chosen on dev (`chosen_on_dev`) as zoo
``react/<family>-rl``, what ``LMAgent(model="tiny-rl")`` plays for that family.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

import lmgym  # noqa: F401  (registers the envs)
from lmgym.agents.lm import LMAgent
from lmgym.agents.runner import run_episodes
from lmgym.benchmarks.panels import PANELS, PanelSpec
from lmgym.io import atomic_write_json
from lmgym.rollouts import Episode, read_episodes, write_episode
from lmgym.stats import mcnemar_exact, wilson_interval

ESTIMATORS = ("grpo", "rloo", "gigpo")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "results" / "rl"


@dataclass(frozen=True)
class Family:
    env_id: str
    start: str  # the best tiny SFT model of the family (zoo name)
    test: str  # panel names (lmgym.benchmarks.panels.PANELS)
    dev: str
    real: str
    max_steps: int  # per episode, evaluation and training alike
    goal: float  # issue 38's goal on the test panel


FAMILIES = {
    # ALFWorld: 30 steps, the limit the 38% of the SFT teacher was measured at (docs/results/distill.md).
    "alfworld": Family("lmgym/ALFWorld-Gen-v0", "react/alfworld-teacher-ar", "alfworld-gen-test-200",
                       "alfworld-gen-dev-100", "alfworld-test-134", 30, 0.60),
    # HotPotQA: the P-ReAct AR model, EM 0.70 on Gen (docs/results/distill.md), the best tiny one.
    "hotpotqa": Family("lmgym/HotPotQA-Gen-v0", "react/hotpotqa-preact-ar", "hotpotqa-gen-test-200",
                       "hotpotqa-gen-dev-100", "hotpotqa-dev-488", 7, 0.85),
    # WebShop: the 1,024-token teacher, the one tiny model that wins held-out goals (docs/results/lm-agents.md).
    "webshop": Family("lmgym/WebShop-Gen-v0", "react/webshop-teacher-1k-ar", "webshop-gen-test-200",
                      "webshop-gen-dev-100", "webshop-test-500", 15, 0.30),
}


# --- evaluation -------------------------------------------------------------------------------


def play(model: str, spec: PanelSpec, n: int, max_steps: int, path: Path, batch: int = 8) -> list[Episode]:
    """Episodes 0..n-1 of panel `spec` by the greedy `lm` agent of `model`, in panel order;
    those already in `path` are read, the rest played and appended."""
    done = {e.seed: e for e in read_episodes(path)} if path.is_file() else {}
    missing = [k for k in range(n) if k not in done]
    if missing:
        envs = [gym.make(spec.env_id, **spec.env_kwargs) for _ in range(min(batch, len(missing)))]
        agent = LMAgent(model=model, batch_size=len(envs), backend_kwargs={"threads": 1})
        options = [{"task_index": k} for k in missing] if spec.sweep else None
        for _, episode in run_episodes(envs, agent, missing, options=options, max_steps=max_steps, env_id=spec.env_id):
            write_episode(path, episode)
            done[episode.seed] = episode
    return [done[k] for k in range(n)]


def outcome(episodes: list[Episode], max_steps: int) -> dict[str, Any]:
    """Success with its interval and what limited the agent, from its episodes."""
    won = [e.won for e in episodes]
    steps = [s for e in episodes for s in e.steps]
    ends = Counter("won" if e.won else "step limit" if e.length >= max_steps or e.steps[-1].truncated else "ended lost"
                   for e in episodes)
    low, high = wilson_interval(sum(won), len(won))
    return {"n": len(won), "won": sum(won), "success": sum(won) / len(won), "ci95": [low, high],
            "outcomes": [int(w) for w in won],
            "mean_steps": len(steps) / len(episodes),
            "format_error_rate": sum(json.loads(s.agent_json).get("format_error", False) for s in steps) / max(len(steps), 1),
            "invalid_action_rate": sum(not s.action_valid for s in steps) / max(len(steps), 1),
            "ends": {k: ends.get(k, 0) for k in ("won", "ended lost", "step limit")},
            "seconds": sum(e.seconds for e in episodes)}


def evaluate(model: str, panel: str, n: int, max_steps: int, path: Path) -> dict[str, Any]:
    spec = PANELS[panel]
    result = outcome(play(model, spec, n, max_steps, path), max_steps)
    return {"model": model, "panel": panel, **result}


def paired(start: dict, other: dict) -> dict[str, Any]:
    """Exact McNemar of `other` against `start` on the same episodes."""
    only_other = sum(o and not s for s, o in zip(start["outcomes"], other["outcomes"]))
    only_start = sum(s and not o for s, o in zip(start["outcomes"], other["outcomes"]))
    return {"only_rl": only_other, "only_start": only_start, "p": mcnemar_exact(only_other, only_start)}


# --- training ---------------------------------------------------------------------------------


def train_run(family: Family, estimator: str, out: Path, *, env_steps: int, chunk: int, dev_n: int,
              settings: dict[str, Any]) -> dict[str, Any]:
    """GRPO-family RL resumed chunk by chunk until `env_steps` env steps, dev played after each
    chunk. Resumable: the iterations done are the checkpoint's, a dev file names its iteration."""
    from lmgym.io import read_jsonl
    from lmgym.models.checkpoints import read_meta
    from lmgym.training.grpo import GRPOConfig, train

    folder = out / "runs" / f"{family.env_id.split('/')[1]}-{estimator}"
    checkpoint = folder / "checkpoint"
    epochs = settings.get("ppo_epochs", 2)

    def meta() -> dict[str, Any]:
        return read_meta(checkpoint) if checkpoint.is_dir() else {}

    def dev(label: str, model: str) -> dict[str, Any]:
        return evaluate(model, family.dev, dev_n, family.max_steps, out / "evals" / f"{label}.jsonl")

    while True:
        iterations = meta().get("step", 0) // epochs
        if iterations:  # the checkpoint is at `iterations`: its dev point (read back when played before)
            dev(f"{folder.name}-dev-{iterations}", str(checkpoint))
        if meta().get("totals", {}).get("time/env_steps", 0.0) >= env_steps:
            break
        train(GRPOConfig(out=str(folder), model=family.start, env=family.env_id, estimator=estimator,
                         steps=(iterations // chunk + 1) * chunk * epochs, save_every=chunk * epochs,
                         max_turns=family.max_steps, quiet=True, **settings))
    # the curve: the start, then every dev point, at the env steps and seconds the metrics logged for it
    # rows up to the checkpoint's step (an interrupted attempt may have logged past it; a resumed one drops them)
    logged = {row["train/step"]: row for row in read_jsonl(folder / "metrics.jsonl") if row["train/step"] <= meta()["step"]}
    start = dev(f"{family.dev}-start", family.start)  # shared by the three estimators (same file)
    curve = [{"iterations": 0, "env_steps": 0.0, "train_seconds": 0.0, "dev_success": start["success"],
              "dev_ci95": start["ci95"]}]
    for i in sorted(int(p.stem.rsplit("-", 1)[1]) for p in (out / "evals").glob(f"{folder.name}-dev-*.jsonl")):
        point = dev(f"{folder.name}-dev-{i}", str(checkpoint))  # read back: played when the checkpoint was at i
        row = logged[i * epochs]
        curve.append({"iterations": i, "env_steps": row["time/env_steps"], "train_seconds": row["time/seconds"],
                      "dev_success": point["success"], "dev_ci95": point["ci95"]})
    totals, seconds = meta()["totals"]["time/env_steps"], meta()["train_seconds"]
    rows = list(logged.values())
    means = {key: sum(r[key] for r in rows) / len(rows) for key in ("train/entropy", "train/clip_fraction")}  # per step
    return {"estimator": estimator, "checkpoint": str(checkpoint), "iterations": iterations, "env_steps": totals,
            "train_seconds": seconds, "env_steps_per_second": totals / seconds if seconds else None,
            "train_success": [r["train/success"] for r in rows if "train/success" in r],
            "turns_per_anchor_state": [r["train/step_groups"] for r in rows if "train/step_groups" in r],
            "entropy": means["train/entropy"], "clip_fraction": means["train/clip_fraction"], "curve": curve}


# --- the study --------------------------------------------------------------------------------


def chosen_on_dev(runs: list[dict]) -> dict | None:
    """The run whose last dev point wins most (the first estimator on a tie): the test panel
    chooses nothing."""
    return max(runs, key=lambda r: r["curve"][-1]["dev_success"], default=None)


def study_family(name: str, out: Path, *, estimators: tuple[str, ...], env_steps: int, chunk: int, test_n: int,
                 dev_n: int, real_n: int | None, settings: dict[str, Any]) -> dict[str, Any]:
    family = FAMILIES[name]
    start = evaluate(family.start, family.test, test_n, family.max_steps, out / "evals" / f"{family.test}-start.jsonl")
    runs = []
    for estimator in estimators:
        run = train_run(family, estimator, out, env_steps=env_steps, chunk=chunk, dev_n=dev_n, settings=settings)
        run["test"] = evaluate(run["checkpoint"], family.test, test_n, family.max_steps,
                               out / "evals" / f"{family.test}-{estimator}.jsonl")
        run["vs_start"] = paired(start, run["test"])
        runs.append(run)
    best = chosen_on_dev(runs)
    result = {"family": name, "env_id": family.env_id, "start_model": family.start, "goal": family.goal,
              "start": start, "runs": runs, "best": best["estimator"] if best else None}
    if real_n is not None:
        real = {"start": evaluate(family.start, family.real, real_n, family.max_steps,
                                  out / "evals" / f"{family.real}-start.jsonl")}
        if best:
            real["best"] = evaluate(best["checkpoint"], family.real, real_n, family.max_steps,
                                    out / "evals" / f"{family.real}-{best['estimator']}.jsonl")
            real["best"]["vs_start"] = paired(real["start"], real["best"])
        result["real"] = real
    return result


def run(quick: bool = False, out: str | None = None, families: tuple[str, ...] = ("hotpotqa",),
        estimators: tuple[str, ...] = ESTIMATORS, env_steps: int | None = None, chunk: int = 5,
        test_n: int | None = None, dev_n: int | None = None, real_n: int | None = None,
        settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The study's results, one entry per family. ``quick``: HotPotQA-Gen, one iteration of one
    task and two episodes per estimator, two test and dev episodes (seconds)."""
    import tempfile

    torch.set_num_threads(1)
    settings = dict(settings or {})
    if quick:
        families, env_steps, chunk, test_n, dev_n, real_n = ("hotpotqa",), 1, 1, 2, 2, None
        settings = {"tasks": 1, "group": 2, "rollout_batch": 2, **settings}
    folder = Path(out or tempfile.mkdtemp(prefix="lmgym-rl-")).resolve()
    started = time.time()
    results = [study_family(name, folder, estimators=estimators, env_steps=env_steps or 2000, chunk=chunk,
                            test_n=test_n or 200, dev_n=dev_n or 50, real_n=real_n, settings=settings)
               for name in families]
    return {"families": results, "settings": settings, "env_steps_budget": env_steps, "chunk": chunk,
            "seconds": time.time() - started, "load_average_1min": os.getloadavg()[0], "quick": quick}


# --- the results page -------------------------------------------------------------------------


def _rate(r: dict) -> str:
    return f"{r['success']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] ({r['won']}/{r['n']})"


def _limits(r: dict) -> str:
    ends = r["ends"]
    return (f"format errors {r['format_error_rate']:.2f}, invalid {r['invalid_action_rate']:.2f} of steps; "
            f"ends won {ends['won']} / lost {ends['ended lost']} / step limit {ends['step limit']}")


def family_tables(f: dict) -> dict[str, Any]:
    """One family's rows of the three tables, its headline part and its command."""
    test_rows, curve_rows, real_rows = [], [], []
    start = f["start"]
    test_rows.append([f["env_id"], f"start ({f['start_model']})", "-", "-", "-", _rate(start), "-", _limits(start)])
    for r in f["runs"]:
        t = r["test"]
        test_rows.append([f["env_id"], r["estimator"], f"{r['env_steps']:,.0f}",
                          f"{r['env_steps_per_second']:.2f}" if r["env_steps_per_second"] else "-",
                          f"{r['entropy']:.3f} / {r['clip_fraction']:.4f}", _rate(t), f"{r['vs_start']['only_rl']} / {r['vs_start']['only_start']}, "
                          f"p = {r['vs_start']['p']:.3f}", _limits(t)])
        for c in r["curve"]:
            curve_rows.append([f["env_id"], r["estimator"], str(c["iterations"]), f"{c['env_steps']:,.0f}",
                               f"{c['train_seconds']:,.0f}",
                               f"{c['dev_success']:.2f} [{c['dev_ci95'][0]:.2f}, {c['dev_ci95'][1]:.2f}]"])
    for label, r in ((k, f["real"][k]) for k in ("start", "best") if k in f.get("real", {})):
        model = f["start_model"] if label == "start" else f"{f['best']}: {Path(r['model']).parent.name}"
        test = r.get("vs_start")
        real_rows.append([r["panel"], label, model, _rate(r),
                          f"{test['only_rl']} / {test['only_start']}, p = {test['p']:.3f}" if test else "-",
                          _limits(r)])
    top = chosen_on_dev(f["runs"])
    headline = (f"{f['env_id'].split('/')[1]}: best {top['estimator']} {top['test']['success']:.2f} vs start "
                f"{start['success']:.2f} (n = {top['test']['n']}, {top['env_steps']:.0f} env steps)") if top else None
    return {"test": test_rows, "curves": curve_rows, "real": real_rows, "headline": headline, "command": f["command"]}


def carried_tables(name: str, previous: dict[str, Any]) -> dict[str, Any]:
    """Family `name`'s rows, headline part and command from an earlier summary.json: a family not
    re-run keeps what was measured (its run folder may be gone with its machine)."""
    family = FAMILIES[name]
    tables = previous["tables"]
    rows = {key: [row for row in tables[key]["rows"] if row[0] in (family.env_id, family.real)]
            for key in ("test", "curves", "real")}
    parts = [part for part in previous["headline"].split("; ") if part.startswith(family.env_id.split("/")[1] + ":")]
    commands = [line for line in tables["test"]["command"].splitlines() if f"--families {name}" in line]
    return {**rows, "headline": parts[0] if parts else None, "command": commands[0] if commands else None}


def docs_summary(results: list[dict], previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """docs/results/rl/summary.json: the tables of docs/results/rl.md (`lmgym.benchmarks.results_docs`),
    the families of `results` measured now, the others' rows carried from `previous`."""
    measured = {f["family"]: family_tables(f) for f in results}
    parts = [measured[name] if name in measured else carried_tables(name, previous) for name in FAMILIES
             if name in measured or previous]
    parts = [part for part in parts if part["test"]]
    rows = {key: [row for part in parts for row in part[key]] for key in ("test", "curves", "real")}
    command = "\n".join(dict.fromkeys(part["command"] for part in parts if part["command"]))
    return {"title": "Multi-turn RL from the tiny SFT agents (GRPO, RLOO, GiGPO)", "order": 95,
            "headline": "; ".join(part["headline"] for part in parts if part["headline"]) or "not run",
            "source": "studies/rl.py (run folder runs/rl, not committed; the episodes are reproducible from the command)",
            "tables": {
                "test": {"columns": ["env", "agent", "env steps", "env steps/s", "entropy / clip fraction",
                                     "test success [95% CI] (won/n)", "RL only / start only, McNemar exact",
                                     "what limited it"],
                         "align": "llrrllll", "rows": rows["test"], "command": command},
                "curves": {"columns": ["env", "estimator", "iterations", "env steps", "train seconds",
                                       "dev success [95% CI]"],
                           "align": "llrrrl", "rows": rows["curves"], "command": command},
                "real": {"columns": ["panel", "agent", "model", "success [95% CI] (won/n)",
                                     "RL only / start only, McNemar exact", "what limited it"],
                         "align": "llllll", "rows": rows["real"], "command": command}}}


def install_best(result: dict) -> str | None:
    """Install the family's RL model chosen on dev (`chosen_on_dev`)
    as ``react/<family>-rl``, its test success and its start's in the manifest's data line."""
    from lmgym.models.checkpoints import TRAIN_PANELS, install_checkpoint, read_meta

    if not result["runs"]:
        return None
    best = chosen_on_dev(result["runs"])
    name = f"react/{result['family']}-rl"
    config = json.loads((Path(best["checkpoint"]) / "lmgym.json").read_text())["grpo_config"]
    flags = ("model", "env", "estimator", "steps", "tasks", "group", "lr", "ppo_epochs", "max_turns", "seed",
             "temperature", "clip_eps", "kl_coef", "rollout_batch")
    command = "lmgym train grpo " + " ".join(f"--{k.replace('_', '-')} {shlex.quote(str(config[k]))}" for k in flags)
    test, start = best["test"], result["start"]
    # the start's own training panels too: the RL run's meta lists only the tasks RL played
    panels = list(read_meta(result["start_model"]).get(TRAIN_PANELS) or []) + list(
        read_meta(best["checkpoint"]).get(TRAIN_PANELS) or [])
    install_checkpoint(best["checkpoint"], name, command=command, train_panels=panels,
                       data=f"{result['env_id']} train split, the policy's own rollouts ({best['env_steps']:.0f} env "
                            f"steps, tasks in train_panels); {test['panel']}: {test['success']:.2f} "
                            f"[{test['ci95'][0]:.2f}, {test['ci95'][1]:.2f}] (n = {test['n']}), its start "
                            f"{start['model']} {start['success']:.2f} (studies/rl.py, docs/results/rl.md)")
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default="runs/rl")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS), choices=list(ESTIMATORS))
    parser.add_argument("--env-steps", type=int, default=2000, help="env steps of training per estimator")
    parser.add_argument("--chunk", type=int, default=5, help="iterations between dev evaluations")
    parser.add_argument("--test-n", type=int, default=200, help="episodes of the test panel")
    parser.add_argument("--dev-n", type=int, default=50, help="episodes of the dev panel per curve point")
    parser.add_argument("--real", type=int, default=None, metavar="N", help="also N episodes of the real-data panel")
    parser.add_argument("--tasks", type=int, default=4, help="tasks per iteration")
    parser.add_argument("--group", type=int, default=8, help="episodes per task")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--ppo-epochs", type=int, default=2)
    parser.add_argument("--rollout-batch", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of the training episodes")
    parser.add_argument("--kl-coef", type=float, default=0.0, help="weight of the k3 KL to the starting model (0: none)")
    parser.add_argument("--docs", action="store_true",
                        help="write docs/results/rl/summary.json: the families in --out, the others' rows kept")
    parser.add_argument("--install", action="store_true", help="install each family's best RL model as react/<family>-rl")
    args = parser.parse_args()
    settings = {"tasks": args.tasks, "group": args.group, "lr": args.lr, "ppo_epochs": args.ppo_epochs,
                "rollout_batch": args.rollout_batch, "temperature": args.temperature, "kl_coef": args.kl_coef}
    report = run(quick=args.quick, out=args.out, families=tuple(args.families), estimators=tuple(args.estimators),
                 env_steps=args.env_steps, chunk=args.chunk, test_n=args.test_n, dev_n=args.dev_n, real_n=args.real,
                 settings=settings)
    out = Path(args.out)
    command = "LMGYM_DATA=../shared/data python studies/rl.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    for result in report["families"]:
        result["command"] = command
        atomic_write_json(out / f"{result['family']}.json", {**report, "families": [result]})
        if args.install:
            print(f"{result['family']}: installed {install_best(result)}")
    if args.docs:
        merged = {json.loads(p.read_text())["families"][0]["family"]: json.loads(p.read_text())["families"][0]
                  for p in sorted(out.glob("*.json"))}
        previous = json.loads((DOCS / "summary.json").read_text()) if (DOCS / "summary.json").exists() else None
        atomic_write_json(DOCS / "summary.json", docs_summary([merged[k] for k in FAMILIES if k in merged], previous))
    print(json.dumps({f["family"]: {"start": f["start"]["success"],
                                    **{r["estimator"]: r["test"]["success"] for r in f["runs"]}}
                      for f in report["families"]}, indent=2))


if __name__ == "__main__":
    main()
