"""`WebShopEnv`: the Gymnasium surface, invalid actions, modes, pickling and the catalogue hook."""

import pickle

import gymnasium as gym
import pytest

pytest.importorskip("bm25s", reason="WebShop search needs the webshop extra (bm25s, PyStemmer)")
from webshop_tiny_catalog import tiny_catalog  # noqa: E402

import lmgym  # noqa: E402, F401  registers the ids
from lmgym.data import DataNotFoundError  # noqa: E402
from lmgym.envs.webshop.catalog import load_catalog  # noqa: E402
from lmgym.envs.webshop.env import WebShopEnv  # noqa: E402


class TinyWebShopEnv(WebShopEnv):
    """The hook part B's generated catalogue uses: only `load_catalog` changes."""

    def load_catalog(self):
        return tiny_catalog()


@pytest.fixture(scope="module")
def real_data():
    try:
        load_catalog()
    except DataNotFoundError as error:
        pytest.skip(f"no WebShop data: {error}")


def play(env, actions):
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
    return observation, reward, terminated, truncated, info


def test_reset_shows_the_search_page(real_data):
    env = gym.make("lmgym/WebShop-v0")
    observation, info = env.reset(seed=3)
    assert observation == f"WebShop [SEP] Instruction: [SEP] {info['task']} [SEP] Search"
    assert info["page"] == "search" and info["has_search_bar"] and info["clickables"] == ["search"]
    assert info["admissible_actions"] == [info["expert_action"]] and info["expert_action"].startswith("search[")
    assert env.unwrapped.num_tasks == 500 and env.spec.max_episode_steps == 15
    _, again = env.reset(seed=3)
    assert again["task"] == info["task"]
    _, first = env.reset(options={"task_index": 0})
    assert first["goal_index"] == 0 and first["task"] == env.unwrapped.goals[0]["instruction_text"]


def test_splits_and_goal_sources(real_data):
    assert WebShopEnv(split="eval").num_tasks == 1000
    assert WebShopEnv(split="train").num_tasks == 5410
    human = WebShopEnv(goal_source="human", split="all")
    assert human.num_tasks == 13
    _, info = human.reset(seed=0)
    assert info["task"] in {g["instruction_text"] for g in human.goals}
    with pytest.raises(ValueError, match="empty"):
        WebShopEnv(goal_source="human", split="eval")
    with pytest.raises(ValueError, match="observation_mode"):
        WebShopEnv(observation_mode="pixels")


@pytest.mark.parametrize("action, why", [
    ("buy it", "neither search[keywords] nor click[value]"),
    ("click[buy now]", "not clickable on this page"),
    ("search[]", "needs keywords"),
    ("", "neither"),
])
def test_invalid_actions_change_nothing_and_say_so(action, why):
    env = TinyWebShopEnv(split="all")
    page, _ = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(action)
    assert observation.startswith("Invalid action: ") and why in observation.splitlines()[0]
    assert observation.split("\n", 1)[1] == page
    assert (reward, terminated, truncated, info["action_valid"]) == (0.0, False, False, False)


def test_search_needs_the_search_page_and_clicks_ignore_case():
    env = TinyWebShopEnv(split="all")
    env.reset(seed=0)
    results, _, _, _, info = env.step("search[ceramic mug]")
    assert info["action_valid"] and info["page"] == "search_results" and not info["has_search_bar"]
    assert info["admissible_actions"] == sorted(f"click[{c}]" for c in info["clickables"])
    observation, _, _, _, info = env.step("search[tent]")
    assert not info["action_valid"] and "no search box" in observation
    _, _, _, _, info = env.step("click[NEXT >]")
    assert info["action_valid"] and env.unwrapped.session.page_num == 2


def test_buy_now_rewards_terminates_and_reports(real_data):
    env = gym.make("lmgym/WebShop-v0")
    _, info = env.reset(options={"task_index": 0})
    while "expert_action" in info:
        observation, reward, terminated, truncated, info = env.step(info["expert_action"])
        if terminated:
            break
    assert terminated and info["won"] and reward == 1.0
    assert observation == "Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] 1.0"
    assert info["reward_info"]["r_type"] == 1.0 and info["purchased"]["asin"] == env.unwrapped.session.goal["asin"]
    assert "expert_action" not in info and info["admissible_actions"] == []
    observation, reward, terminated, _, info = env.step("click[back to search]")
    assert observation.startswith("Invalid action: the purchase is made") and terminated and reward == 0.0


def test_time_limit_truncates_without_a_purchase(real_data):
    env = gym.make("lmgym/WebShop-v0")
    env.reset(seed=0)
    _, reward, terminated, truncated, _ = play(env, ["click[nothing]"] * 15)
    assert truncated and not terminated and reward == 0.0


@pytest.mark.parametrize("mode, marker", [("text_rich", "[button] Back to Search [button_]"),
                                           ("html", '<button class="btn" type="submit" name="action"')])
def test_observation_modes(mode, marker):
    env = TinyWebShopEnv(split="all", observation_mode=mode)
    env.reset(seed=0)
    observation, *_ = env.step("search[ceramic mug]")
    assert marker in observation


def test_pickle_mid_episode_continues_identically():
    env = TinyWebShopEnv(split="all")
    env.reset(seed=1)
    env.step("search[ceramic mug number 3]")
    clone = pickle.loads(pickle.dumps(env))
    for action in ("click[b0mug00003]", "click[large]", "click[description]", "click[< prev]"):
        assert env.step(action) == clone.step(action)
    assert clone.session.options == {"size": "large"}


def test_the_catalogue_hook_serves_a_whole_other_shop():
    env = TinyWebShopEnv(split="all")
    assert env.num_tasks == 6 and len(env.catalog) == 26
    wins = 0
    for k in range(env.num_tasks):
        _, info = env.reset(options={"task_index": k})
        for _ in range(15):
            _, reward, terminated, _, info = env.step(info["expert_action"])
            if terminated:
                break
        wins += info["won"]
    assert wins == env.num_tasks


@pytest.mark.parametrize("env_id", ["lmgym/WebShop-Gen-v0", "lmgym/WebShop-v0"])
def test_the_only_admissible_search_is_the_experts_query_as_the_docs_say(env_id):
    # README and docs/webshop.md call the random row "random clicking after a perfect search"
    # because of this; if the search page offers other queries, those sentences must change.
    try:
        env = gym.make(env_id)
    except DataNotFoundError as error:
        pytest.skip(f"no WebShop data: {str(error).splitlines()[0]}")
    for seed in range(5):
        _, info = env.reset(seed=seed)
        assert info["admissible_actions"] == [info["expert_action"]]
        assert info["expert_action"].startswith("search[")
