"""HotPotQA-Gen: seeded, well-formed in the official layout, solvable, harder with the knob."""

import gymnasium as gym
import numpy as np
import pytest

import lmgym  # noqa: F401
from lmgym.agents import ExpertAgent, RandomAgent, run_episode
from lmgym.envs.hotpotqa.gen import DIFFICULTIES, generate_question, official_record

OFFICIAL_KEYS = {"_id", "question", "answer", "type", "level", "supporting_facts", "context"}


def test_same_seed_same_question_different_seeds_differ():
    first, _ = generate_question(np.random.default_rng(7), "medium")
    again, _ = generate_question(np.random.default_rng(7), "medium")
    assert official_record(first) == official_record(again)
    questions = {generate_question(np.random.default_rng(s), "medium")[0].question for s in range(20)}
    assert len(questions) >= 15


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_official_layout_and_supporting_facts(difficulty):
    level = DIFFICULTIES[difficulty]
    for seed in range(30):
        question, _ = generate_question(np.random.default_rng(seed), difficulty)
        record = official_record(question)
        assert set(record) == OFFICIAL_KEYS and record["type"] in ("bridge", "comparison")
        context = dict(record["context"])
        assert len(context) == len(question.hops) + level.num_distractors
        for title, sentence in record["supporting_facts"]:
            assert 0 <= sentence < len(context[title])
        if question.type == "bridge":
            assert 2 <= len(question.hops) <= level.max_hops
            for here, nxt in zip(question.hops, question.hops[1:]):  # each page names the next hop
                assert nxt in " ".join(context[here])
            last_title, last_sentence = record["supporting_facts"][-1]
            assert question.answer in context[last_title][last_sentence]
        else:
            assert question.answer in (*question.hops, "yes", "no")


def test_hard_asks_three_hop_bridges():
    hops = [generate_question(np.random.default_rng(s), "hard")[0] for s in range(30)]
    bridges = [q for q in hops if q.type == "bridge"]
    assert bridges and all(len(q.hops) == 3 for q in bridges)


@pytest.mark.parametrize("env_id", [f"lmgym/HotPotQA-Gen{v}-v0" for v in ("-Easy", "", "-Hard")])
@pytest.mark.parametrize("corpus", ["question", "all"])
def test_expert_solves_every_generated_question(env_id, corpus):
    env = gym.make(env_id, corpus=corpus)
    episodes = [run_episode(env, ExpertAgent(), seed=seed) for seed in range(25)]
    assert all(e.won for e in episodes)
    assert max(e.length for e in episodes) <= 6  # 3 hops: 3 searches, 2 lookups, finish
    assert all(s.action_valid for e in episodes for s in e.steps)


def test_random_agent_rarely_succeeds():
    env = gym.make("lmgym/HotPotQA-Gen-v0")
    wins = sum(run_episode(env, RandomAgent(), seed=seed).won for seed in range(60))
    assert wins < 15  # answers are mostly years and places the random agent cannot name


def test_passages_mode_expert_searches_then_finishes():
    env = gym.make("lmgym/HotPotQA-Gen-v0", corpus="all", search_mode="passages")
    for seed in range(10):
        episode = run_episode(env, ExpertAgent(), seed=seed)
        assert episode.won and not any(s.action.startswith("lookup[") for s in episode.steps)
        assert episode.steps[0].action.startswith("search[")


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="difficulty"):
        gym.make("lmgym/HotPotQA-Gen-v0", difficulty="extreme")
    with pytest.raises(ValueError, match="corpus"):
        gym.make("lmgym/HotPotQA-Gen-v0", corpus="web")
    with pytest.raises(ValueError, match="retriever"):
        gym.make("lmgym/HotPotQA-Gen-v0", retriever="tfidf")
