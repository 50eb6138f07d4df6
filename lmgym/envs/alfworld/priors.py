"""Where objects lie in ALFWorld rooms: search priors counted on training games only.

The grounded teacher (`lmgym.envs.alfworld.teacher`) searches for an object type in the
receptacles where that type most often starts. These counts come from the initial states of
games an agent may train on, never from an evaluation split:

* ``"train"``: the official json_2.1.1 train games (``LMGYM_DATA/alfworld``; 711 here), used
  by ``lmgym/ALFWorld-v0`` whatever split it evaluates on;
* ``"gen"``: `lmgym.envs.alfworld.gen.generator.generate_game` on seeds ``0..N-1`` with the
  default knobs in the training rooms, used by the ALFWorld-Gen ids (ALFWorld-Gen draws its
  episode seeds from ``[0, 2**31)``, so evaluation games almost never repeat these).

For every object type O and receptacle type R (display names, as the agent reads them:
``apple``, ``countertop``) that share a game, the table keeps four counts over those games:
``[games where some R holds an O, games with both, R instances holding an O, R instances]``.
The first pair gives the share a reasoning line cites ("an apple starts in a countertop in
38% of train games"), the second the chance that one visit finds one. ``closed`` holds, per
receptacle type, the share of its instances that start closed (one more step to look inside).

Rebuild the committed file (``search_priors.json`` beside this module; about a minute)::

    LMGYM_DATA=../shared/data python -m lmgym.envs.alfworld.priors --gen-games 2000
"""

from __future__ import annotations

import argparse
import functools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping

from lmgym.envs.alfworld.engine import World, compile_world

PRIORS_FILE = Path(__file__).with_name("search_priors.json")
REBUILD_COMMAND = "LMGYM_DATA=../shared/data python -m lmgym.envs.alfworld.priors --gen-games 2000"
TABLES = ("train", "gen")


def display_type(name: str) -> str:
    """``"countertop 2"`` -> ``"countertop"`` (the type word of a display name)."""
    return name.rsplit(" ", 1)[0]


def count_world(world: World, counts: dict, closed: dict) -> None:
    """Add one game's initial placements to `counts` (O -> R -> 4 counts) and `closed`."""
    names = world.names
    instances: dict[str, list[str]] = defaultdict(list)  # receptacle type -> its instances
    for receptacle, _ in world.receptacles_at:
        instances[display_type(names[receptacle])].append(receptacle)
    opened = {r for (r,) in world.initial_facts.get("opened", ())}
    for kind, receptacles in instances.items():
        shut = sum(r in world.openable and r not in opened for r in receptacles)
        closed[kind][0] += shut
        closed[kind][1] += len(receptacles)
    holding: dict[str, set[str]] = defaultdict(set)  # object type -> receptacles holding one
    for obj, receptacle in world.initial_facts.get("inreceptacle", ()):
        holding[display_type(names[obj])].add(receptacle)
    for obj_type, where in holding.items():
        for kind, receptacles in instances.items():
            hits = sum(r in where for r in receptacles)
            row = counts[obj_type][kind]
            row[0] += hits > 0
            row[1] += 1
            row[2] += hits
            row[3] += len(receptacles)


def build_table(worlds: Iterable[World]) -> dict[str, Any]:
    counts: dict = defaultdict(lambda: defaultdict(lambda: [0, 0, 0, 0]))
    closed: dict = defaultdict(lambda: [0, 0])
    games = 0
    for world in worlds:
        count_world(world, counts, closed)
        games += 1
    return {
        "games": games,
        "objects": {o: {r: row for r, row in sorted(rows.items())} for o, rows in sorted(counts.items())},
        "closed": {r: round(shut / total, 4) for r, (shut, total) in sorted(closed.items())},
    }


def train_worlds() -> Iterable[World]:
    from lmgym.envs.alfworld.games import game_paths, load_game

    for path in game_paths("train"):
        data = load_game(path).data
        yield compile_world(data["pddl_problem"], data["grammar"])


def gen_worlds(num_games: int) -> Iterable[World]:
    from lmgym.envs.alfworld.gen.generator import GenKnobs, generate_game

    knobs = GenKnobs()
    for seed in range(num_games):
        game = generate_game(seed, knobs).game
        # Not compile_world: its cache would keep thousands of one-off worlds alive.
        yield World(game["pddl_problem"], game["grammar"])


@functools.lru_cache(maxsize=None)
def load_priors(table: str) -> Mapping[str, Any]:
    """One table of the committed priors (``"train"`` or ``"gen"``)."""
    if table not in TABLES:
        raise ValueError(f"priors table must be one of {TABLES}, got {table!r}")
    with open(PRIORS_FILE, encoding="utf-8") as f:
        return json.load(f)["tables"][table]


def _one_row_per_line(payload: dict[str, Any]) -> str:
    """JSON with one object type (or the ``closed`` table) per line: small, and diffs read well."""
    def compact(value: Any) -> str:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))

    head = {k: v for k, v in payload.items() if k != "tables"}
    lines = ["{"] + [f"  {json.dumps(k)}: {compact(v)}," for k, v in sorted(head.items())] + ['  "tables": {']
    for t, (name, table) in enumerate(sorted(payload["tables"].items())):
        lines += [f"    {json.dumps(name)}: {{", f'      "closed": {compact(table["closed"])},',
                  f'      "games": {table["games"]},', '      "objects": {']
        rows = sorted(table["objects"].items())
        lines += [f"        {json.dumps(o)}: {compact(r)}" + ("," if i < len(rows) - 1 else "") for i, (o, r) in enumerate(rows)]
        lines += ["      }", "    }" + ("," if t < len(payload["tables"]) - 1 else "")]
    return "\n".join(lines + ["  }", "}"]) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gen-games", type=int, default=2000, help="generator seeds 0..N-1 counted for 'gen'")
    parser.add_argument("--out", type=Path, default=PRIORS_FILE)
    args = parser.parse_args(argv)
    from lmgym.io import atomic_write_text

    tables = {"train": build_table(train_worlds()), "gen": build_table(gen_worlds(args.gen_games))}
    payload = {
        "about": "ALFWorld search priors: initial placements counted on training games only "
                 "(lmgym/envs/alfworld/priors.py). objects[O][R] = [games where some R holds an O, "
                 "games with both, R instances holding an O, R instances]; closed[R] = share of R "
                 "instances that start closed.",
        "command": REBUILD_COMMAND,
        "sources": {"train": "json_2.1.1 train split (every game)",
                    "gen": f"ALFWorld-Gen generator, seeds 0..{args.gen_games - 1}, default knobs, training rooms"},
        "tables": tables,
    }
    atomic_write_text(args.out, _one_row_per_line(payload))
    print(f"wrote {args.out}: train {tables['train']['games']} games, gen {tables['gen']['games']} games")


if __name__ == "__main__":
    main()
