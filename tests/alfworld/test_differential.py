"""The native engine against the official one (TextWorld PddlEnv + ALFWorld wrappers).

Every validation game (274) and every 40th train game (18): the stored walkthrough, then a seeded
random walk of admissible, re-cased, re-spaced and invalid commands. Observation text, sorted
admissible commands, won and the official engine's own done must be identical at every step.
The official engine runs memoized (`memoize_official_engine`: pure parsers cached) to fit CI;
a sample of games (`UNTOUCHED_SAMPLE`) also runs on the untouched official engine, in a fresh
process the memoization never reached, and the memoized and untouched engines are compared
transcript for transcript. `python -m lmgym.envs.alfworld.differential` runs the long walks
(figures in docs/notes/alfworld.md).
"""

import json
import subprocess
import sys
from dataclasses import replace

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
    rows.append([step.feedback, step.admissible_commands, step.won, step.done])
    step = engine.step(random_commands(rng, step.admissible_commands, 0.25))
rows.append([step.feedback, step.admissible_commands, step.won, step.done])
print(json.dumps(rows))
"""


#: (split, index) of the games that also run on the untouched official engine: one per split,
#: of different task types and room kinds (seconds each on that engine).
UNTOUCHED_SAMPLE = (("valid_seen", 3), ("valid_unseen", 9), ("train", 400))

_UNTOUCHED = """
import json, sys
import fast_downward
from lmgym.envs.alfworld.differential import walk
from lmgym.envs.alfworld.games import load_game
from lmgym.envs.alfworld.textworld_engine import TextWorldEngine
rows = []
for path in sys.argv[1:]:
    game = load_game(path)
    official = TextWorldEngine(game.data)
    for run in (walk(game.data, list(game.data["walkthrough"]), official=official),
                walk(game.data, seed=1, max_steps=10, official=official)):
        rows.append([game.name, len(run.commands), [[m.step, m.command, m.field, repr(m.native)[:200],
                     repr(m.official)[:200]] for m in run.mismatches]])
assert not getattr(fast_downward, "_lmgym_memoized", False)  # nothing memoized this engine
print(json.dumps(rows))
"""


def test_native_engine_equals_the_untouched_official_engine_on_a_sample(alfworld_games):
    paths = [alfworld_games[split][index] for split, index in UNTOUCHED_SAMPLE]
    done = subprocess.run([sys.executable, "-c", _UNTOUCHED, *paths], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(rows) == 2 * len(paths) and all(steps > 0 for _, steps, _ in rows)
    for name, _, mismatches in rows:
        assert not mismatches, f"{name}: {mismatches[0]}"


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


def test_the_env_on_the_official_engine_raises_when_the_engines_differ(alfworld_games, monkeypatch):
    import gymnasium as gym

    from lmgym.envs.alfworld.env import EngineMismatchError
    from lmgym.envs.alfworld.textworld_engine import TextWorldEngine

    memoize_official_engine()
    env = gym.make("lmgym/ALFWorld-v0", split="valid_seen", engine="textworld")
    _, info = env.reset(seed=7)
    step = TextWorldEngine.step
    monkeypatch.setattr(TextWorldEngine, "step", lambda self, command: replace(step(self, command), done=True))
    with pytest.raises(EngineMismatchError, match="the engines differ in done: native False, official True"):
        env.step(info["admissible_actions"][0])
