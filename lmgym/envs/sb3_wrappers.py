"""Wrappers that turn an lmgym text env into spaces stable-baselines3 can learn from.

SB3 cannot take a ``Text`` observation or a free-text action. Two wrappers fix that, and every
family that enumerates ``info["admissible_actions"]`` works with them unchanged:

* `AdmissibleActions`: the action becomes ``Discrete(max_actions)``, an index into the sorted
  admissible actions of the current step, with ``action_masks()`` for sb3-contrib's
  MaskablePPO (which calls it through ``get_wrapper_attr``). The slots default to the env's
  own bound (``env.unwrapped.max_admissible_actions``), so every admissible action is playable;
  an explicit smaller `max_actions` cuts the list and warns once.
* `TokenIds`: the observation becomes a ``Dict`` of fixed-length token-id arrays (`Box`,
  int64, 0 = padding): ``"task"`` (the goal text), ``"observation"`` (this step's text) and
  ``"actions"`` (one row per admissible-action slot), so a policy can read what each slot says.
  `lmgym.components.sb3.TextFeaturesExtractor` is the matching features extractor.

`TokenEncoder` holds the encoding so an agent outside the wrappers (`lmgym.agents.ppo_agent`)
builds exactly the same arrays from ``(observation, info)``.

Tokens come from `HashTokenizer` by default: lower-cased words and punctuation, each mapped to
``1 + crc32(word) % (vocab_size - 1)``. crc32 (not Python's salted ``hash()``) keeps ids equal
across processes and ``PYTHONHASHSEED``. Any object with ``encode(text)`` returning ids (a
Hugging Face tokenizer) can replace it. No torch here: envs are the bottom layer.
"""

from __future__ import annotations

import re
import warnings
import zlib
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from gymnasium import spaces

PAD_ID = 0
_WORD = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")


class Tokenizer(Protocol):
    def encode(self, text: str) -> Any: ...


class HashTokenizer:
    """Dependency-free deterministic word tokenizer (feature hashing, Weinberger et al. 2009).

    ``encode("Go north.") == [id("go"), id("north"), id(".")]`` with
    ``id(w) = 1 + crc32(w) % (vocab_size - 1)``; id 0 is left for padding. Collisions are
    possible and harmless at our vocabulary sizes (a few hundred words per family).
    """

    def __init__(self, vocab_size: int = 4096):
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
        self.vocab_size = vocab_size

    def encode(self, text: str) -> list[int]:
        return [1 + zlib.crc32(word.encode("utf-8")) % (self.vocab_size - 1) for word in _WORD.findall(text.lower())]


def _ids(tokenizer: Tokenizer, text: str) -> list[int]:
    encoded = tokenizer.encode(text)
    return list(getattr(encoded, "ids", encoded))  # `tokenizers.Tokenizer.encode` returns an Encoding


class TokenEncoder:
    """Encodes ``(observation, info)`` into the `TokenIds` dict of padded id arrays.

    Args:
        max_tokens: length of the ``"observation"`` and ``"task"`` rows (longer text is cut at
            the end: the first sentences of an observation carry the room and the feedback).
        max_actions: number of admissible-action slots (rows of ``"actions"``).
        action_tokens: length of each action row.
        tokenizer: `HashTokenizer` of `vocab_size` when None, else any ``encode(text)`` object.
        vocab_size: upper bound of the ids (the embedding table size of the extractor).
    """

    def __init__(self, max_tokens: int = 64, max_actions: int = 16, action_tokens: int = 8,
                 tokenizer: Tokenizer | None = None, vocab_size: int = 4096):
        self.max_tokens = max_tokens
        self.max_actions = max_actions
        self.action_tokens = action_tokens
        self.vocab_size = vocab_size
        self.tokenizer = tokenizer if tokenizer is not None else HashTokenizer(vocab_size)
        high = vocab_size - 1
        self.observation_space = spaces.Dict({
            "task": spaces.Box(PAD_ID, high, shape=(max_tokens,), dtype=np.int64),
            "observation": spaces.Box(PAD_ID, high, shape=(max_tokens,), dtype=np.int64),
            "actions": spaces.Box(PAD_ID, high, shape=(max_actions, action_tokens), dtype=np.int64),
        })

    def _row(self, text: str, length: int) -> np.ndarray:
        ids = _ids(self.tokenizer, text)[:length]
        if ids and max(ids) >= self.vocab_size:
            raise ValueError(f"tokenizer produced id {max(ids)} >= vocab_size {self.vocab_size}")
        row = np.full(length, PAD_ID, dtype=np.int64)
        row[: len(ids)] = ids
        return row

    def encode(self, observation: str, info: dict[str, Any]) -> dict[str, np.ndarray]:
        actions = np.full((self.max_actions, self.action_tokens), PAD_ID, dtype=np.int64)
        for slot, action in enumerate(info.get("admissible_actions", [])[: self.max_actions]):
            actions[slot] = self._row(action, self.action_tokens)
        return {
            "task": self._row(str(info.get("task", "")), self.max_tokens),
            "observation": self._row(observation, self.max_tokens),
            "actions": actions,
        }


