"""Benchmark of the procedural ALFWorld generator: speed, solvability, engine agreement, knobs.

Quick mode (``run(quick=True)``, seconds): generation speed (games/s), the expert check of 10
games in the native engine, and the native/official agreement on 1 small-room game, with the
two engines' seconds per game side by side.

Full mode: 1,000 games (seeds 0..999, default knobs) through the expert check, the same games
through the both-engine check (official engine, TextWorld + Fast Downward: seconds per game,
so it appends one JSON line per game to ``--official-log`` and resumes from it), and a table of
expert and random success by difficulty knob.

    python studies/alfworld_gen.py --quick
    python studies/alfworld_gen.py --games 1000 --official-games 1000 --official-log runs/alfgen_official.jsonl
    python studies/alfworld_gen.py --quick --handcoded-games 6   # + ALFWorld's own hand-coded expert
    python studies/alfworld_gen.py --knobs-only                   # only the knob table (native engine)

Absolute seconds depend on the machine's load; ratios printed side by side come from the same run.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from lmgym.agents.runner import agent_seed
from lmgym.envs.alfworld.engine import NativeEngine
from lmgym.envs.alfworld.gen.check import GameCheckError, engines_check, expert_check
from lmgym.envs.alfworld.gen.generator import TASK_TYPES, GenKnobs, generate_game
from lmgym.io import append_jsonl, read_jsonl

RANDOM_STEPS = 50  # ALFWorld-v0's step limit
SMALL_ROOMS = GenKnobs(num_distractors=6, num_receptacles=7, closed_prob=0.5)


def generation_speed(seeds: range, knobs: GenKnobs = GenKnobs()) -> tuple[list, dict]:
    """Games generated per second, beside the reference of starting them: native engine resets
    per second on the same games (parse, name, first observation), measured in the same run."""
    start = time.perf_counter()
    games = [generate_game(seed, knobs) for seed in seeds]
    generate = time.perf_counter() - start
    start = time.perf_counter()
    for household in games:
        NativeEngine(household.game).reset()
    reset = time.perf_counter() - start
    return games, {"games_per_second": len(games) / generate, "native_resets_per_second": len(games) / reset,
                   "generate_over_reset_seconds": generate / reset}


def random_success(household, seed: int, steps: int = RANDOM_STEPS) -> bool:
    """A uniform random agent over the admissible commands, in the native engine; its stream is
    `agent_seed(seed)`, not the generator's own seed (which drew the game)."""
    rng = np.random.default_rng(agent_seed(seed))
    engine = NativeEngine(household.game)
    step = engine.reset()
    for _ in range(steps):
        step = engine.step(step.admissible_commands[int(rng.integers(len(step.admissible_commands)))])
        if step.won:
            return True
    return False


def expert_batch(games) -> dict:
    failures, lengths = [], []
    for household in games:
        try:
            lengths.append(expert_check(household))
        except GameCheckError as error:
            failures.append(str(error))
    return {"games": len(games), "expert_wins": len(lengths), "failures": failures[:5],
            "mean_walkthrough": float(np.mean(lengths)) if lengths else 0.0,
            "max_walkthrough": int(max(lengths)) if lengths else 0}


def engines_batch(games, log: str | None = None, random_walks: int = 0) -> dict:
    """Both-engine check of `games`; with `log`, one JSON line per game and resume from it."""
    done = {}
    if log and Path(log).exists():
        done = {row["seed"]: row for row in read_jsonl(log)}
    for household in games:
        if household.seed in done:
            continue
        row = {"seed": household.seed, "task_type": household.task_type, "scene": household.scene}
        try:
            report = engines_check(household, random_walks=random_walks)
            row.update(agree=True, steps=report.steps, native_s=report.native_seconds,
                       official_s=report.official_seconds)
        except GameCheckError as error:
            row.update(agree=False, error=str(error)[:2000])
        done[household.seed] = row
        if log:
            append_jsonl(log, row)
    rows = [done[h.seed] for h in games]
    ok = [r for r in rows if r["agree"]]
    native = sum(r["native_s"] for r in ok)
    official = sum(r["official_s"] for r in ok)
    return {"games": len(rows), "agree": len(ok), "compared_steps": sum(r["steps"] for r in ok),
            "native_s_per_game": native / max(len(ok), 1), "official_s_per_game": official / max(len(ok), 1),
            "official_over_native": official / native if native else None,
            "failures": [r["error"] for r in rows if not r["agree"]][:5]}


