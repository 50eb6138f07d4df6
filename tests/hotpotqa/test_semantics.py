"""ReAct's Wikipedia-env semantics on the real questions, checked against exact strings.

Expected pages are read straight from the official distractor file here, independently of
the env's loader. Question 0 of that file asks about VIVA Media (answer: Gesellschaft mit
beschränkter Haftung).
"""

import ast
import json
import os
from pathlib import Path

import gymnasium as gym
import pytest

import lmgym  # noqa: F401

if not os.environ.get("LMGYM_DATA"):
    pytest.skip("LMGYM_DATA is not set: the HotPotQA files are needed", allow_module_level=True)

from lmgym.envs.hotpotqa.corpus import split_sentences  # noqa: E402
from lmgym.envs.hotpotqa.env import HotPotQAEnv  # noqa: E402

DATA = Path(os.environ["LMGYM_DATA"]) / "hotpotqa"


@pytest.fixture(scope="module")
def official():
    return json.loads((DATA / "hotpot_dev_distractor_sample100.json").read_text(encoding="utf-8"))


@pytest.fixture()
def env():
    env = HotPotQAEnv(source="distractor")
    env.reset(seed=0, options={"task_index": 0})
    return env


def page(official, title, question=0):
    sentences = dict(official[question]["context"])[title]
    return [s.strip() for s in sentences if s.strip()]


def test_reset_shows_the_question(official):
    env = HotPotQAEnv(source="distractor")
    observation, info = env.reset(seed=0, options={"task_index": 0})
    assert observation == f"Question: {official[0]['question']}"
    assert info["task"] == official[0]["question"] and info["question_type"] == "bridge"
    titles = [t for t, _ in official[0]["context"]]
    assert sorted(f"search[{t}]" for t in titles) == [a for a in info["admissible_actions"] if a.startswith("search[")]


def test_search_shows_first_five_sentences_of_exact_title_any_case(env, official):
    observation, reward, terminated, truncated, info = env.step("search[viva MEDIA]")
    assert observation == " ".join(page(official, "VIVA Media")[:5])
    assert (reward, terminated, info["action_valid"]) == (0.0, False, True)
    # A page longer than five sentences is cut at five.
    k, title = next((k, t) for k, q in enumerate(official) for t, _ in q["context"] if len(page(official, t, k)) > 5)
    env.reset(seed=0, options={"task_index": k})
    assert env.step(f"Search[{title}]")[0] == " ".join(page(official, title, k)[:5])


def test_failed_search_lists_five_similar_titles(env, official):
    observation = env.step("search[Viva Medai]")[0]
    prefix = "Could not find Viva Medai. Similar: "
    assert observation.startswith(prefix) and observation.endswith(".")
    similar = ast.literal_eval(observation[len(prefix):-1])
    titles = {t for t, _ in official[0]["context"]}
    assert len(similar) == 5 and set(similar) <= titles and "VIVA Media" in similar
    info = env.step("think[ok]")[4]
    assert {f"search[{t}]" for t in similar} <= set(info["admissible_actions"])


def test_lookup_walks_the_last_page_then_no_more_results(env, official):
    assert env.step("lookup[viva]")[0] == "No more results."  # no page yet
    env.step("search[VIVA Media]")
    hits = [s for s in page(official, "VIVA Media") if "viva" in s.lower()]
    assert len(hits) == 3
    for i, sentence in enumerate(hits, 1):
        assert env.step("lookup[viva]")[0] == f"(Result {i} / 3) {sentence}"
    assert env.step("lookup[viva]")[0] == "No more results."
    assert env.step("lookup[viva]")[0] == "No more results."
    # A new keyword restarts; a failed search keeps the last page; a found page resets lookup.
    assert env.step("lookup[2004]")[0].startswith("(Result 1 / 2) ")
    env.step("search[No Such Page At All]")
    assert env.step("lookup[2004]")[0].startswith("(Result 2 / 2) ")
    env.step("search[VIVA Media]")
    assert env.step("lookup[2004]")[0].startswith("(Result 1 / 2) ")


