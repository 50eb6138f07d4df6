"""Generate solvable ALFWorld households and write them in the official json_2.1.1 layout.

Each game is checked before it is written: its walkthrough and lmgym's ALFWorld expert must win
in the native engine within 50 steps; with ``--official`` the native and the official engine
(TextWorld + Fast Downward, seconds per game) must also agree step by step. The folder it writes
is played by ``lmgym/ALFWorld-v0`` (``LMGYM_DATA=OUT``, split train or valid_unseen) and by
ALFWorld's own ``AlfredTWEnv``: each trial also gets the ``traj_data.json`` fields ALFWorld reads
(task type, and the ``pddl_params`` its hand-coded expert follows).

    python examples/alfworld_generate.py --games 100 --out generated/ --num-distractors 20

Smoke test: --games 3 --out {tmp}/alfgen
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, fields
from pathlib import Path

from lmgym.envs.alfworld.gen.check import engines_check, expert_check
from lmgym.envs.alfworld.gen.generator import TASK_TYPES, GenKnobs, generate_game
from lmgym.io import atomic_write_text


@dataclass
class Args:
    games: int = 10
    """how many games to write"""
    out: str = "alfworld_generated"
    """folder that receives alfworld/json_2.1.1/<split>/<task folder>/<trial>/game.tw-pddl"""
    seed: int = 0
    """game k uses seed seed + k"""
    split: str = "train"
    """rooms to draw from: train (all but the held-out rooms) or unseen"""
    num_distractors: int = 15
    """objects besides the task's"""
    num_receptacles: int = 0
    """receptacles kept per room (0: all of the room's)"""
    closed_prob: float = 1.0
    """probability that an openable receptacle starts closed"""
    task_types: str = ",".join(TASK_TYPES)
    """comma-separated task types"""
    official: bool = False
    """also check every game against the official engine (slow)"""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.type == "bool":
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(flag, type=type(f.default), default=f.default)
    return Args(**vars(parser.parse_args()))


def main() -> None:
    args = parse_args()
    knobs = GenKnobs(task_types=tuple(args.task_types.split(",")), num_distractors=args.num_distractors,
                     num_receptacles=args.num_receptacles or None, closed_prob=args.closed_prob, split=args.split)
    split_folder = Path(args.out) / "alfworld" / "json_2.1.1" / ("valid_unseen" if args.split == "unseen" else "train")

    # --- generate and check ---------------------------------------------------------------
    start = time.perf_counter()
    written = 0
    for seed in range(args.seed, args.seed + args.games):
        household = generate_game(seed, knobs)
        steps = expert_check(household)
        if args.official:
            engines_check(household)
        # The official folder name: <task_type>-<Object>-<MovableRecep>-<Receptacle>-<scene>.
        folder = f"{household.task_type}-{household.target}-None-{household.receptacle or 'DeskLamp'}-{household.scene}"
        path = split_folder / folder / f"trial_lmgym_gen_{seed:06d}" / "game.tw-pddl"
        atomic_write_text(path, json.dumps(household.game))
        atomic_write_text(path.parent / "traj_data.json", json.dumps(household.traj_data()))
        written += 1
        print(f"seed {seed}: {household.task!r} in FloorPlan{household.scene}, expert plan {steps} steps -> {path}")
    seconds = time.perf_counter() - start
    print(f"{written} games written in {seconds:.1f} s ({written / seconds:.1f} games/s, checks included)")


if __name__ == "__main__":
    main()
