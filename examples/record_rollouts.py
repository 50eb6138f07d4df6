"""Record expert and random episodes as rollout JSON lines and read them back as a table.

The rollout file is what trainers consume (SFT/BC, distillation); each step keeps the
observation, the agent's completion ("Thought: ...\\nAction: ...") and the character spans of
its reasoning and action.

Smoke test: --episodes 2 --out {tmp}/rollouts.jsonl
"""

import argparse
from pathlib import Path

import gymnasium as gym

import lmgym  # noqa: F401
from lmgym.agents import ExpertAgent, RandomAgent, run_episode
from lmgym.rollouts import read_episodes, write_episode

parser = argparse.ArgumentParser()
parser.add_argument("--env-id", default="lmgym/KeyDoor-v0")
parser.add_argument("--episodes", type=int, default=20)
parser.add_argument("--out", default="runs/keydoor_rollouts.jsonl")
args = parser.parse_args()

out = Path(args.out)
out.unlink(missing_ok=True)
env = gym.make(args.env_id)
for agent in (ExpertAgent(), RandomAgent()):
    for seed in range(args.episodes):  # episode k uses seed k for both agents: paired
        write_episode(out, run_episode(env, agent, seed=seed, env_id=args.env_id))

episodes = list(read_episodes(out))
for name in ("expert", "random"):
    mine = [e for e in episodes if e.agent == name]
    print(f"{name:>6}: success {sum(e.won for e in mine)}/{len(mine)}, "
          f"mean steps {sum(e.length for e in mine) / len(mine):.1f}")

step = episodes[0].steps[0]
print("first completion:", repr(step.completion))
for span in step.spans:
    print(f"  [{span.kind}] {step.completion[span.start:span.end]!r}")

# The same file is a Hugging Face dataset:
import datasets  # noqa: E402

table = datasets.load_dataset("json", data_files=str(out), split="train")
print(table)
