import gymnasium as gym
import pytest

import lmgym  # noqa: F401
from lmgym.agents import Decision, ExpertAgent, RandomAgent, run_episode
from lmgym.envs.wrappers import ReActTranscript, RecordEpisodes
from lmgym.rollouts import read_episodes


def test_random_agent_is_a_function_of_its_seed():
    env = gym.make("lmgym/KeyDoor-Large-v0")
    a = run_episode(env, RandomAgent(), seed=9)
    b = run_episode(env, RandomAgent(), seed=9)
    assert [s.action for s in a.steps] == [s.action for s in b.steps]


def test_random_agent_only_picks_admissible_actions():
    env = gym.make("lmgym/KeyDoor-Large-v0")
    _, info = env.reset(seed=1)
    agent = RandomAgent()
    agent.reset(seed=0)
    for _ in range(30):
        action = agent.act("", info)
        assert action in info["admissible_actions"]
        _, _, terminated, truncated, info = env.step(action)
        assert info["action_valid"]
        if terminated or truncated:
            _, info = env.reset(seed=2)


def test_expert_agent_needs_an_expert():
    with pytest.raises(KeyError, match="expert_action"):
        ExpertAgent().decide("obs", {"admissible_actions": []})


def test_decision_renders_completion_with_spans():
    d = Decision("go north", reasoning="north is the key room")
    assert d.completion == "Thought: north is the key room\nAction: go north"
    assert [d.completion[s.start:s.end] for s in d.spans] == ["north is the key room", "go north"]


def test_react_transcript_keeps_thoughts_and_passes_actions():
    env = ReActTranscript(gym.make("lmgym/KeyDoor-v0"), max_turns=2)
    observation, info = env.reset(seed=0)
    assert observation.startswith(f"Task: {info['task']}\nObservation: ")
    for _ in range(3):
        observation, *_, info = env.step(f"Thought: {info['expert_reasoning']}\nAction: {info['expert_action']}")
    assert observation.count("Action: ") == 2  # only the last two turns are kept
    assert "Thought: " in observation
    observation, *_ = env.step("look")  # a plain action passes unchanged
    assert observation.rsplit("Action: ", 1)[1].startswith("look\nObservation: ")


def test_record_episodes_writes_one_line_per_finished_episode(tmp_path):
    path = tmp_path / "r.jsonl"
    env = RecordEpisodes(gym.make("lmgym/KeyDoor-v0"), path, agent="expert")
    for seed in range(3):
        _, info = env.reset(seed=seed)
        done = False
        while not done:
            _, _, terminated, truncated, info = env.step(info["expert_action"])
            done = terminated or truncated
    env.reset(seed=99)
    env.step("look")  # an unfinished episode is not written
    episodes = list(read_episodes(path))
    assert [e.seed for e in episodes] == [0, 1, 2] and all(e.won for e in episodes)
