"""The single-answer families: Arith's difficulty knob and exact answers, HotPotQA's distractor
reading setting (ten paragraphs, one finish[], official EM/F1) and its Gen twin."""

import re

import gymnasium as gym
import pytest

import lmgym  # noqa: F401
from lmgym import testing
from lmgym.envs.answer import parse_finish
from lmgym.envs.arith import normalize_number
from lmgym.envs.registry import ENVS


@pytest.mark.parametrize("num_steps", [1, 3, 7, 12])
def test_arith_worked_solution_has_one_true_equation_per_step(num_steps):
    env = gym.make("lmgym/Arith-v0", num_steps=num_steps)
    for seed in range(20):
        observation, info = env.reset(seed=seed)
        equations = re.findall(r"(\d+) ([-+*/]) (\d+) = (\d+)\.", info["expert_reasoning"])
        assert len(equations) == num_steps
        value = int(re.search(r"has (\d+) ", observation).group(1))
        for a, op, b, result in equations:  # a chain: each starts from the last result, all exact
            assert int(a) == value
            value = {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b), "/": int(a) // int(b)}[op]
            assert op != "/" or int(a) % 2 == 0
            assert value == int(result) and 0 <= value <= 999
        assert info["expert_reasoning"].endswith(f"Answer: {value}") and info["expert_action"] == f"finish[{value}]"
        # the question states every event (the worked solution is derivable from the text)
        assert observation.count(".") >= num_steps + 1


def test_arith_scores_numbers_and_rejects_other_actions():
    env = gym.make("lmgym/Arith-v0")
    _, info = env.reset(seed=5)
    gold = info["expert_action"][len("finish["):-1]
    observation, reward, terminated, _, info = env.step("search[apples]")
    assert (reward, terminated, info["action_valid"]) == (0.0, False, False)
    assert observation.startswith("Invalid action: search[apples]")
    _, reward, terminated, _, info = env.step(f"FINISH[ {int(gold):,}.0 ]")
    assert (reward, terminated, info["won"], info["gold_answer"]) == (1.0, True, True, gold)
    env.reset(seed=5)
    _, reward, terminated, _, info = env.step(f"finish[{int(gold) + 1}]")
    assert (reward, terminated, info["em"]) == (0.0, True, 0.0)
    assert normalize_number("twelve") is None and normalize_number("1,204") == "1204"
    assert parse_finish(" finish[a [b]] ") == "a [b]" and parse_finish("finish a") is None
    with pytest.raises(ValueError, match="num_steps"):
        gym.make("lmgym/Arith-v0", num_steps=0)


def test_hotpotqa_distractor_shows_ten_paragraphs_and_scores_officially():
    entry = ENVS["lmgym/HotPotQA-Distractor-v0"]
    if testing.unavailable_reason(entry):
        pytest.skip(testing.unavailable_reason(entry))
    env = gym.make("lmgym/HotPotQA-Distractor-v0")
    assert env.unwrapped.num_tasks == 100
    observation, info = env.reset(seed=0, options={"task_index": 0})
    lines = observation.splitlines()
    assert len(lines) == 11 and lines[-1] == f"Question: {info['task']}"
    gold = info["expert_action"][len("finish["):-1]
    _, reward, terminated, _, info = env.step(f"finish[The {gold}!]")  # articles and punctuation normalised away
    assert reward == 1.0 and info["em"] == 1.0 and info["f1"] == 1.0
    env.reset(seed=0, options={"task_index": 0})
    words = gold.split()
    if len(words) > 1:
        info = env.step(f"finish[{words[0]}]")[4]
        assert info["em"] == 0.0 and 0 < info["f1"] < 1 and info["precision"] == 1.0


def test_gen_twin_has_the_same_layout_without_data():
    env = gym.make("lmgym/HotPotQA-Distractor-Gen-v0")
    observation, info = env.reset(seed=1)
    assert len(observation.splitlines()) == 11  # two supporting pages and eight distractors, then the question
    for line in info["expert_reasoning"].split(". ")[:-1]:  # supporting sentences are quoted from the observation
        assert line.rstrip(".") in observation
    assert env.step(info["expert_action"])[1] == 1.0
