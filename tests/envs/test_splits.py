"""Splits and task ids: no test task of a procedural twin can be drawn in its train split, the
rules each family documents hold, and a task's id is the same in any process."""

import json
import os
import subprocess
import sys

import gymnasium as gym
import pytest

import lmgym  # noqa: F401  registers the ids
from lmgym.envs.registry import ENVS
from lmgym.envs.splits import hash_split, panel_hash, task_id
from lmgym.testing import unavailable_reason

#: Every procedural twin: 1,000 train-split and 200 test-split tasks (the issue's sizes), drawn
#: as evaluation and training draw them (seeds 0.. through reset). ALFWorld-Gen runs without
#: its expert (the expert is not the task; it costs most of a reset).
TWINS = {
    "lmgym/KeyDoor-v0": {}, "lmgym/Arith-v0": {}, "lmgym/HotPotQA-Gen-v0": {},
    "lmgym/HotPotQA-Distractor-Gen-v0": {}, "lmgym/ALFWorld-Gen-v0": {"expert": False}, "lmgym/WebShop-Gen-v0": {},
}


def _available(env_id):
    reason = unavailable_reason(ENVS[env_id])
    return pytest.param(env_id, marks=[pytest.mark.skip(reason=reason)] if reason else [], id=env_id.split("/")[1])


def task_ids(env_id, split, seeds, **kwargs):
    env = gym.make(env_id, split=split, **kwargs)
    ids = [env.reset(seed=seed)[1]["task_id"] for seed in seeds]
    assert env.unwrapped.task_split == split
    env.close()
    return ids


@pytest.mark.parametrize("env_id", [_available(i) for i in TWINS])
def test_no_test_task_of_a_twin_is_drawn_in_train(env_id):
    kwargs = TWINS[env_id]
    train = task_ids(env_id, "train", range(1000), **kwargs)
    test = task_ids(env_id, "test", range(200), **kwargs)
    assert not set(train) & set(test)
    # Seeds still name tasks within a split: many distinct tasks, not a handful replayed.
    assert len(set(train)) > 400 and len(set(test)) > 100, (len(set(train)), len(set(test)))


@pytest.mark.parametrize("env_id", ["lmgym/KeyDoor-v0", "lmgym/Arith-v0", "lmgym/HotPotQA-Gen-Easy-v0"])
def test_the_hash_rule_puts_each_task_in_its_split_and_all_keeps_the_old_draw(env_id):
    for split in ("train", "dev", "test"):
        assert {hash_split(i) for i in task_ids(env_id, split, range(30))} == {split}
    # "all" (the default) accepts the first draw: the same tasks as an env made without split.
    assert task_ids(env_id, "all", range(30)) == [gym.make(env_id).reset(seed=s)[1]["task_id"] for s in range(30)]


@pytest.mark.skipif(unavailable_reason(ENVS["lmgym/ALFWorld-Gen-v0"]) is not None, reason="needs alfworld")
def test_alfworld_gen_test_is_the_held_out_rooms_and_dev_the_seen_rooms_other_games():
    env = gym.make("lmgym/ALFWorld-Gen-v0", split="test", expert=False)
    _, info = env.reset(seed=0, options={"task_index": 7})
    assert info["game"] == "gen/valid_unseen/seed7"  # test: any game of the unseen rooms, seed k itself
    unseen = gym.make("lmgym/ALFWorld-Gen-Unseen-v0", expert=False)  # registered with split="valid_unseen"
    assert unseen.unwrapped.task_split == "test" and unseen.reset(seed=3)[1]["task_id"] == env.reset(seed=3)[1]["task_id"]
    dev = gym.make("lmgym/ALFWorld-Gen-v0", split="valid_seen", expert=False)
    first = [dev.reset(seed=0, options={"task_index": k})[1] for k in range(5)]
    assert all(i["game"].startswith("gen/train/seed") and hash_split(i["task_id"]) == "dev" for i in first)
    assert [dev.reset(seed=1, options={"task_index": k})[1]["task_id"] for k in range(5)] == [i["task_id"] for i in first]


