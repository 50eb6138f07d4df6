"""Play the reference ladder's fine-tuned SmolLM2 (`smollm2-sft`) beside random on held-out questions.

`LMAgent(model="smollm2-sft")` resolves, per env family, the LoRA adapter that
`python studies/ladder.py --family hotpotqa --rung smollm2-sft` trained on the grounded teacher's
train-split episodes and installed in the zoo (docs/ladder.md); on llama.cpp its first use merges
the adapter into SmolLM2-135M-Instruct once (a cached f16 GGUF). Both agents play the first
``--episodes`` tasks of HotPotQA-Gen's test split (the panel `hotpotqa-gen-test-200`, which the
adapter never trained on), greedy, in one lockstep batch; then the success rates with Wilson
intervals and the paired counts (docs/results/ladder.md has the whole panel: 0.91 [0.86, 0.94]).

Smoke test: --episodes 4
"""

import argparse
import time

import gymnasium as gym

import lmgym  # noqa: F401  (registers the envs)
from lmgym.agents.lm import LMAgent
from lmgym.agents.registry import make_agent
from lmgym.agents.runner import run_episodes
from lmgym.stats import mcnemar_exact, wilson_interval

ENV = "lmgym/HotPotQA-Gen-v0"

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--episodes", type=int, default=20, help="the first N test tasks (seeds 0..N-1)")
parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
args = parser.parse_args()

seeds = list(range(args.episodes))
agents = {"smollm2-sft": LMAgent(model="smollm2-sft", backend="llamacpp", batch_size=args.episodes,
                                 backend_kwargs={"threads": args.threads, "max_sequences": args.episodes,
                                                 "max_context": 1024}),
          "random": make_agent("random")}
won = {}
for name, agent in agents.items():
    envs = [gym.make(ENV, split="test") for _ in range(args.episodes if name != "random" else 1)]
    started = time.time()
    episodes = dict(run_episodes(envs, agent, seeds, env_id=ENV))
    won[name] = [episodes[k].won for k in range(args.episodes)]
    if name == "smollm2-sft":  # one transcript: what the fine-tuned model writes
        for step in episodes[0].steps:
            print(f"  {step.observation[:100]}\n  " + step.completion.strip().replace("\n", "\n  "))
    low, high = wilson_interval(sum(won[name]), args.episodes)
    print(f"{name}: success {sum(won[name])}/{args.episodes} [{low:.2f}, {high:.2f}] ({time.time() - started:.0f} s)")

only_sft = sum(a and not b for a, b in zip(won["smollm2-sft"], won["random"]))
only_random = sum(b and not a for a, b in zip(won["smollm2-sft"], won["random"]))
print(f"paired: smollm2-sft only {only_sft}, random only {only_random}, exact McNemar p = "
      f"{mcnemar_exact(only_sft, only_random):.3f}")
