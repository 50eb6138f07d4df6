"""PromptEdit baselines: the static prompt, random edits and a greedy hill-climber, per task.

For each of the four tasks and each baseline, episodes k = 0..E-1 produce a final prompt:

* ``static``: the task's starting prompt, never edited;
* ``random``: `RandomAgent` over the env's admissible library edits for T steps (seed k);
* ``greedy``: `greedy_hill_climb` over the edit library for at most T edits, candidates judged
  on the search seed k.

Every final prompt is then judged on the same fresh evaluation seeds (10_000 + j, none used
during search), and the table reports the mean over episodes and evaluation seeds of the
reward and all metrics, plus the generator calls each baseline spent. Seconds per cycle
(generate + judge for one batch, AoD's "seconds per cycle") are measured on the evaluation
calls. The machine is shared: absolute seconds move with its load; the generate/judge split
is the figure to compare.

The generator is the env's default, the frozen tiny masked-diffusion LM
(`lmgym.components.record_generator.DiffusionRecordGenerator`), unless ``--generator
module:attribute`` names another (called with the JSON ``--generator-kwargs``), e.g. the
rule-based stand-in ``lmgym.envs.promptedit.generators:RuleBasedGenerator``.

Run: ``python studies/promptedit_baselines.py`` (3 episodes, T = 8, batch 32, 4 evaluation
seeds, every task) or ``--quick`` (SuperNI only, 1 episode, T = 2, batch 8, 2 evaluation seeds:
seconds); ``--episodes``, ``--steps``, ``--batch-size`` and ``--tasks`` override. `run(quick)`
returns the table as a dict. Needs LMGYM_DATA (a task without its data is listed as skipped).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from lmgym.agents.base import RandomAgent
from lmgym.agents.runner import run_episode
from lmgym.data import DataNotFoundError
from lmgym.envs.promptedit.env import PromptEditEnv
from lmgym.envs.promptedit.judge import METRIC_KEYS
from lmgym.envs.promptedit.search import greedy_hill_climb
from lmgym.envs.promptedit.tasks import LOADERS
from lmgym.io import atomic_write_json

BASELINES = ("static", "random", "greedy")
COLUMNS = ("reward",) + METRIC_KEYS


def judge_final_prompt(env: PromptEditEnv, prompt: str, seeds: range, seconds: list[dict]) -> dict[str, float]:
    """Mean reward and metrics of `prompt` over evaluation `seeds`; appends each cycle's timing."""
    rows = []
    for seed in seeds:
        verdict, _ = env.evaluate(prompt, seed)
        seconds.append(dict(env.last_seconds))
        rows.append({"reward": verdict.reward, **{k: verdict.metrics[k] for k in METRIC_KEYS}})
    return {k: float(np.mean([r[k] for r in rows])) for k in COLUMNS}


def run_task(task: str, episodes: int, steps: int, batch_size: int, eval_seeds: range,
             generator: str | None = None, generator_kwargs: dict | None = None) -> dict:
    env = PromptEditEnv(task, batch_size=batch_size, generator=generator, generator_kwargs=generator_kwargs)
    seconds: list[dict] = []
    table: dict[str, dict] = {}
    for baseline in BASELINES:
        finals, calls = [], []
        for episode in range(episodes):
            if baseline == "static":
                prompt, spent = env.task.initial_prompt, 0
            elif baseline == "random":
                run_episode(env, RandomAgent(), seed=episode, env_id=f"PromptEdit-{task}", max_steps=steps)
                prompt, spent = env.prompt, steps + 1  # the reset's batch and one per step
            else:
                climb = greedy_hill_climb(env, env.task.initial_prompt, steps, search_seed=episode)
                prompt, spent = climb.prompt, climb.evaluations
            finals.append(judge_final_prompt(env, prompt, eval_seeds, seconds))
            calls.append(spent)
        table[baseline] = {k: float(np.mean([f[k] for f in finals])) for k in COLUMNS}
        table[baseline]["generator_calls"] = float(np.mean(calls))
    return {
        "baselines": table,
        "seconds_per_cycle": {
            "generate": float(np.mean([s["generate"] for s in seconds])),
            "judge": float(np.mean([s["judge"] for s in seconds])),
        },
    }


#: Quick: SuperNI, a task the default generator writes valid records for once the prompt names
#: every field, so the hill-climber has something to find in two edits.
QUICK_TASKS = ("SuperNI",)


def run(quick: bool = False, generator: str | None = None, generator_kwargs: dict | None = None,
        episodes: int | None = None, steps: int | None = None, batch_size: int | None = None,
        tasks_to_run: list[str] | None = None) -> dict:
    default = (1, 2, 8) if quick else (3, 8, 32)
    episodes, steps, batch_size = (given or fallback for given, fallback in zip((episodes, steps, batch_size), default))
    eval_seeds = range(10_000, 10_002 if quick else 10_004)
    start = time.perf_counter()
    tasks, skipped = {}, {}
    for task in tasks_to_run or (QUICK_TASKS if quick else sorted(LOADERS)):
        try:
            tasks[task] = run_task(task, episodes, steps, batch_size, eval_seeds, generator, generator_kwargs)
        except DataNotFoundError as error:  # a fresh clone without LMGYM_DATA still runs the rest
            skipped[task] = str(error).splitlines()[0]
    return {"config": {"episodes": episodes, "steps": steps, "batch_size": batch_size, "eval_seeds": len(eval_seeds),
                       "generator": generator or "DiffusionRecordGenerator (env default)"},
            "tasks": tasks, "skipped": skipped, "wall_s": time.perf_counter() - start}


def markdown(result: dict) -> str:
    lines = []
    for task, data in result["tasks"].items():
        s = data["seconds_per_cycle"]
        lines += [f"**{task}** (seconds per cycle: generate {s['generate']:.3f}, judge {s['judge']:.3f})", "",
                  "| baseline | " + " | ".join(COLUMNS) + " | generator calls |",
                  "| --- |" + " ---: |" * (len(COLUMNS) + 1)]
        for baseline, row in data["baselines"].items():
            cells = [f"{row[k]:.1f}" if k in ("entropy", "perplexity") else f"{row[k]:.3f}" for k in COLUMNS]
            lines.append(f"| {baseline} | " + " | ".join(cells) + f" | {row['generator_calls']:.0f} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="SuperNI, 1 episode, T = 2, batch 8")
    parser.add_argument("--generator", default=None, help="generator entry point 'module:attribute'")
    parser.add_argument("--generator-kwargs", default="{}", help="JSON keyword arguments for the generator")
    parser.add_argument("--episodes", type=int, default=None, help="episodes per baseline (default 3, quick 1)")
    parser.add_argument("--steps", type=int, default=None, help="edits per episode T (default 8, quick 2)")
    parser.add_argument("--batch-size", type=int, default=None, help="records per batch (default 32, quick 8)")
    parser.add_argument("--tasks", nargs="*", default=None, help=f"subset of {sorted(LOADERS)}")
    parser.add_argument("--out", default=None, help="also write the result as JSON here")
    args = parser.parse_args()
    result = run(args.quick, args.generator, json.loads(args.generator_kwargs), args.episodes, args.steps,
                 args.batch_size, args.tasks)
    print(markdown(result))
    for task, reason in result["skipped"].items():
        print(f"skipped {task}: {reason} (set LMGYM_DATA)")
    print(json.dumps(result["config"]), f"wall {result['wall_s']:.1f} s")
    if args.out:
        atomic_write_json(args.out, result)


if __name__ == "__main__":
    main()