@pytest.mark.skipif(unavailable_reason(ENVS["lmgym/WebShop-Gen-v0"]) is not None, reason="needs the search modules")
def test_webshop_gen_splits_are_the_original_goal_ranges_of_a_10k_catalogue():
    env = gym.make("lmgym/WebShop-Gen-v0", split="test").unwrapped
    assert (env.num_products, env.num_tasks, len(env.goals)) == (10_000, 500, 14_542)
    assert gym.make("lmgym/WebShop-Gen-v0").unwrapped.num_products == 1_000  # "all": v0 as released
    train = gym.make("lmgym/WebShop-Gen-v0", split="train").unwrapped
    assert (train.num_tasks, train.task_indices[0]) == (13_042, 1500)


def test_task_id_is_the_sha256_of_canonical_content():
    assert task_id({"b": [1, "é"], "a": 2}) == task_id({"a": 2, "b": [1, "é"]})
    assert task_id({"a": 2}) != task_id({"a": 3}) and len(task_id({})) == 64
    assert panel_hash(["a", "b"]) != panel_hash(["b", "a"])  # a panel is ordered


_IDS_SCRIPT = """
import json, sys, gymnasium as gym, lmgym
out = {}
for env_id, kwargs in json.loads(sys.argv[1]):
    env = gym.make(env_id, **kwargs)
    out[env_id + json.dumps(kwargs)] = [env.reset(seed=s)[1]["task_id"] for s in range(3)]
print(json.dumps(out))
"""


def test_task_ids_are_equal_across_processes_and_hash_seeds():
    # WebShop-Gen on its 1,000-product catalogue: a 10,000-product one costs seconds per process.
    small = {"lmgym/WebShop-Gen-v0": {"num_products": 1000}}
    cases = [[i, {"split": "test", **TWINS[i], **small.get(i, {})}] for i in TWINS if unavailable_reason(ENVS[i]) is None]
    cases += [[i, {"split": "test"}] for i in ("lmgym/ALFWorld-v0", "lmgym/WebShop-v0", "lmgym/HotPotQA-v0",
                                                 "lmgym/HotPotQA-Distractor-v0") if unavailable_reason(ENVS[i]) is None]
    runs = []
    for hash_seed in ("1", "2"):
        result = subprocess.run([sys.executable, "-c", _IDS_SCRIPT, json.dumps(cases)], capture_output=True, text=True,
                                env={**os.environ, "PYTHONHASHSEED": hash_seed}, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        runs.append(json.loads(result.stdout))
    assert runs[0] == runs[1] and len(runs[0]) == len(cases)
    for env_id, kwargs in cases[:2]:  # and equal to this process's
        rest = {k: v for k, v in kwargs.items() if k != "split"}
        assert runs[0][env_id + json.dumps(kwargs)] == task_ids(env_id, kwargs["split"], range(3), **rest)


@pytest.mark.skipif(unavailable_reason(ENVS["lmgym/HotPotQA-v0"]) is not None, reason="needs LMGYM_DATA/hotpotqa")
def test_hotpotqa_splits_are_its_files_and_the_reading_env_gives_the_same_ids():
    from lmgym.envs.hotpotqa.corpus import load_questions, question_task_id

    test = [question_task_id(q) for q in load_questions("distractor")]
    dev = [question_task_id(q) for q in load_questions("ircot_only")]
    assert (len(set(test)), len(set(dev)), len(set(test) & set(dev))) == (100, 488, 0)
    search = gym.make("lmgym/HotPotQA-v0", split="test")
    reading = gym.make("lmgym/HotPotQA-Distractor-v0")  # made without split: its questions are the test split
    assert reading.unwrapped.task_split == "test"
    options = {"task_index": 4}
    assert search.reset(seed=0, options=options)[1]["task_id"] == reading.reset(seed=0, options=options)[1]["task_id"]
    with pytest.raises(ValueError, match="split or source"):
        gym.make("lmgym/HotPotQA-v0", split="dev", source="ircot")


@pytest.mark.skipif(unavailable_reason(ENVS["lmgym/ALFWorld-v0"]) is not None, reason="needs LMGYM_DATA/alfworld")
def test_alfworld_official_splits_share_no_game():
    from lmgym.envs.alfworld.games import game_paths, game_task_id, load_game

    ids = {split: {game_task_id(load_game(p).data) for p in game_paths(split)} for split in ("train", "dev", "test")}
    assert [len(v) for v in ids.values()] == [711, 140, 134]
    assert not (ids["train"] & ids["dev"] or ids["train"] & ids["test"] or ids["dev"] & ids["test"])
    assert gym.make("lmgym/ALFWorld-v0", split="valid_unseen").unwrapped.task_split == "test"
