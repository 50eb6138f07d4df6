"""Parts of the grounded ALFWorld teacher: the task-sentence reader, the memory, the priors file."""

import pytest

from lmgym.envs.alfworld.engine import World, compile_world
from lmgym.envs.alfworld.expert import goal_spec
from lmgym.envs.alfworld.gen.generator import GenKnobs, generate_game
from lmgym.envs.alfworld.games import load_game
from lmgym.envs.alfworld.priors import REBUILD_COMMAND, build_table, gen_worlds, load_priors, train_worlds
from lmgym.envs.alfworld.teacher import RoomMemory, task_goal


def test_task_sentences_read_as_the_pddl_goal(alfworld_games):
    """The sentence alone gives the expert's GoalSpec (read from the PDDL goal): every
    validation game and every 10th train game."""
    for split, paths in alfworld_games.items():
        for path in paths[::10] if split == "train" else paths:
            data = load_game(path).data
            world = compile_world(data["pddl_problem"], data["grammar"])
            assert task_goal(world.task) == goal_spec(world.problem.goal), (split, path, world.task)


def test_generated_task_sentences_read_as_the_pddl_goal():
    for seed in range(150):
        game = generate_game(seed, GenKnobs()).game
        world = World(game["pddl_problem"], game["grammar"])
        assert task_goal(world.task) == goal_spec(world.problem.goal), (seed, world.task)


def test_task_goal_rejects_other_sentences():
    with pytest.raises(ValueError, match="not an ALFWorld task sentence"):
        task_goal("bake a cake.")


def test_memory_follows_the_feedback():
    memory = RoomMemory()
    memory.read("You are in the middle of a room. Looking quickly around you, you see a drawer 2, a drawer 1, "
                "and a countertop 1.\n\nYour task is to: put a clean mug in drawer.")
    assert memory.receptacles == ["drawer 2", "drawer 1", "countertop 1"]
    memory.read("You arrive at drawer 1. The drawer 1 is closed.", ["go to countertop 1", "go to drawer 2", "open drawer 1"])
    assert memory.location == "drawer 1" and memory.closed == {"drawer 1"} and memory.beside == {"drawer 1"}
    memory.read("You open the drawer 1. The drawer 1 is open. In it, you see a mug 2, and a pen 1.")
    assert memory.contents["drawer 1"] == ["mug 2", "pen 1"] and not memory.closed
    memory.read("You pick up the mug 2 from the drawer 1.")
    assert memory.held == "mug 2" and memory.contents["drawer 1"] == ["pen 1"]
    memory.read("You clean the mug 2 using the sinkbasin 1.")
    assert memory.treated["mug 2"] == {"isclean"}
    memory.read("You move the mug 2 to the drawer 1.")
    assert memory.held is None and memory.contents["drawer 1"] == ["pen 1", "mug 2"]
    memory.read("On the countertop 1, you see nothing.")  # "examine countertop 1"
    assert memory.contents["countertop 1"] == []


@pytest.mark.slow
def test_committed_train_priors_are_the_train_split_counts(alfworld_games):
    assert build_table(train_worlds()) == dict(load_priors("train"))


@pytest.mark.slow
def test_committed_gen_priors_are_the_generator_counts():
    table = load_priors("gen")
    assert build_table(gen_worlds(table["games"])) == dict(table)
    assert "--gen-games 2000" in REBUILD_COMMAND and table["games"] == 2000
