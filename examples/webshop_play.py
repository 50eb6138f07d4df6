"""Shop in WebShop with the expert and a random agent; print a transcript, success and score.

Episode k is the split's goal k (``options={"task_index": k}``), seeded with k, for every
agent, so the comparison is paired. WebShop's success is the share of purchases with reward
1.0; its score is the mean reward x 100. ``--episodes 500`` sweeps the whole test split.
``--env-id lmgym/WebShop-Gen-v0`` shops in a generated catalogue instead (no data).

Needs data: webshop

Smoke test: --episodes 2 --show 1
"""

import argparse
from collections import Counter

import gymnasium as gym

import lmgym  # noqa: F401  registers the lmgym/... ids
from lmgym.agents import ExpertAgent, RandomAgent, run_episode
from lmgym.data import exit_if_data_missing

parser = argparse.ArgumentParser()
parser.add_argument("--env-id", default="lmgym/WebShop-v0")
parser.add_argument("--episodes", type=int, default=20, help="goals of the split to play, from goal 0")
parser.add_argument("--split", default="test", choices=["test", "eval", "train", "all"])
parser.add_argument("--goal-source", default="synthetic", choices=["synthetic", "human"],
                    help="human: the 13 crowd-sourced goals on the 1,000 products (use --split all)")
parser.add_argument("--observation-mode", default="text", choices=["text", "text_rich", "html"])
parser.add_argument("--agents", default="expert,random", help="comma-separated: expert, random")
parser.add_argument("--show", type=int, default=1, help="print the transcripts of this many expert episodes")
args = parser.parse_args()

with exit_if_data_missing():  # one line, not a traceback, without LMGYM_DATA
    env = gym.make(args.env_id, split=args.split, goal_source=args.goal_source, observation_mode=args.observation_mode)
agents = {"expert": ExpertAgent(), "random": RandomAgent()}

for name in args.agents.split(","):
    agent = agents[name]
    rewards, outcomes = [], Counter()
    for k in range(args.episodes):
        episode = run_episode(env, agent, seed=k, env_id=args.env_id, options={"task_index": k})
        rewards.append(episode.return_)
        last = episode.steps[-1]
        # Why an episode fell short: no purchase in the step budget, or which reward term failed.
        if episode.won:
            outcomes["won"] += 1
        elif not last.terminated:
            outcomes["no purchase within the step limit"] += 1
        else:
            outcomes["bought, reward < 1"] += 1
        if name == "expert" and k < args.show:
            print(f"--- goal {k}: {episode.task}")
            for step in episode.steps:
                print(f"  thought: {step.reasoning}\n  action:  {step.action}")
            print(f"  final page: {episode.final_observation[:300]}")
    success = outcomes["won"] / len(rewards)
    score = 100 * sum(rewards) / len(rewards)
    print(f"{name:>6} on {args.split} goals 0-{args.episodes - 1}: success {success:.1%}, score {score:.1f}, "
          f"outcomes {dict(outcomes)}")
