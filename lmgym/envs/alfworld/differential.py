"""Differential checks: play the native and the official engine side by side, step by step.

Used by the tests (tests/alfworld/test_differential.py), by the benchmark and by the exhaustive
run (``python -m lmgym.envs.alfworld.differential --walks 5``). Both engines receive the same
commands; at every step the feedback text, the sorted admissible commands, ``won`` and the
done flag (the official engine's own ``done``; the native engine's is ``won``) must be equal.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from lmgym.envs.alfworld.engine import EngineStep, NativeEngine

#: Commands no game admits: typos, other grammars, empty text, case changes of real commands.
INVALID_COMMANDS = ("", "go to the moon", "take", "put it down", "north", "open", "look around",
                    "examine", "move to", "use", "  ", "inventory please")


@dataclass
class Mismatch:
    step: int
    command: str
    field: str
    native: Any
    official: Any


@dataclass
class WalkResult:
    commands: list[str] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    native_seconds: float = 0.0
    official_seconds: float = 0.0


def compare(step: int, command: str, native: EngineStep, official: EngineStep) -> list[Mismatch]:
    """Every field in which the two engines' reports of one step differ."""
    pairs = (
        ("feedback", native.feedback, official.feedback),
        ("admissible_commands", sorted(native.admissible_commands), sorted(official.admissible_commands)),
        ("won", native.won, official.won),
        ("done", native.done, official.done),
    )
    return [Mismatch(step, command, name, a, b) for name, a, b in pairs if a != b]


def random_commands(rng: np.random.Generator, admissible: list[str], invalid_rate: float) -> str:
    """One command of a random walk: an invalid one with probability `invalid_rate`, else an
    admissible one; sometimes an admissible command with changed case or extra spaces."""
    roll = rng.random()
    if roll < invalid_rate:
        kind = int(rng.integers(3))
        if kind == 0:
            return str(INVALID_COMMANDS[int(rng.integers(len(INVALID_COMMANDS)))])
        command = admissible[int(rng.integers(len(admissible)))]
        return command.upper() if kind == 1 else command.replace(" ", "  ", 1)
    command = admissible[int(rng.integers(len(admissible)))]
    return f"  {command} " if roll > 0.97 else command


def walk(game_data: Mapping[str, Any], commands: list[str] | None = None, *, seed: int = 0,
         max_steps: int = 50, invalid_rate: float = 0.15, official=None) -> WalkResult:
    """Play `commands` (or a seeded random walk) in both engines and collect every mismatch.

    `official` is a ready official engine for this game (building one costs about a second),
    otherwise one is built.
    """
    from lmgym.envs.alfworld.textworld_engine import TextWorldEngine

    result = WalkResult()
    start = time.perf_counter()
    native = NativeEngine(game_data)
    native_step = native.reset()
    result.native_seconds += time.perf_counter() - start
    start = time.perf_counter()
    official = official or TextWorldEngine(game_data)
    official_step = official.reset()
    result.official_seconds += time.perf_counter() - start
    result.mismatches += compare(0, "<reset>", native_step, official_step)
    rng = np.random.default_rng(seed)
    steps = commands if commands is not None else [None] * max_steps
    for index, command in enumerate(steps, start=1):
        if native_step.done or official_step.done:  # the episode is over in one of them
            break
        if command is None:
            command = random_commands(rng, native_step.admissible_commands, invalid_rate)
        result.commands.append(command)
        start = time.perf_counter()
        native_step = native.step(command)
        result.native_seconds += time.perf_counter() - start
        start = time.perf_counter()
        official_step = official.step(command)
        result.official_seconds += time.perf_counter() - start
        found = compare(index, command, native_step, official_step)
        result.mismatches += found
        if found:
            break  # later steps would only repeat the first divergence
    return result


def main() -> None:
    from lmgym.envs.alfworld.games import game_paths, load_game

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", nargs="+", default=["valid_seen", "valid_unseen", "train"])
    parser.add_argument("--walks", type=int, default=5, help="seeded random walks per game (besides the walkthrough)")
    parser.add_argument("--max-steps", type=int, default=50, help="commands per random walk")
    parser.add_argument("--every", type=int, default=1, help="check every n-th game of each split")
    parser.add_argument("--plain", action="store_true", help="do not memoize the official engine's parsers")
    args = parser.parse_args()
    from lmgym.envs.alfworld.textworld_engine import TextWorldEngine, memoize_official_engine

    if not args.plain:
        memoize_official_engine()

    total_games = total_steps = failures = 0
    start = time.perf_counter()
    for split in args.splits:
        paths = game_paths(split)[:: args.every]
        for path in paths:
            game = load_game(path)
            official = TextWorldEngine(game.data)
            runs = [walk(game.data, list(game.data.get("walkthrough", [])), official=official)]
            runs += [walk(game.data, seed=seed, max_steps=args.max_steps, official=official) for seed in range(args.walks)]
            total_games += 1
            total_steps += sum(len(r.commands) + 1 for r in runs)
            bad = [m for r in runs for m in r.mismatches]
            if bad:
                failures += 1
                m = bad[0]
                print(f"MISMATCH {game.name} step {m.step} {m.command!r} {m.field}:\n  native   {m.native!r}\n  official {m.official!r}")
        print(f"{split}: {len(paths)} games checked ({time.perf_counter() - start:.0f} s so far)", flush=True)
    print(f"{total_games} games, {total_steps} compared steps (resets included), {failures} games with a mismatch, "
          f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
