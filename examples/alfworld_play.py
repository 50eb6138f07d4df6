"""Play ALFWorld games with the expert and with a random agent, and compare their success.

Episode k of each agent plays game k of the split (``options={"task_index": k}``) with seed k,
so both agents see the same games. The first expert episode is printed as a transcript:
the expert's reasoning line, its action and what the game answers.

Run: python examples/alfworld_play.py --split valid_unseen --episodes 134

Needs data: alfworld

Smoke test: --episodes 2
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import gymnasium as gym

import lmgym  # noqa: F401  registers lmgym/ALFWorld-v0
from lmgym.data import exit_if_data_missing
from lmgym.agents.base import ExpertAgent, RandomAgent
from lmgym.agents.runner import run_episode


@dataclass
class Args:
    split: str = "valid_seen"
    """train, valid_seen or valid_unseen"""
    episodes: int = 10
    """episodes per agent (game k of the split in episode k)"""
    engine: str = "native"
    """native, or textworld (the official engine: needs lmgym[textworld], about 100x slower)"""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in vars(Args()).items():
        parser.add_argument(f"--{name}", type=type(default), default=default)
    return Args(**vars(parser.parse_args()))


if __name__ == "__main__":
    args = parse_args()
    with exit_if_data_missing():  # one line, not a traceback, without LMGYM_DATA
        env = gym.make("lmgym/ALFWorld-v0", split=args.split, engine=args.engine)

    # ---- one expert episode, as a transcript ------------------------------------------
    episode = run_episode(env, ExpertAgent(), seed=0, options={"task_index": 0})
    print(f"Task: {episode.task}\n{episode.steps[0].observation}\n")
    for step, answer in zip(episode.steps, [s.observation for s in episode.steps[1:]] + [episode.final_observation]):
        print(f"  think: {step.reasoning}\n  > {step.action}\n  {answer}")
    print(f"won: {episode.steps[-1].won}, steps: {len(episode.steps)}\n")

    # ---- success rates on the same games ----------------------------------------------
    print("| agent | episodes | success | mean steps |\n| --- | ---: | ---: | ---: |")
    for agent in (ExpertAgent(), RandomAgent()):
        episodes = [run_episode(env, agent, seed=k, options={"task_index": k}) for k in range(args.episodes)]
        wins = sum(e.steps[-1].won for e in episodes)
        steps = sum(len(e.steps) for e in episodes) / len(episodes)
        print(f"| {agent.name} | {len(episodes)} | {wins / len(episodes):.1%} | {steps:.1f} |")