def handcoded_expert_batch(games, folder: str, steps: int = RANDOM_STEPS) -> dict:
    """ALFWorld's own hand-coded expert (``AlfredExpert(expert_type="handcoded")`` over the
    official engine, as alfworld's DAgger training builds it) on `games`, written with their
    ``traj_data.json`` under `folder`. It explores and remembers what it saw; seconds per game."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredInfos
    from textworld.envs.pddl import PddlEnv

    wins = []
    for household in games:
        trial = Path(folder) / f"seed{household.seed}"
        trial.mkdir(parents=True, exist_ok=True)
        (trial / "game.tw-pddl").write_text(json.dumps(household.game))
        (trial / "traj_data.json").write_text(json.dumps(household.traj_data()))
        infos = textworld.EnvInfos(won=True, admissible_commands=True, facts=True, extras=["gamefile", "expert_plan"])
        env = AlfredExpert(AlfredInfos(AlfredDemangler()(PddlEnv(infos))), expert_type="handcoded")
        env.load(str(trial / "game.tw-pddl"))
        state = env.reset()
        for _ in range(steps):
            if state["won"]:
                break
            state, _, _ = env.step(state["extra.expert_plan"][0])
        wins.append({"seed": household.seed, "task_type": household.task_type, "won": bool(state["won"])})
    return {"games": len(wins), "wins": sum(w["won"] for w in wins), "episodes": wins}


KNOB_ROWS = [
    ("default (15 distractors, all receptacles, all closed)", {}),
    ("0 distractors", {"num_distractors": 0}),
    ("40 distractors", {"num_distractors": 40}),
    ("6 receptacles", {"num_receptacles": 6}),
    ("12 receptacles", {"num_receptacles": 12}),
    ("openables start open", {"closed_prob": 0.0}),
    ("unseen rooms", {"split": "unseen"}),
] + [(task_type, {"task_types": (task_type,)}) for task_type in TASK_TYPES]


def knob_table(games_per_row: int) -> list[dict]:
    rows = []
    for label, change in KNOB_ROWS:
        knobs = replace(GenKnobs(), **change)
        games = [generate_game(seed, knobs) for seed in range(games_per_row)]
        expert = expert_batch(games)
        random_wins = sum(random_success(h, seed=h.seed) for h in games)
        rows.append({"knobs": label, "games": len(games), "expert_success": expert["expert_wins"] / len(games),
                     "random_success": random_wins / len(games), "mean_walkthrough": expert["mean_walkthrough"]})
    return rows


def knob_markdown(rows: list[dict]) -> str:
    lines = ["| knobs | games | expert success | random success (50 steps) | mean expert steps |",
             "| --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r['knobs']} | {r['games']} | {r['expert_success']:.2f} | {r['random_success']:.2f} | "
              f"{r['mean_walkthrough']:.1f} |" for r in rows]
    return "\n".join(lines)


def run(quick: bool = False, *, games: int = 1000, official_games: int = 1000, official_log: str | None = None,
        knob_games: int = 100, handcoded_games: int = 0) -> dict:
    """Quick: 10 games generated and expert-checked, 1 small-room game through both engines
    (walkthrough and a random walk). Full: see the module doc."""
    count = 10 if quick else games
    generated, speed = generation_speed(range(count))
    result = {
        "mode": "quick" if quick else "full",
        "knobs": asdict(GenKnobs()),
        "generation": speed,
        "expert": expert_batch(generated),
    }
    if quick:
        # A small room keeps the official engine (seconds per game) to seconds.
        small = [generate_game(0, SMALL_ROOMS)]
        result["engines_small_rooms"] = engines_batch(small, random_walks=1)
    else:
        result["engines"] = engines_batch(generated[:official_games], log=official_log)
    if not quick:
        result["knob_table"] = knob_table(knob_games)
    if handcoded_games:
        # One small-room game per task type in turn (ALFWorld's expert costs seconds per step).
        sample = [generate_game(500 + k, replace(SMALL_ROOMS, task_types=(TASK_TYPES[k % len(TASK_TYPES)],)))
                  for k in range(handcoded_games)]
        with tempfile.TemporaryDirectory() as folder:
            result["alfworld_handcoded_expert_small_rooms"] = handcoded_expert_batch(sample, folder)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the check in seconds")
    parser.add_argument("--games", type=int, default=1000)
    parser.add_argument("--official-games", type=int, default=1000, help="of those, how many go through both engines")
    parser.add_argument("--official-log", default="runs/alfworld_gen_official.jsonl")
    parser.add_argument("--knob-games", type=int, default=100, help="games per row of the knob table")
    parser.add_argument("--handcoded-games", type=int, default=0,
                        help="small-room games played by ALFWorld's own hand-coded expert (official engine)")
    parser.add_argument("--out", default=None, help="write the result as JSON here")
    parser.add_argument("--knobs-only", action="store_true", help="only the expert/random table by knob")
    parser.add_argument("--memoized-official", action="store_true",
                        help="run the official engine with memoize_official_engine() (pure parsers cached; "
                             "tests/alfworld/test_differential.py checks it is transcript-identical): ~10x faster")
    args = parser.parse_args()
    if args.knobs_only:
        print(knob_markdown(knob_table(args.knob_games)))
        return
    if args.memoized_official:
        from lmgym.envs.alfworld.textworld_engine import memoize_official_engine

        memoize_official_engine()
    result = run(args.quick, games=args.games, official_games=args.official_games,
                 official_log=args.official_log, knob_games=args.knob_games, handcoded_games=args.handcoded_games)
    table = result.pop("knob_table", None)
    print(json.dumps(result, indent=2))
    if table:
        print(knob_markdown(table))
        result["knob_table"] = table
    if args.out:
        from lmgym.io import atomic_write_json

        atomic_write_json(args.out, result)


if __name__ == "__main__":
    main()
