"""A CI sample of generated games through both engines (the benchmark runs whole batches).

The official engine (TextWorld's PddlEnv + Fast Downward) costs seconds per game, so the sample
is one game per task type in small rooms, each with its walkthrough and a seeded random walk
(invalid commands mixed in), plus one game with the default knobs.
"""

import pytest

pytest.importorskip("textworld", reason="the official engine needs textworld[pddl] (extra lmgym[textworld])")
pytest.importorskip("fast_downward", reason="the official engine needs textworld[pddl] (extra lmgym[textworld])")
pytest.importorskip("alfworld", reason="the generator reads the alfworld wheel")

from lmgym.envs.alfworld.gen.check import engines_check  # noqa: E402
from lmgym.envs.alfworld.gen.generator import TASK_TYPES, GenKnobs, generate_game  # noqa: E402

SMALL = dict(num_distractors=6, num_receptacles=7, closed_prob=0.5)


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_engines_agree_on_each_task_type(task_type):
    household = generate_game(100 + TASK_TYPES.index(task_type), GenKnobs(task_types=(task_type,), **SMALL))
    report = engines_check(household, random_walks=1, walk_steps=12)
    assert report.steps >= len(household.game["walkthrough"]) + 1
    assert not report.mismatches


def test_engines_agree_on_a_default_game():
    household = generate_game(2)
    report = engines_check(household)
    assert report.steps == len(household.game["walkthrough"]) + 1
