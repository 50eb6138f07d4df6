"""Task ids and train/dev/test splits: the rules every lmgym family follows.

A task's id is the sha256 of its canonical content (`task_id`): the JSON text of what defines
the task (a goal and what it is asked over, a generated game's PDDL problem, a question and
its paragraphs), keys sorted, no spaces, UTF-8. It is equal for equal tasks in any process, on
any machine and under any ``PYTHONHASHSEED``, and different for different tasks. Every env
reports it in ``info["task_id"]``.

Splits. Real data keeps its official splits (each family's docstring says which file or index
range is which). A procedural twin draws from an unlimited task space, so its split is a
property of the task itself (`hash_split`): the leading 32 bits of the task id, read as a
fraction of 2**32, put a task in ``test`` below `TEST_SHARE`, in ``dev`` below
``TEST_SHARE + DEV_SHARE`` and in ``train`` otherwise. A twin made with ``split="test"`` draws
tasks from the episode seed's stream as before and keeps drawing on that stream until a task
falls in the split (`draw_in_split`, rejection sampling), so a seed still names one task within
a split, and no task of one split can ever be drawn in another. ``split="all"`` (every id's
default where the id existed before splits) accepts the first draw: the id's old behaviour.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")

#: The canonical split names a panel records (families may accept official aliases too).
SPLITS = ("train", "dev", "test")
#: Every task of the env: the behaviour of an id made without a split.
ALL = "all"
#: Shares of a procedural task space under `hash_split`; train gets the rest (80%).
TEST_SHARE = 0.1
DEV_SHARE = 0.1
#: Draws `draw_in_split` makes before it gives up (a split the task space barely reaches).
MAX_DRAWS = 10_000


def canonical_json(content: Any) -> str:
    """The canonical text of `content`: JSON with sorted keys, no spaces, non-ASCII kept."""
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def task_id(content: Any) -> str:
    """sha256 (64 hex digits) of `content`'s canonical JSON: the id of the task it describes."""
    return hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()


def panel_hash(task_ids: Sequence[str]) -> str:
    """sha256 of the ordered task ids, one per line: the hash of a panel's task contents."""
    return hashlib.sha256("\n".join(task_ids).encode("ascii")).hexdigest()


def hash_split(task_id_: str) -> str:
    """The split of a procedural task: ``test``, ``dev`` or ``train`` by its id's leading 32 bits."""
    fraction = int(task_id_[:8], 16) / 2**32
    if fraction < TEST_SHARE:
        return "test"
    return "dev" if fraction < TEST_SHARE + DEV_SHARE else "train"


def check_split(split: str, accepted: Sequence[str] = (*SPLITS, ALL)) -> str:
    """`split` if it is one of `accepted`, else ValueError naming them."""
    if split not in accepted:
        raise ValueError(f"split must be one of {tuple(accepted)}, got {split!r}")
    return split


def draw_in_split(draw: Callable[[], tuple[T, str]], split: str) -> tuple[T, str]:
    """``draw()`` -> ``(task, task_id)`` repeated until the task's `hash_split` is `split` (the
    first draw when `split` is ``"all"``). Every draw comes from the caller's generator, so the
    accepted task is a function of the seed."""
    for _ in range(MAX_DRAWS):
        task, identity = draw()
        if split == ALL or hash_split(identity) == split:
            return task, identity
    raise ValueError(f"no task of split {split!r} in {MAX_DRAWS} draws: this task space is too small to split "
                     f"(use split='all' or a larger configuration)")
