import gymnasium as gym
import pytest

import lmgym  # noqa: F401
from lmgym.agents import ExpertAgent, run_episode
from lmgym.envs.keydoor import KeyDoorEnv


@pytest.mark.parametrize("env_id", ["lmgym/KeyDoor-v0", "lmgym/KeyDoor-Large-v0"])
def test_the_bot_solves_every_generated_house(env_id):
    env = gym.make(env_id)
    for seed in range(300):
        episode = run_episode(env, ExpertAgent(), seed=seed)
        assert episode.won and episode.return_ == 1.0, f"seed {seed} unsolved"
        assert episode.length < env.spec.max_episode_steps


def test_exact_feedback_strings():
    env = KeyDoorEnv(size=1)
    observation, info = env.reset(seed=0)
    assert observation.startswith(info["task"] + "\nYou are in the ")
    assert "There are no exits." in observation and "The vault door is locked." in observation
    obs, reward, terminated, _, info = env.step("enter vault")
    assert obs.startswith("The door is locked.\n") and reward == 0 and not terminated and info["action_valid"]
    obs, *_, info = env.step("go north")
    assert obs.startswith("You can't go that way.\n") and not info["action_valid"]
    obs, *_, info = env.step("dance")
    assert obs.startswith("I don't understand that.") and not info["action_valid"]
    key = info["task"].split("Find the ")[1].split(",")[0]
    obs, *_ = env.step(f"  TAKE   {key.upper()} ")  # case and spaces do not matter
    assert obs.startswith(f"You take the {key}.")
    env.step("unlock door")
    obs, reward, terminated, _, info = env.step("enter vault")
    assert obs == "You enter the vault. You won!" and reward == 1.0 and terminated and info["won"]


def test_items_take_the_right_article():
    env = gym.make("lmgym/KeyDoor-Large-v0")
    seen = set()
    for seed in range(40):  # the rooms the expert walks through
        episode = run_episode(env, ExpertAgent(), seed=seed)
        for observation in [step.observation for step in episode.steps] + [episode.final_observation]:
            if "You see: " in observation:
                seen.update(observation.split("You see: ", 1)[1].split(".", 1)[0].split(", "))
    assert {"an iron key", "an apple", "an umbrella", "an old boot", "a brass key"} <= seen, seen
    assert not [item for item in seen if item.startswith("a ") and item[2] in "aeiou"], seen


def test_admissible_actions_all_parse():
    env = gym.make("lmgym/KeyDoor-Large-v0")
    _, info = env.reset(seed=4)
    for action in info["admissible_actions"]:
        clone = gym.make("lmgym/KeyDoor-Large-v0")
        clone.reset(seed=4)
        obs, *_ = clone.step(action)
        assert not obs.startswith("I don't understand"), action


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="size"):
        KeyDoorEnv(size=7)
    with pytest.raises(ValueError, match="num_distractors"):
        KeyDoorEnv(num_distractors=99)
