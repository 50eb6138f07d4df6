"""The ALFWorld household generator: format, determinism, knobs, and every game's checks."""

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

pytest.importorskip("alfworld", reason="the generator reads the alfworld wheel's scene layouts")

from lmgym.envs.alfworld.engine import NativeEngine  # noqa: E402
from lmgym.envs.alfworld.gen.check import expert_check  # noqa: E402
from lmgym.envs.alfworld.gen.generator import TASK_TYPES, GenKnobs, generate_game, pddl_id  # noqa: E402
from lmgym.envs.alfworld.gen.scenes import UNSEEN_SCENES, alfworld_facts, split_scenes  # noqa: E402

GAME_KEYS = {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"}


def test_game_has_the_official_layout():
    household = generate_game(0)
    game = household.game
    assert set(game) == GAME_KEYS and game["solvable"] is True
    assert json.loads(json.dumps(game)) == game  # writable as game.tw-pddl
    assert "UNKNOWN GOAL" not in game["grammar"]
    assert f"Your task is to: {household.task}." in game["grammar"]
    problem = game["pddl_problem"]
    for section in ("(:domain alfred)", "(:objects", "(:init", "(:goal", "(atLocation agent1 loc_bar_"):
        assert section in problem
    assert problem.count("(") == problem.count(")")


def test_ids_follow_alfred_mangling():
    assert pddl_id("Sink|-01.90|+00.97|-01.50|SinkBasin") == (
        "Sink_bar__minus_01_dot_90_bar__plus_00_dot_97_bar__minus_01_dot_50_bar_SinkBasin")


def test_same_seed_same_game_across_processes():
    script = ("import hashlib, json; from lmgym.envs.alfworld.gen.generator import generate_game; "
              "print(hashlib.sha256(json.dumps(generate_game(7).game, sort_keys=True).encode()).hexdigest())")
    digests = {
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": hash_seed}).stdout
        for hash_seed in ("0", "123")
    }
    assert len(digests) == 1
    assert generate_game(7).game == generate_game(7).game
    assert generate_game(7).game != generate_game(8).game


def test_every_task_type_is_generated_and_solvable():
    for task_type in TASK_TYPES:
        knobs = GenKnobs(task_types=(task_type,))
        for seed in range(5):
            household = generate_game(seed, knobs)
            assert household.task_type == task_type
            assert expert_check(household) == len(household.game["walkthrough"])


def test_a_batch_passes_the_expert_check():
    lengths = [expert_check(generate_game(seed)) for seed in range(200)]
    assert max(lengths) <= 50


def test_splits_hold_out_rooms():
    assert set(split_scenes("unseen")) == set(UNSEEN_SCENES)
    assert not set(split_scenes("train")) & set(UNSEEN_SCENES)
    unseen = {generate_game(seed, GenKnobs(split="unseen")).scene for seed in range(20)}
    assert unseen <= set(UNSEEN_SCENES)
    train = {generate_game(seed).scene for seed in range(50)}
    assert not train & set(UNSEEN_SCENES) and len(train) > 10


def test_knobs_change_the_household():
    base = GenKnobs()
    few = NativeEngine(generate_game(3, replace(base, num_receptacles=5)).game)
    assert len(few.world.receptacles_at) == 5
    bare = generate_game(3, replace(base, num_distractors=0))
    crowded = generate_game(3, replace(base, num_distractors=40))
    assert bare.game["pddl_problem"].count("(inReceptacle ") + 35 <= crowded.game["pddl_problem"].count("(inReceptacle ")
    closed = generate_game(4, replace(base, task_types=("pick_cool_then_place_in_recep",)))
    opened = generate_game(4, replace(base, task_types=("pick_cool_then_place_in_recep",), closed_prob=0.0))
    assert "(opened " not in closed.game["pddl_problem"] and "(opened " in opened.game["pddl_problem"]
    assert "open fridge" not in " ".join(opened.game["walkthrough"])
    for knobs in (replace(base, num_receptacles=5), replace(base, num_distractors=40), replace(base, closed_prob=0.0)):
        for seed in range(10):
            expert_check(generate_game(seed, knobs))


def test_objects_are_placed_where_alfred_allows():
    constants = alfworld_facts().constants
    household = generate_game(11)
    engine = NativeEngine(household.game)
    world = engine.world
    allowed = {(r.lower() + "type", o.lower() + "type") for r, objs in constants.VAL_RECEPTACLE_OBJECTS.items() for o in objs}
    for obj, receptacle in world.initial_facts["inreceptacle"]:
        (object_type,) = world.object_types[obj]
        (receptacle_type,) = world.receptacle_types[receptacle]
        assert (receptacle_type, object_type) in allowed or object_type == "desklamptype"


def test_bad_knobs_are_clear_errors():
    with pytest.raises(ValueError, match="task_types"):
        GenKnobs(task_types=("fly",))
    with pytest.raises(ValueError, match="split"):
        GenKnobs(split="test")
    with pytest.raises(ValueError, match="closed_prob"):
        GenKnobs(closed_prob=2.0)


def test_traj_data_names_what_alfworld_reads():
    household = generate_game(1, GenKnobs(task_types=("look_at_obj_in_light",)))
    traj = household.traj_data()
    assert traj["task_type"] == "look_at_obj_in_light"
    assert traj["pddl_params"]["object_target"] == household.target
    assert traj["pddl_params"]["toggle_target"] == "DeskLamp" and traj["pddl_params"]["parent_target"] == ""
    assert traj["scene"]["floor_plan"] == f"FloorPlan{household.scene}"
