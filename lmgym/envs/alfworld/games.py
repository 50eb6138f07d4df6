"""ALFWorld games: where the official ``game.tw-pddl`` files are, and reading them once per process.

Layout (the official json_2.1.1 release, as ``alfworld-download`` writes it)::

    $LMGYM_DATA/alfworld/json_2.1.1/{train,valid_seen,valid_unseen}/<task-folder>/<trial>/game.tw-pddl

or ``$ALFWORLD_DATA/json_2.1.1/...``. ``<task-folder>`` is ``<task_type>-<Object>-<MovableRecep>-
<Receptacle>-<scene>``; the task type is its first part (``traj_data.json``, when present,
says the same in ``task_type``).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from lmgym.data import find_data
from lmgym.envs.splits import task_id

#: The six ALFWorld task types, in the official numbering (alfworld TASK_TYPES 1..6).
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
SPLITS = ("train", "valid_seen", "valid_unseen")
#: ALFWorld's own names for the evaluation splits (AlfredTWEnv's ``train_eval``) and lmgym's
#: canonical ones: dev is valid_seen (seen rooms, unseen games), test is valid_unseen (unseen rooms).
SPLIT_ALIASES = {"eval_in_distribution": "valid_seen", "eval_out_of_distribution": "valid_unseen",
                 "dev": "valid_seen", "test": "valid_unseen"}
#: Official split folder -> the canonical split a panel records.
CANONICAL_SPLITS = {"train": "train", "valid_seen": "dev", "valid_unseen": "test"}
LAYOUT = "  alfworld/json_2.1.1/{train,valid_seen,valid_unseen}/<task_type>-<Obj>-<Mrecep>-<Recep>-<scene>/<trial>/game.tw-pddl"
SOURCE = "the ALFWorld release json_2.1.1 (pip install alfworld; alfworld-download), https://github.com/alfworld/alfworld"


@dataclass(frozen=True)
class Game:
    """One playable game: the parsed ``game.tw-pddl`` dict (pddl_domain, grammar, pddl_problem,
    walkthrough, ...), a name and its task type. Procedural games build one in memory."""

    name: str
    task_type: str
    data: Mapping[str, Any]
    path: str | None = None


def data_folder(split: str | None = None) -> Path:
    """The alfworld data folder (raises `DataNotFoundError` naming LMGYM_DATA/ALFWORLD_DATA)."""
    pattern = f"json_2.1.1/{split}/*/*/game.tw-pddl" if split else "json_2.1.1/*/*/*/game.tw-pddl"
    return find_data("alfworld", required=[pattern], layout=LAYOUT, source=SOURCE, env_var="ALFWORLD_DATA")


def game_paths(split: str) -> tuple[str, ...]:
    """Every game file of `split`, sorted (the deterministic order seeds and task_index use).

    The data folder is looked up on every call (a cheap check), so a changed LMGYM_DATA is seen;
    only the listing of a folder is cached."""
    split = SPLIT_ALIASES.get(split, split)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS + tuple(SPLIT_ALIASES)}, got {split!r}")
    return _sorted_games(str(data_folder(split) / "json_2.1.1" / split))


@functools.lru_cache(maxsize=16)
def _sorted_games(folder: str) -> tuple[str, ...]:
    return tuple(sorted(str(p) for p in Path(folder).glob("*/*/game.tw-pddl")))


def game_task_id(data: Mapping[str, Any]) -> str:
    """The task id of a game: the sha256 of its PDDL problem (objects, initial state and goal),
    so two trials with the same goal sentence in different layouts have different ids."""
    return task_id({"family": "ALFWorld", "pddl_problem": data["pddl_problem"]})


def task_type_of(path: str | Path) -> str:
    """The task type of a game file: ``traj_data.json``'s ``task_type``, else the folder name."""
    path = Path(path)
    traj = path.parent / "traj_data.json"
    if traj.exists():
        with open(traj) as f:
            return json.load(f)["task_type"]
    return path.parent.parent.name.split("-", 1)[0]


@functools.lru_cache(maxsize=1024)
def load_game(path: str) -> Game:
    """Read one ``game.tw-pddl`` (cached: envs re-play the same games many times)."""
    file = Path(path)
    with open(file) as f:
        data = json.load(f)
    name = "/".join(file.parts[-4:-1])  # split/task-folder/trial
    return Game(name=name, task_type=task_type_of(file), data=data, path=str(file))
