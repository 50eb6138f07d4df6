"""The test kit for lmgym environments, shipped with the package (as PettingZoo ships its own).

Anyone adding an env runs these checks on its id; lmgym's own test matrix
(tests/test_env_matrix.py) runs them over every registered id. Each check raises
AssertionError with a message that says what broke.
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import subprocess
import sys
import warnings
from typing import Any, Sequence

import gymnasium as gym
import numpy as np

from lmgym.envs.core import INFO_KEYS
from lmgym.envs.registry import unavailable_reason  # noqa: F401  the kit's skip reason (tests call testing.unavailable_reason)

#: Actions no env may raise on: empty, huge, unicode, brackets, control characters.
JUNK_ACTIONS: tuple[str, ...] = (
    "", " ", "\n", "x" * 10_000, "search[", "click[]]", "[[[]]]", "finish[]", "go", "take",
    "ünïcødé ✓ 漢字 🙂", "\x00\x01\x1b[31m\x7f", "\t\r\n", "None", "0", "-1", "move to to",
    "put   in/on", "search[" + "a" * 5000 + "]", "lookup[\x00]",
)


def check_info_contract(info: dict[str, Any]) -> None:
    for key in INFO_KEYS:
        assert key in info, f"info lacks {key!r}: {sorted(info)}"
    actions = info["admissible_actions"]
    assert isinstance(actions, list) and all(isinstance(a, str) for a in actions), "admissible_actions must be list[str]"
    assert actions == sorted(actions), "admissible_actions must be sorted"
    assert isinstance(info["action_valid"], bool) and isinstance(info["won"], bool)
    assert isinstance(info["task"], str)
    task_id = info["task_id"]
    assert isinstance(task_id, str) and len(task_id) == 64 and set(task_id) <= set("0123456789abcdef"), \
        f"task_id must be 64 lowercase hex digits (a sha256), got {task_id!r}"
    if "expert_action" in info:
        assert isinstance(info["expert_action"], str)


def check_env_api(env_id: str) -> None:
    """Gymnasium's own checker on the unwrapped env, with every warning an error, made with
    ``split="test"``: what evaluation passes by default, so every id must accept it (the
    other checks play the id as made without a split)."""
    from gymnasium.utils.env_checker import check_env

    env = gym.make(env_id, split="test")
    assert env.unwrapped.task_split == "test", f"{env_id}: split='test' reports {env.unwrapped.task_split!r}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)
    env.close()


def _canonical(info: dict[str, Any]) -> str:
    return json.dumps(info, sort_keys=True, default=str, ensure_ascii=False)


def transcript(env_id: str, seed: int, steps: int = 20, action_seed: int | None = None, **kwargs: Any) -> list[str]:
    """Observations, rewards, flags and info of `steps` seeded random admissible actions.

    The action choice uses its own generator seeded with `action_seed` (default: the agent seed of
    `seed`, `lmgym.agents.runner.agent_seed`, as every runner does), so the transcript is a pure
    function of (env, seed). Resets (with seed + 1000 * k) continue the
    walk after an episode ends.
    """
    from lmgym.agents.runner import agent_seed

    env = gym.make(env_id, **kwargs)
    rng = np.random.default_rng(agent_seed(seed) if action_seed is None else action_seed)
    observation, info = env.reset(seed=seed)
    lines = [observation, _canonical(info)]
    episode = 0
    for _ in range(steps):
        actions = info["admissible_actions"] or [""]
        action = actions[int(rng.integers(len(actions)))]
        observation, reward, terminated, truncated, info = env.step(action)
        lines.append(json.dumps([action, observation, float(reward), terminated, truncated]))
        lines.append(_canonical(info))
        if terminated or truncated:
            episode += 1
            observation, info = env.reset(seed=seed + 1000 * episode)
            lines += [observation, _canonical(info)]
    env.close()
    return lines


def _walk_length(env_id: str, steps: int) -> int:
    """`steps`, or fewer when one whole episode and the next reset fit in less: every step of a
    slow env (PromptEdit generates a batch of records per step) costs real time."""
    limit = gym.spec(env_id).max_episode_steps
    return min(steps, limit + 2) if limit else steps


def check_determinism(env_id: str, seed: int = 7, steps: int = 20) -> None:
    steps = _walk_length(env_id, steps)
    first, second = transcript(env_id, seed, steps), transcript(env_id, seed, steps)
    for i, (a, b) in enumerate(zip(first, second)):
        assert a == b, f"{env_id}: same seed diverged at line {i}:\n{a[:300]}\n!=\n{b[:300]}"


def transcript_in_subprocess(env_id: str, seed: int, steps: int, hash_seed: str) -> list[str]:
    code = (
        "import json, sys, lmgym\n"
        "from lmgym.testing import transcript\n"
        f"json.dump(transcript({env_id!r}, {seed}, {steps}), sys.stdout)\n"
    )
    environ = {**os.environ, "PYTHONHASHSEED": hash_seed}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=600)
    assert result.returncode == 0, f"subprocess failed:\n{result.stderr[-3000:]}"
    return json.loads(result.stdout)


def check_cross_process_determinism(env_id: str, seed: int = 11, steps: int = 15) -> None:
    """Two fresh interpreters with different PYTHONHASHSEED give the same transcript."""
    steps = _walk_length(env_id, steps)
    a = transcript_in_subprocess(env_id, seed, steps, "1")
    b = transcript_in_subprocess(env_id, seed, steps, "2")
    assert a == b, f"{env_id}: transcripts differ across processes (PYTHONHASHSEED 1 vs 2)"


def check_seeds_differ(env_id: str, seeds: Sequence[int] = (0, 1, 2, 3, 4), steps: int = 3) -> None:
    """The seed changes the episode: the first observations differ, or, for an env whose start
    is fixed by design (PromptEdit's starting prompt), the first `steps` steps do, with the
    action choices drawn the same way for every seed so only the env's seed differs."""
    env = gym.make(env_id)
    starts = {env.reset(seed=s)[0] for s in seeds}
    env.close()
    if len(starts) == 1:
        walks = {tuple(transcript(env_id, s, steps, action_seed=0)) for s in seeds}
        assert len(walks) > 1, f"{env_id}: seeds {list(seeds)} gave the same first observation and the same {steps} steps"


def check_junk_actions(env_id: str, actions: Sequence[str] = JUNK_ACTIONS, seed: int = 0) -> None:
    """Junk never raises; the env answers with feedback and the contract's info keys, and
    ``task_id`` stays the episode's (every reset here replays the same seed)."""
    env = gym.make(env_id)
    task_id = env.reset(seed=seed)[1]["task_id"]
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        assert isinstance(observation, str), f"{env_id}: non-str observation for {action[:40]!r}"
        check_info_contract(info)
        assert info["task_id"] == task_id, f"{env_id}: task_id changed within an episode (after {action[:40]!r})"
        if terminated or truncated:
            env.reset(seed=seed)
    env.close()


def check_pickle(env_id: str, seed: int = 3, steps: int = 5) -> None:
    """A pickled env mid-episode continues exactly as the original."""
    env = gym.make(env_id)
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    for _ in range(steps):
        actions = info["admissible_actions"] or [""]
        _, _, terminated, truncated, info = env.step(actions[int(rng.integers(len(actions)))])
        if terminated or truncated:
            _, info = env.reset(seed=seed)
    clone = pickle.loads(pickle.dumps(env))
    actions = info["admissible_actions"] or [""]
    action = actions[int(rng.integers(len(actions)))]
    a, b = env.step(action), clone.step(action)
    assert a[0] == b[0] and a[1:4] == b[1:4] and _canonical(a[4]) == _canonical(b[4]), f"{env_id}: clone diverged"
    env.close()
    clone.close()


def make_registered(env_id: str) -> gym.Env:
    """`gym.make` by reference to this module, so a fresh worker process imports lmgym (and
    registers its ids) before making the env."""
    return gym.make(env_id)


def check_vector_envs(env_id: str, num_envs: int = 2, steps: int = 3) -> None:
    """SyncVectorEnv and AsyncVectorEnv(shared_memory=False) step with admissible actions.

    The async workers start from a fork server, not a fork of this process: an env that runs a
    torch model (PromptEdit's generator) deadlocks in a child forked from a process whose torch
    thread pool is already running (measured: PromptEdit-SuperNI's reset never returned after a
    matrix product in the parent; with ``context="forkserver"`` it took 10 s)."""
    for make_vector in (
        lambda fns: gym.vector.SyncVectorEnv(fns),
        lambda fns: gym.vector.AsyncVectorEnv(fns, shared_memory=False, context="forkserver"),
    ):
        vec = make_vector([functools.partial(make_registered, env_id) for _ in range(num_envs)])
        observations, infos = vec.reset(seed=list(range(num_envs)))
        assert len(observations) == num_envs and all(isinstance(o, str) and o for o in observations)
        for _ in range(steps):
            actions = tuple((infos["admissible_actions"][i] or [""])[0] for i in range(num_envs))
            observations, rewards, terminated, truncated, infos = vec.step(actions)
            assert len(rewards) == num_envs and all(isinstance(o, str) for o in observations)
        vec.close()


def check_task_index(env_id: str) -> None:
    """``options["task_index"]`` outside ``[0, task_index_range)`` or not an integer raises
    ValueError (never a silent wrap); an env without a task list refuses any task_index."""
    env = gym.make(env_id)
    limit = env.unwrapped.task_index_range
    bad = [-1, "0", 1.0, True, None] + ([limit, limit + 7] if limit else [0])
    for value in bad:
        try:
            env.reset(seed=0, options={"task_index": value})
        except ValueError as error:
            assert "task_index" in str(error), f"{env_id}: task_index {value!r} raised an unclear error: {error}"
        else:
            raise AssertionError(f"{env_id}: task_index {value!r} was accepted (range {limit})")
    if limit:
        env.reset(seed=0, options={"task_index": limit - 1})  # the last task is a task
    env.close()


def check_step_before_reset(env_id: str) -> None:
    """`step` before `reset` raises the same clear error in every family (unwrapped too: the
    registered env's OrderEnforcing wrapper would hide a family that does not)."""
    env = gym.make(env_id)
    try:
        env.unwrapped.step("look")
    except gym.error.ResetNeeded as error:
        assert "reset() before step()" in str(error), f"{env_id}: unclear error {error}"
    else:
        raise AssertionError(f"{env_id}: step() before reset() did not raise ResetNeeded")
    env.close()


def expert_success(env_id: str, seeds: Sequence[int]) -> float:
    """Share of `seeds` on which ExpertAgent wins from reset."""
    from lmgym.agents.base import ExpertAgent
    from lmgym.agents.runner import run_episode

    env = gym.make(env_id)
    wins = [run_episode(env, ExpertAgent(), seed=s, env_id=env_id).won for s in seeds]
    env.close()
    return sum(wins) / len(wins)
