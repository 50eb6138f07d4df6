"""The native engine's pieces: PDDL reading, goal evaluation, names, text and commands."""

import numpy as np
import pytest

from lmgym.envs.alfworld.engine import NOTHING_HAPPENS, NativeEngine, _listing, demangle_names
from lmgym.envs.alfworld.games import load_game
from lmgym.envs.alfworld.pddl import ConjunctiveGoal, goal_holds, parse_problem, parse_sexpr

PROBLEM = """
(define (problem tiny) ; a comment
 (:domain alfred)
 (:objects agent1 - agent  Apple_bar_1 Apple_bar_2 - object  Sink_bar_1_bar_SinkBasin - receptacle
           loc1 loc2 - location  AppleType - otype)
 (:init (atLocation agent1 loc1) (objectType Apple_bar_1 AppleType) (objectType Apple_bar_2 AppleType)
        (inReceptacle Apple_bar_1 Sink_bar_1_bar_SinkBasin) (= (distance loc1 loc2) 3))
 (:goal (exists (?r - receptacle) (exists (?o1 - object) (and (objectType ?o1 AppleType) (inReceptacle ?o1 ?r)
        (exists (?o2 - object) (and (not (= ?o1 ?o2)) (objectType ?o2 AppleType) (inReceptacle ?o2 ?r))))))))
"""


def test_parse_problem_lowercases_types_and_drops_numeric_fluents():
    problem = parse_problem(PROBLEM)
    assert problem.name == "tiny"
    assert problem.types["apple_bar_1"] == "object" and problem.types["loc2"] == "location"
    assert ("atlocation", "agent1", "loc1") in problem.init
    assert not any(fact[0] == "=" for fact in problem.init)
    assert parse_sexpr("(a (b c)) ; x")[0] == ["a", ["b", "c"]]
    with pytest.raises(ValueError):
        parse_sexpr("(a")


def test_goal_needs_two_distinct_objects_in_one_receptacle():
    problem = parse_problem(PROBLEM)
    facts = {}
    for fact in problem.init:
        facts.setdefault(fact[0], set()).add(fact[1:])
    fast = ConjunctiveGoal(problem.goal, problem)
    assert not goal_holds(problem.goal, facts, problem) and not fast.holds(facts)
    facts["inreceptacle"].add(("apple_bar_2", "sink_bar_1_bar_sinkbasin"))
    assert goal_holds(problem.goal, facts, problem) and fast.holds(facts)


def test_demangled_names_count_down_over_sorted_ids():
    names = demangle_names(["drawer_bar_b", "drawer_bar_a", "sink_bar_1_bar_sinkbasin", "agent1"])
    # The first id in sorted order gets the largest number (alfworld's Demangler pops from the end).
    assert names == {"drawer_bar_a": "drawer 2", "drawer_bar_b": "drawer 1",
                     "sink_bar_1_bar_sinkbasin": "sinkbasin 1", "agent1": "agent1 "}


def test_listing_matches_textworld_lists():
    assert _listing([]) == "nothing"
    assert _listing(["a x"]) == "a x"
    assert _listing(["a x", "a y"]) == "a x, and a y"
    assert _listing(["a", "b", "c"]) == "a, b, and c"


def test_walkthrough_wins_and_commands_match_exactly(alfworld_games):
    game = load_game(alfworld_games["valid_seen"][0])
    engine = NativeEngine(game.data)
    first = engine.reset()
    assert first.feedback.startswith("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room.")
    assert first.admissible_commands == sorted(first.admissible_commands)
    assert {"help", "inventory", "look"} <= set(first.admissible_commands)
    for command in game.data["walkthrough"][:-1]:
        step = engine.step(command)
        assert step.valid and not step.won
    # Matching strips surrounding spaces but is case-sensitive, like PddlEnv.step.
    assert engine.step(game.data["walkthrough"][-1].upper()).feedback == NOTHING_HAPPENS
    assert engine.step(f"  {game.data['walkthrough'][-1]} ").won


def test_reset_restores_the_initial_state(alfworld_games):
    game = load_game(alfworld_games["valid_unseen"][3])
    engine = NativeEngine(game.data)
    first = engine.reset()
    rng = np.random.default_rng(0)
    step = first
    for _ in range(20):
        step = engine.step(step.admissible_commands[int(rng.integers(len(step.admissible_commands)))])
    again = engine.reset()
    assert (again.feedback, again.admissible_commands) == (first.feedback, first.admissible_commands)
