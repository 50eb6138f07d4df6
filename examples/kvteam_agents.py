"""Four teams on one backbone answer arithmetic word problems: single, TextMAS, LatentMAS, DiffMAS.

Each is a registered agent (`lmgym.agents.kvteam`) that reads the question and answers with
``finish[answer]``. The backbone is the tiny arithmetic model installed by
``examples/train_kvteam.py --install`` (``arith-ar``), or ``--backbone smollm2``; DiffMAS runs
with the Solver's LoRA installed beside it (``arith-diffmas-stop``; on SmolLM2 train one first
with ``python -m lmgym.training.kvteam_sft --backbone smollm2 ...``).

    python examples/kvteam_agents.py --episodes 5

Smoke test: --episodes 1 --latent-steps 2
"""

import argparse
import json

import gymnasium as gym

import lmgym  # noqa: F401  (registers the envs)
from lmgym.agents.registry import make_agent
from lmgym.agents.runner import run_episode

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--env", default="lmgym/Arith-v0")
parser.add_argument("--backbone", default="arith-ar")
parser.add_argument("--adapter", default="arith-diffmas-stop", help="DiffMAS adapter folder or installed name ('' skips it)")
parser.add_argument("--episodes", type=int, default=5)
parser.add_argument("--latent-steps", type=int, default=10)
args = parser.parse_args()

env = gym.make(args.env)
agents = {name: make_agent(name, backbone=args.backbone, latent_steps=args.latent_steps)
          for name in ("single", "textmas", "latentmas")}
if args.adapter:
    agents["diffmas"] = make_agent("diffmas", backbone=args.backbone, adapter=args.adapter,
                                   latent_steps=args.latent_steps)
for seed in range(args.episodes):
    print(env.reset(seed=seed)[0])
    for name, agent in agents.items():
        episode = run_episode(env, agent, seed=seed, env_id=args.env)
        step = episode.steps[0]
        extra = json.loads(step.agent_json)
        print(f"  {name:9s} {step.action:16s} won={episode.won!s:5s} {step.seconds:5.2f} s  "
              f"{extra['generated_tokens']} tokens generated, trace {extra['trace_bytes'] / 1024:.0f} KiB")