def test_think_invalid_and_finish(env):
    observation, reward, terminated, _, info = env.step("think[I should search VIVA Media.]")
    assert (observation, reward, terminated, info["action_valid"]) == ("Nice thought.", 0.0, False, True)
    for junk in ("hello", "search VIVA Media", "search[]", "lookup[]", "lookup[  ]", "jump[VIVA Media]", ""):
        observation, _, terminated, _, info = env.step(junk)
        assert observation == f"Invalid action: {junk}" and not info["action_valid"] and not terminated
    assert env.unwrapped.tools.lookup("") == "Invalid action: lookup[]"
    # A huge invalid action is echoed cut at 80 characters, as WebShop does.
    observation, _, _, _, info = env.step("x" * 1_000_000)
    assert observation == "Invalid action: " + "x" * 80 + "..." and not info["action_valid"]
    observation, reward, terminated, _, info = env.step("finish[Gesellschaft mit beschränkter Haftung.]")
    assert (observation, reward, terminated, info["won"]) == ("Episode finished, reward = 1", 1.0, True, True)
    assert (info["em"], info["f1"], info["precision"], info["recall"]) == (1.0, 1.0, 1.0, 1.0)
    assert info["gold_answer"] == "Gesellschaft mit beschränkter Haftung"


def test_partial_answer_scores_f1_without_reward(env):
    observation, reward, terminated, _, info = env.step("finish[Haftung]")
    assert (observation, reward, terminated, info["won"]) == ("Episode finished, reward = 0", 0.0, True, False)
    assert info["answer"] == "Haftung"
    assert (info["em"], info["precision"], info["recall"]) == (0.0, 1.0, 0.25)
    assert info["f1"] == pytest.approx(0.4)


def test_step_limit_is_reacts_seven_and_configurable():
    env = gym.make("lmgym/HotPotQA-v0")
    env.reset(seed=0)
    ends = [env.step("think[x]")[3] for _ in range(7)]
    assert ends == [False] * 6 + [True]
    env = gym.make("lmgym/HotPotQA-v0", max_episode_steps=3)
    env.reset(seed=0)
    assert [env.step("think[x]")[3] for _ in range(3)] == [False, False, True]


def test_passages_mode_returns_top_k_like_search_r1(official):
    env = HotPotQAEnv(source="distractor", search_mode="passages", top_k=2)
    env.reset(seed=0, options={"task_index": 0})
    observation = env.step("search[VIVA Media music television network Germany]")[0]
    lines = observation.split("\n")
    assert len(lines) == 2 and lines[0] == f"Doc 1(Title: VIVA Media) {' '.join(page(official, 'VIVA Media'))}"
    assert lines[1].startswith("Doc 2(Title: ")
    assert env.step("lookup[Viacom]")[0].startswith("(Result 1 / ")  # lookup walks the passages shown


def test_all_pages_corpus_reaches_other_questions_pages(official):
    env = HotPotQAEnv(source="distractor", corpus="all")
    _, info = env.reset(seed=0, options={"task_index": 0})
    other_title = official[1]["context"][0][0]
    assert other_title not in {t for t, _ in official[0]["context"]}
    assert env.step(f"search[{other_title}]")[0] == " ".join(page(official, other_title, question=1)[:5])
    assert len([a for a in info["admissible_actions"] if a.startswith("search[")]) == 5


def test_ircot_layout_is_split_on_double_spaces():
    assert split_sentences("One here.  Two there.  Three.") == ("One here.", "Two there.", "Three.")
    assert split_sentences("A single sentence. With a period inside.") == ("A single sentence. With a period inside.",)
    env = HotPotQAEnv(source="ircot")
    assert env.num_tasks == 500
    assert HotPotQAEnv(source="both").num_tasks == 588  # 100 + 500 - 12 shared ids


def test_expert_wins_every_distractor_question_and_reads_its_answer_on_the_way():
    from lmgym.agents import ExpertAgent, run_episode
    from lmgym.envs.hotpotqa.scoring import normalize_answer

    env = gym.make("lmgym/HotPotQA-v0", source="distractor")
    episodes = [run_episode(env, ExpertAgent(), seed=k, options={"task_index": k}) for k in range(100)]
    assert all(e.won for e in episodes) and max(e.length for e in episodes) <= 4
    # The plan follows the supporting facts: the gold answer is in what the expert read.
    read = 0
    answers = [json.loads(e.steps[-1].info_json)["gold_answer"] for e in episodes]
    spans = [(e, a) for e, a in zip(episodes, answers) if normalize_answer(a) not in ("yes", "no")]
    for episode, answer in spans:
        text = normalize_answer(" ".join(s.observation for s in episode.steps) + " " + episode.final_observation)
        read += f" {normalize_answer(answer)} " in f" {text} "
    assert read >= 0.95 * len(spans)


def test_missing_data_names_the_variable(monkeypatch, tmp_path):
    from lmgym.data import DataNotFoundError

    monkeypatch.setenv("LMGYM_DATA", str(tmp_path))
    with pytest.raises(DataNotFoundError, match="LMGYM_DATA"):
        HotPotQAEnv(source="distractor")
