"""Few-shot demonstrations: solved episodes shown to a model before its own, made once.

A prompt is rendered from demonstrations it is given (`lmgym.react.Demonstration`: a task and
its turns, text only); they come from here:

* `family_demonstrations(prompt, count)`: the family's demonstrator (its `DemonstrationSource`,
  ``lmgym/envs/<family>/prompt.py``: the grounded ``teacher``, KeyDoor's ``expert``) plays
  *training* seeds, from 1,000,000 up, never the ``0..N`` seeds benchmarks evaluate on. Played
  once per process and kept (`play_demonstrations` is cached), not each time a prompt is built.
* `react_paper_demonstrations(folder, task_type, count)`: the ReAct paper's own ALFWorld
  transcripts of a task type (``LMGYM_DATA/alfworld/react_prompts``).
* `demonstration_of(episode)`: any rollout (`lmgym.rollouts.Episode`), e.g. one read from a file,
  for ``LMAgent(demonstrations=[...])``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import gymnasium as gym

from lmgym.agents.registry import make_agent
from lmgym.agents.runner import run_episode
from lmgym.react import Demonstration, DemonstrationSource, ReActPrompt, Turn, format_completion
from lmgym.rollouts import Episode


def demonstration_of(episode: Episode) -> Demonstration:
    """A rollout as a demonstration: its task, and each step's observation and completion."""
    return Demonstration(episode.task, tuple(
        Turn(step.observation, step.completion or format_completion(step.reasoning, step.action)[0])
        for step in episode.steps))


def family_demonstrations(prompt: ReActPrompt, count: int) -> tuple[Demonstration, ...]:
    """`count` demonstrations of the family whose prompt is `prompt` (none for 0)."""
    if count == 0:
        return ()
    if prompt.demonstrations is None:
        raise ValueError(f"family {prompt.family!r} has no few-shot demonstrations; use few_shot=0")
    return play_demonstrations(prompt.demonstrations, count)


@functools.lru_cache(maxsize=None)
def play_demonstrations(source: DemonstrationSource, count: int) -> tuple[Demonstration, ...]:
    """The first `count` episodes that `source.agent` wins within ``source.max_steps`` steps on
    seeds ``source.seeds_from, source.seeds_from + 1, ...`` of the env's train split (short ones
    keep prompts short)."""
    env = gym.make(source.env, split="train")  # demonstrations are training data (docs/panels.md)
    agent = make_agent(source.agent)
    demonstrations: list[Demonstration] = []
    try:
        for seed in range(source.seeds_from, source.seeds_from + 50 * count):
            episode = run_episode(env, agent, seed=seed, env_id=source.env, max_steps=source.max_steps)
            if episode.won and episode.length <= source.max_steps:
                demonstrations.append(demonstration_of(episode))
                if len(demonstrations) == count:
                    return tuple(demonstrations)
    finally:
        env.close()
        agent.close()
    raise RuntimeError(f"{source.agent} won only {len(demonstrations)} of the {source.env} demonstration seeds tried")


#: The ReAct paper's names of the ALFWorld task types in ``alfworld_3prompts.json``.
REACT_PAPER_TASK_NAMES = {
    "pick_and_place_simple": "put", "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat", "pick_cool_then_place_in_recep": "cool",
    "pick_two_obj_and_place": "puttwo", "look_at_obj_in_light": "examine",
}


@functools.lru_cache(maxsize=None)
def react_paper_demonstrations(alfworld_folder: Path, task_type: str, count: int = 2) -> tuple[Demonstration, ...]:
    """The ReAct paper's own ALFWorld few-shot transcripts for `task_type`, in our turn format.

    ``react_prompts/alfworld_3prompts.json`` (ysymyth/ReAct) holds ``react_<type>_<k>``
    transcripts: ``> think: ...`` lines (answered ``OK.``) and ``> command`` lines followed by
    the observation. A thought becomes the ``Thought:`` of the next command; the older
    ``put X in/on Y`` grammar is kept (the env accepts it).
    """
    path = alfworld_folder / "react_prompts" / "alfworld_3prompts.json"
    if not path.exists():
        raise FileNotFoundError(f"the ReAct paper's ALFWorld prompts are not at {path} (ysymyth/ReAct prompts/)")
    prompts = json.loads(path.read_text())
    demonstrations = []
    for k in range(count):
        raw = prompts[f"react_{REACT_PAPER_TASK_NAMES[task_type]}_{k}"].strip().split("\n")
        intro, task_line = raw[0], raw[1]
        turns, thoughts, observation = [], [], intro
        for index, line in enumerate(raw[2:], start=2):
            if line.startswith("> think:"):
                thoughts.append(line.removeprefix("> think:").strip())
            elif line.startswith("> "):
                turns.append(Turn(observation, format_completion(" ".join(thoughts), line[2:].strip())[0]))
                thoughts = []
                observation = raw[index + 1] if index + 1 < len(raw) else ""
        demonstrations.append(Demonstration(task_line.removeprefix("Your task is to: "), tuple(turns)))
    return tuple(demonstrations)
