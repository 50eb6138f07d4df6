"""Few-shot demonstrations are made once and passed to the prompt, never played while a prompt is built."""

import gymnasium as gym
import pytest

import lmgym  # noqa: F401
from lmgym.agents import ExpertAgent, demonstrations
from lmgym.agents.demonstrations import demonstration_of, family_demonstrations, play_demonstrations
from lmgym.agents.lm import LMAgent
from lmgym.agents.runner import run_episode
from lmgym.envs.registry import family_prompt
from lmgym.react import Demonstration, Turn
from test_lm_agent import Scripted

OWN = (Demonstration("open the box", (Turn("You see a box.", "Thought: open it.\nAction: open box"),)),
       Demonstration("close the box", (Turn("You see an open box.", "Action: close box"),)))


def test_the_familys_demonstrations_are_won_training_episodes_played_once():
    prompt = family_prompt("KeyDoor")
    first = family_demonstrations(prompt, 2)
    misses = play_demonstrations.cache_info().misses
    assert family_demonstrations(prompt, 2) is first and play_demonstrations.cache_info().misses == misses
    assert len(first) == 2 and all(0 < len(d.turns) <= prompt.demonstrations.max_steps for d in first)
    assert all(turn.completion.startswith("Thought: ") for d in first for turn in d.turns)
    assert family_demonstrations(prompt, 0) == ()
    with pytest.raises(ValueError, match="no few-shot demonstrations"):
        family_demonstrations(family_prompt("Arith"), 1)


def test_a_rollout_becomes_a_demonstration():
    episode = run_episode(gym.make("lmgym/KeyDoor-v0"), ExpertAgent(), seed=3)
    demo = demonstration_of(episode)
    assert demo.task == episode.task and [t.observation for t in demo.turns] == [s.observation for s in episode.steps]
    assert [t.completion for t in demo.turns] == [s.completion for s in episode.steps]


def test_given_demonstrations_are_prompted_and_nothing_is_played(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a demonstration was played while the prompt was built")

    monkeypatch.setattr(demonstrations, "play_demonstrations", refuse)
    backend = Scripted(["Thought: go.\nAction: go east"] * 4)
    run_episode(gym.make("lmgym/KeyDoor-v0"), LMAgent(backend=backend, demonstrations=OWN), seed=0, max_steps=2)
    system = backend.asked[-1][0][0][0]["content"]
    assert f"Example 1:\n{OWN[0].text()}" in system and f"Example 2:\n{OWN[1].text()}" in system

    as_turns = Scripted(["Thought: go.\nAction: go east"] * 2)
    agent = LMAgent(backend=as_turns, demonstrations=OWN[:1], demonstration_turns=True)
    run_episode(gym.make("lmgym/KeyDoor-v0"), agent, seed=0, max_steps=1)
    assert as_turns.asked[0][0][0][1:3] == OWN[0].messages()
    with pytest.raises(ValueError, match="only 2 demonstrations"):
        run_episode(gym.make("lmgym/KeyDoor-v0"), LMAgent(backend=Scripted([]), demonstrations=OWN, few_shot=3),
                    seed=0, max_steps=1)
    with pytest.raises(ValueError, match="Demonstration"):
        LMAgent(backend=Scripted([]), demonstrations=["a transcript as a string"])
