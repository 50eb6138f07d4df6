"""The native engine against the official one (TextWorld PddlEnv + ALFWorld wrappers).

Every validation game (274) and every 40th train game (18): the stored walkthrough, then a seeded
random walk of admissible, re-cased, re-spaced and invalid commands. Observation text, sorted
admissible commands, won and done must be identical at every step. The official engine runs
memoized (`memoize_official_engine`: pure parsers cached, identical output, checked below
against the untouched engine) to fit CI; `python -m lmgym.envs.alfworld.differential` runs
the long walks (figures in docs/notes/alfworld.md).
"""

import json
import subprocess
import sys

import pytest

pytest.importorskip("textworld")
pytest.importorskip("alfworld")

from lmgym.envs.alfworld.differential import walk  # noqa: E402
from lmgym.envs.alfworld.games import load_game  # noqa: E402
from lmgym.envs.alfworld.textworld_engine import TextWorldEngine, memoize_official_engine  # noqa: E402

CHUNKS = 8
WALK_STEPS = 10
TRAIN_EVERY = 40


def _games(alfworld_games) -> list[str]:
    return (list(alfworld_games["valid_seen"]) + list(alfworld_games["valid_unseen"])
            + list(alfworld_games["train"][::TRAIN_EVERY]))


def _describe(mismatch, name: str) -> str:
    return (f"{name} step {mismatch.step} command {mismatch.command!r}: {mismatch.field}\n"
            f"  native   {mismatch.native!r}\n  official {mismatch.official!r}")


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_native_engine_is_identical_to_the_official_one(chunk, alfworld_games):
    memoize_official_engine()
    games = _games(alfworld_games)[chunk::CHUNKS]
    assert games
    for path in games:
        game = load_game(path)
        official = TextWorldEngine(game.data)
        through = walk(game.data, list(game.data["walkthrough"]), official=official)
        assert not through.mismatches, _describe(through.mismatches[0], game.name)
        assert len(through.commands) == len(game.data["walkthrough"])  # it wins on the last one
        wander = walk(game.data, seed=0, max_steps=WALK_STEPS, official=official)
        assert not wander.mismatches, _describe(wander.mismatches[0], game.name)


_TRANSCRIPT = """
import json, sys
from lmgym.envs.alfworld.differential import random_commands
from lmgym.envs.alfworld.games import load_game
from lmgym.envs.alfworld.textworld_engine import TextWorldEngine, memoize_official_engine
import numpy as np
path, memoized = sys.argv[1], sys.argv[2] == "1"
if memoized:
    memoize_official_engine()
engine = TextWorldEngine(load_game(path).data)
step, rng, rows = engine.reset(), np.random.default_rng(0), []
for _ in range(8):
    rows.append([step.feedback, step.admissible_commands, step.won])
    step = engine.step(random_commands(rng, step.admissible_commands, 0.25))
rows.append([step.feedback, step.admissible_commands, step.won])
print(json.dumps(rows))
"""


def test_memoizing_the_official_engine_changes_nothing(alfworld_games):
    path = alfworld_games["valid_unseen"][9]  # a kitchen: long lists, open/close, appliances

    def transcript(memoized: str) -> list:
        done = subprocess.run([sys.executable, "-c", _TRANSCRIPT, path, memoized],
                              capture_output=True, text=True, timeout=300, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert transcript("0") == transcript("1")


def test_env_on_the_official_engine_matches_the_native_env(alfworld_games):
    import gymnasium as gym

    memoize_official_engine()
    envs = [gym.make("lmgym/ALFWorld-v0", split="valid_seen", engine=engine) for engine in ("native", "textworld")]
    transcripts = []
    for env in envs:
        observation, info = env.reset(seed=7)
        rows = [(observation, info["admissible_actions"], info["won"])]
        for action in ("look", "help", "put nothing in/on anything", info["admissible_actions"][0]):
            observation, reward, terminated, truncated, info = env.step(action)
            rows.append((observation, info["admissible_actions"], reward, terminated, info["action_valid"]))
        transcripts.append(rows)
    assert transcripts[0] == transcripts[1]