def admissible_slots(env: gym.Env) -> int:
    """How many action slots `env` needs: its ``max_admissible_actions`` (a ValueError naming the
    env when it declares none, e.g. free-form answer envs)."""
    bound = getattr(env.unwrapped, "max_admissible_actions", None)
    if not bound:
        raise ValueError(f"{_env_name(env)} declares no max_admissible_actions; pass max_actions explicitly")
    return int(bound)


def warn_if_cut(owner: Any, actions: list[str], max_actions: int, where: str) -> None:
    """Warn once per `owner` when `actions` do not fit its `max_actions` slots (the rest are unplayable)."""
    if len(actions) > max_actions and not getattr(owner, "_warned_cut", False):
        owner._warned_cut = True
        warnings.warn(f"{where}: {len(actions) - max_actions} of {len(actions)} admissible actions do not fit "
                      f"the {max_actions} action slots and cannot be played (e.g. {actions[max_actions]!r}); "
                      "use more slots (the env's max_admissible_actions)", RuntimeWarning, stacklevel=3)


def _env_name(env: gym.Env) -> str:
    return env.spec.id if env.spec else type(env.unwrapped).__name__


def action_mask(info: dict[str, Any], max_actions: int) -> np.ndarray:
    """``mask[i]`` is True when slot ``i`` holds an admissible action (shape ``(max_actions,)``)."""
    mask = np.zeros(max_actions, dtype=bool)
    mask[: min(len(info.get("admissible_actions", [])), max_actions)] = True
    return mask


class AdmissibleActions(gym.Wrapper):
    """Action ``i`` plays ``info["admissible_actions"][i]`` of the current step.

    The action space is ``Discrete(max_actions)``; `max_actions` defaults to the env's
    ``max_admissible_actions`` (`admissible_slots`). Actions beyond the first `max_actions`
    admissible ones are unreachable: ``info["admissible_truncated"]`` counts them and the first
    cut warns. An index with no action behind it sends an empty command, which the env answers
    with its own invalid-action feedback. The env must enumerate its actions: an empty
    admissible list at reset raises a `ValueError` naming the env.
    """

    def __init__(self, env: gym.Env, max_actions: int | None = None):
        super().__init__(env)
        self.max_actions = admissible_slots(env) if max_actions is None else max_actions
        self.action_space = spaces.Discrete(self.max_actions)
        self._admissible: list[str] = []

    def _remember(self, info: dict[str, Any]) -> dict[str, Any]:
        self._admissible = list(info.get("admissible_actions", []))
        warn_if_cut(self, self._admissible, self.max_actions, f"AdmissibleActions on {_env_name(self.env)}")
        info["admissible_truncated"] = max(0, len(self._admissible) - self.max_actions)
        return info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        observation, info = self.env.reset(seed=seed, options=options)
        if not info.get("admissible_actions"):
            raise ValueError(f"{_env_name(self.env)} lists no info['admissible_actions']; AdmissibleActions "
                             "needs an env that enumerates its actions")
        return observation, self._remember(info)

    def step(self, action):
        index = int(action)
        command = self._admissible[index] if 0 <= index < min(len(self._admissible), self.max_actions) else ""
        observation, reward, terminated, truncated, info = self.env.step(command)
        return observation, reward, terminated, truncated, self._remember(info)

    def action_masks(self) -> np.ndarray:
        return action_mask({"admissible_actions": self._admissible}, self.max_actions)


class TokenIds(gym.Wrapper):
    """Observation text (plus the task and the admissible actions) as token-id arrays.

    A `gym.Wrapper` rather than an ``ObservationWrapper`` because the encoding needs ``info``
    (the task and the admissible actions). See `TokenEncoder` for the arrays and their shapes.
    """

    def __init__(self, env: gym.Env, encoder: TokenEncoder | None = None):
        super().__init__(env)
        try:  # an AdmissibleActions inside sets the slots
            slots = env.get_wrapper_attr("max_actions")
        except AttributeError:
            slots = None
        self.encoder = encoder or TokenEncoder(max_actions=slots or admissible_slots(env))
        if slots is not None and slots != self.encoder.max_actions:
            raise ValueError(f"the encoder has {self.encoder.max_actions} action rows but AdmissibleActions "
                             f"has {slots} slots")
        self.observation_space = self.encoder.observation_space

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        observation, info = self.env.reset(seed=seed, options=options)
        return self.encoder.encode(observation, info), info

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        return self.encoder.encode(observation, info), reward, terminated, truncated, info


def make_sb3_env(env_id: str, encoder: TokenEncoder, env_kwargs: dict[str, Any] | None = None,
                 max_episode_steps: int | None = None) -> gym.Env:
    """``gym.make(env_id)`` wrapped for MaskablePPO: `AdmissibleActions` inside `TokenIds`."""
    make_kwargs = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
    env = gym.make(env_id, **make_kwargs, **(env_kwargs or {}))
    return TokenIds(AdmissibleActions(env, encoder.max_actions), encoder)
