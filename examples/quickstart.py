"""Step an lmgym environment: the README's first example.

Smoke test: --episodes 1
"""

import argparse

import gymnasium as gym

import lmgym  # noqa: F401  registers the lmgym/... ids

parser = argparse.ArgumentParser()
parser.add_argument("--env-id", default="lmgym/KeyDoor-v0")
parser.add_argument("--episodes", type=int, default=3)
args = parser.parse_args()

env = gym.make(args.env_id)
for seed in range(args.episodes):
    observation, info = env.reset(seed=seed)
    print(f"--- seed {seed}: {info['task']}")
    done = False
    while not done:
        action = info["expert_action"]  # or any text in the env's grammar
        observation, reward, terminated, truncated, info = env.step(action)
        print(f"> {action}\n{observation}")
        done = terminated or truncated
    print(f"won={info['won']} reward={reward}")
