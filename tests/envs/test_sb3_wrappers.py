"""The SB3 wrappers: admissible actions as Discrete + masks, text as token ids."""

import os
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest

from lmgym.envs.core import TextEnv
from lmgym.envs.splits import task_id
from lmgym.envs.sb3_wrappers import (AdmissibleActions, HashTokenizer, TokenEncoder, TokenIds, action_mask,
                                     make_sb3_env)

ENCODER = TokenEncoder(max_tokens=32, max_actions=8, action_tokens=4, vocab_size=512)


def test_hash_tokenizer_is_the_same_in_every_process():
    text = "You take the Brass key. Exits: north, east."
    ids = HashTokenizer(512).encode(text)
    assert len(ids) == 12 and all(1 <= i < 512 for i in ids)
    assert ids[2] == HashTokenizer(512).encode("THE")[0]  # case-insensitive words
    code = f"from lmgym.envs.sb3_wrappers import HashTokenizer; print(HashTokenizer(512).encode({text!r}))"
    # This process runs under a random PYTHONHASHSEED; the child under a fixed one.
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "1"}).stdout
    assert out.strip() == str(ids)


def test_wrapped_env_passes_sb3_env_checker():
    from stable_baselines3.common.env_checker import check_env

    env = make_sb3_env("lmgym/KeyDoor-v0", ENCODER)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any checker warning fails the test, except:
        # the (N, L) action-text rows are read by our own extractor, not flattened by SB3
        warnings.filterwarnings("ignore", message="Your observation actions has an unconventional shape")
        check_env(env, warn=True)


def test_index_plays_that_admissible_action_and_masks_match():
    plain = gym.make("lmgym/KeyDoor-v0")
    wrapped = make_sb3_env("lmgym/KeyDoor-v0", ENCODER)
    _, info = plain.reset(seed=3)
    obs, wrapped_info = wrapped.reset(seed=3)
    assert wrapped.observation_space.contains(obs)
    for _ in range(6):
        actions = info["admissible_actions"]
        mask = wrapped.get_wrapper_attr("action_masks")()
        assert mask.tolist() == [i < len(actions) for i in range(8)]
        index = len(actions) - 1
        expected = plain.step(actions[index])
        obs, reward, terminated, truncated, wrapped_info = wrapped.step(index)
        info = expected[4]
        assert wrapped_info["admissible_actions"] == info["admissible_actions"] and reward == expected[1]
        np.testing.assert_array_equal(obs["observation"], ENCODER.encode(expected[0], info)["observation"])
        if terminated or truncated:
            break


def test_masked_index_gets_the_env_feedback_not_an_exception():
    env = make_sb3_env("lmgym/KeyDoor-v0", ENCODER)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(7)  # KeyDoor never lists 8 actions at the start
    assert info["action_valid"] is False and reward == 0.0 and not terminated


def test_encoding_pads_truncates_and_fills_action_slots():
    info = {"task": "find the key", "admissible_actions": [f"go to shelf {i}" for i in range(10)]}
    encoded = ENCODER.encode("word " * 100, info)
    assert encoded["observation"].shape == (32,) and (encoded["observation"] > 0).all()  # cut at 32
    assert (encoded["task"][:3] > 0).all() and (encoded["task"][3:] == 0).all()  # padded with 0
    assert encoded["actions"].shape == (8, 4) and (encoded["actions"] > 0).all()  # 8 of 10 slots, 4 tokens
    assert action_mask(info, 8).all()


def test_too_many_actions_are_counted():
    class ManyActions(TextEnv):
        def _reset(self, options):
            self.task_id = task_id("room")
            return "room", {"task": "t", "admissible_actions": [f"a{i}" for i in range(12)]}

        def _step(self, action):
            return "room", 0.0, False, {"task": "t", "action_valid": True, "admissible_actions": [f"a{i}" for i in range(12)]}

    with pytest.warns(RuntimeWarning, match="4 of 12 admissible actions do not fit the 8 action slots"):
        _, info = AdmissibleActions(ManyActions(), max_actions=8).reset(seed=0)
    assert info["admissible_truncated"] == 4


def test_env_without_admissible_actions_gets_a_clear_error():
    class FreeForm(TextEnv):
        def _reset(self, options):
            self.task_id = task_id("answer")
            return "ask me", {"task": "answer"}

    with pytest.raises(ValueError, match="declares no max_admissible_actions; pass max_actions"):
        AdmissibleActions(FreeForm())
    with pytest.raises(ValueError, match="lists no info\\['admissible_actions'\\]"):
        AdmissibleActions(FreeForm(), max_actions=4).reset(seed=0)


@pytest.mark.parametrize("env_id,kwargs", [("lmgym/KeyDoor-Large-v0", {}),
                                           ("lmgym/ALFWorld-Gen-v0", {"num_receptacles": 6, "num_distractors": 4})])
def test_default_slots_hold_every_admissible_action_of_the_env(env_id, kwargs):
    # The slots are the env's own bound, so random walks never meet a list that does not fit
    # (a fixed 16 cut ALFWorld's lists and made expert actions unplayable, silently).
    if "ALFWorld" in env_id:
        pytest.importorskip("alfworld")
    env = AdmissibleActions(gym.make(env_id, **kwargs))
    assert env.action_space.n == env.unwrapped.max_admissible_actions
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a cut would warn
        for seed in range(5):
            _, info = env.reset(seed=seed)
            for _ in range(40):
                assert info["admissible_truncated"] == 0 and env.action_masks().sum() == len(info["admissible_actions"])
                _, _, terminated, truncated, info = env.step(int(rng.integers(len(info["admissible_actions"]))))
                if terminated or truncated:
                    break


def test_too_few_slots_warn_once():
    env = AdmissibleActions(gym.make("lmgym/KeyDoor-Large-v0"), max_actions=2)
    with pytest.warns(RuntimeWarning, match="admissible actions do not fit the 2 action slots"):
        env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env.step(0)  # warned already: silent


def test_any_tokenizer_with_encode_works():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    hf = tokenizers.Tokenizer(WordLevel({"[UNK]": 1, "go": 2, "north": 3}, unk_token="[UNK]"))
    hf.pre_tokenizer = Whitespace()
    encoder = TokenEncoder(max_tokens=4, max_actions=2, action_tokens=2, tokenizer=hf, vocab_size=4)
    encoded = encoder.encode("go north now", {"task": "", "admissible_actions": ["go north"]})
    assert encoded["observation"].tolist() == [2, 3, 1, 0]
    assert encoded["actions"].tolist() == [[2, 3], [0, 0]]
    env = TokenIds(AdmissibleActions(gym.make("lmgym/KeyDoor-v0"), 2), encoder)
    assert env.observation_space["actions"].shape == (2, 2)
