"""lmgym/ALFWorld-Gen-v0: the ALFWorld contract on generated games (the matrix covers the rest)."""

import gymnasium as gym
import pytest

pytest.importorskip("alfworld", reason="ALFWorld-Gen reads the alfworld wheel's room layouts")

import lmgym  # noqa: E402,F401  registers the ids
from lmgym.agents.base import ExpertAgent  # noqa: E402
from lmgym.agents.runner import run_episode  # noqa: E402
from lmgym.envs.alfworld.gen.generator import generate_game  # noqa: E402
from lmgym.envs.alfworld.gen.scenes import UNSEEN_SCENES  # noqa: E402


def test_task_index_is_the_generator_seed():
    env = gym.make("lmgym/ALFWorld-Gen-v0")
    observation, info = env.reset(seed=0, options={"task_index": 5})
    household = generate_game(5)
    assert info["game"] == "gen/train/seed5" and info["task_type"] == household.task_type
    assert info["task"] == household.task + "."
    assert observation.endswith(f"Your task is to: {household.task}.")
    # the walkthrough plays through the env as in the engines
    for command in household.game["walkthrough"]:
        observation, reward, terminated, truncated, info = env.step(command)
        assert info["action_valid"]
    assert terminated and reward == 1.0 and info["won"]


def test_expert_wins_on_both_splits():
    for env_id in ("lmgym/ALFWorld-Gen-v0", "lmgym/ALFWorld-Gen-Unseen-v0"):
        env = gym.make(env_id)
        episodes = [run_episode(env, ExpertAgent(), seed=seed) for seed in range(10)]
        assert all(e.won for e in episodes)
        assert max(len(e.steps) for e in episodes) <= 15
    unseen = gym.make("lmgym/ALFWorld-Gen-Unseen-v0").unwrapped
    for seed in range(5):
        unseen.reset(seed=seed)
        assert unseen.household.scene in UNSEEN_SCENES


def test_legacy_put_and_junk_get_feedback():
    env = gym.make("lmgym/ALFWorld-Gen-v0", task_types=["pick_and_place_simple"], closed_prob=0.0)
    _, info = env.reset(options={"task_index": 1})
    walkthrough = env.unwrapped.household.game["walkthrough"]
    for command in walkthrough[:-1]:
        env.step(command)
    observation, _, _, _, info = env.step("fly to the moon")
    assert observation == "Nothing happens." and not info["action_valid"]
    legacy = walkthrough[-1].replace("move ", "put ", 1).replace(" to ", " in/on ", 1)
    _, reward, terminated, _, info = env.step(legacy)
    assert info["used_alias"] and terminated and reward == 1.0


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="split"):
        gym.make("lmgym/ALFWorld-Gen-v0", split="valid_seen_rooms")
    with pytest.raises(ValueError, match="task_types"):
        gym.make("lmgym/ALFWorld-Gen-v0", task_types=["juggle"])


def test_official_engine_plays_generated_games():
    pytest.importorskip("fast_downward", reason="engine='textworld' needs textworld[pddl]")
    env = gym.make("lmgym/ALFWorld-Gen-v0", engine="textworld", num_receptacles=6, num_distractors=4)
    episode = run_episode(env, ExpertAgent(), seed=3)
    assert episode.won
