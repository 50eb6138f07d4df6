"""The expert solves every shared game from reset and from perturbed states, within 50 steps."""

import numpy as np
import pytest

from lmgym.envs.alfworld.engine import NativeEngine
from lmgym.envs.alfworld.expert import DeadEnd, Expert
from lmgym.envs.alfworld.games import load_game

MAX_STEPS = 50


def play(path: str, perturbation_seed: int | None) -> tuple[str, int]:
    """("won" | "dead end" | "lost", steps): random admissible commands first, then the expert."""
    engine = NativeEngine(load_game(path).data)
    step, expert = engine.reset(), None
    expert = Expert(engine)
    steps = 0
    if perturbation_seed is not None:
        rng = np.random.default_rng(perturbation_seed)
        for _ in range(int(rng.integers(1, 11))):
            step = engine.step(step.admissible_commands[int(rng.integers(len(step.admissible_commands)))])
            steps += 1
    while not step.won and steps < MAX_STEPS:
        try:
            command, reasoning = expert._plan()
        except DeadEnd:
            return "dead end", steps
        assert command in step.admissible_commands, (path, command)
        assert reasoning.endswith(".") and len(reasoning) > 20
        step = engine.step(command)
        steps += 1
    return ("won" if step.won else "lost"), steps


@pytest.mark.parametrize("split", ["valid_seen", "valid_unseen", "train"])
def test_expert_solves_every_game_from_reset_and_after_perturbations(split, alfworld_games):
    paths = alfworld_games[split] if split != "train" else alfworld_games[split][::5]
    outcomes = {"won": 0, "dead end": 0, "lost": 0}
    for path in paths:
        result, steps = play(path, None)
        assert result == "won" and steps <= 30, (path, result, steps)
        for seed in (1, 2):
            result, _ = play(path, seed)
            outcomes[result] += 1
            assert result != "lost", path
    # A dead end is a state where the hands hold an object no receptacle accepts: genuine, rare.
    assert outcomes["dead end"] <= 0.02 * sum(outcomes.values()), outcomes


def test_unplaceable_object_is_a_genuine_dead_end(alfworld_games):
    """Holding an object no receptacle accepts: nothing frees the hands, the expert says so."""
    for path in alfworld_games["valid_seen"]:
        engine = NativeEngine(load_game(path).data)
        step = engine.reset()
        world, names = engine.world, engine.world.names
        accepted = {ot for (_, ot) in world.can_contain}
        stuck = [(o, r) for (o, r) in sorted(engine.facts["inreceptacle"])
                 if o in world.pickupable and not world.object_types[o] & accepted]
        if not stuck:
            continue
        obj, receptacle = stuck[0]
        for command in (f"go to {names[receptacle]}", f"open {names[receptacle]}",
                        f"take {names[obj]} from {names[receptacle]}"):
            if command in step.admissible_commands:
                step = engine.step(command)
        assert engine.held == [obj]
        assert not any(c.startswith("move ") for c in step.admissible_commands)
        assert Expert(engine).act() == ("look", f"I hold the {names[obj]} and no receptacle accepts it; "
                                                "the task cannot be finished from here.")
        return
    pytest.fail("valid_seen has no unplaceable object any more")
