"""Play the reference ladder's fine-tuned SmolLM2 (`smollm2-sft`) beside random on held-out questions.

`LMAgent(model="smollm2-sft")` resolves, per env family, the LoRA adapter that
`python studies/ladder.py --family hotpotqa --rung smollm2-sft` trained on the grounded teacher's
train-split episodes and installed in the zoo (docs/ladder.md); on llama.cpp its first use merges
the adapter into SmolLM2-135M-Instruct once (a cached f16 GGUF). Both agents play the first
``--episodes`` tasks of HotPotQA-Gen's test split (the panel `hotpotqa-gen-test-200`, which the
adapter never trained on), greedy, in one lockstep batch; then the success rates with Wilson
intervals and the paired counts (docs/results/ladder.md has the whole panel: 0.91 [0.86, 0.94]).
``--rung smollm2-rl`` plays that adapter after GRPO instead (0.84 [0.71, 0.92] on the first 50);
``--rung tiny-rl`` the ladder's 0.9M rung after RL, in PyTorch (0.76 [0.63, 0.86] on the first 50, seconds).

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
parser.add_argument("--rung", choices=("smollm2-sft", "smollm2-rl", "tiny-rl"), default="smollm2-sft",
                    help="the ladder model: SmolLM2 after SFT, or after SFT then GRPO; the 0.9M model after RL")
args = parser.parse_args()

seeds = list(range(args.episodes))
on_llamacpp = args.rung.startswith("smollm2")  # a LoRA adapter plays merged on llama.cpp; the tiny model in PyTorch
backend_kwargs = {"threads": args.threads, **({"max_sequences": args.episodes, "max_context": 1024} if on_llamacpp else {})}
agents = {args.rung: LMAgent(model=args.rung, backend="llamacpp" if on_llamacpp else None, batch_size=args.episodes,
                             backend_kwargs=backend_kwargs),
          "random": make_agent("random")}
won = {}
for name, agent in agents.items():
    envs = [gym.make(ENV, split="test") for _ in range(args.episodes if name != "random" else 1)]
    started = time.time()
    episodes = dict(run_episodes(envs, agent, seeds, env_id=ENV))
    won[name] = [episodes[k].won for k in range(args.episodes)]
    if name == args.rung:  # one transcript: what the fine-tuned model writes
        for step in episodes[0].steps:
            print(f"  {step.observation[:100]}\n  " + step.completion.strip().replace("\n", "\n  "))
    low, high = wilson_interval(sum(won[name]), args.episodes)
    print(f"{name}: success {sum(won[name])}/{args.episodes} [{low:.2f}, {high:.2f}] ({time.time() - started:.0f} s)")

only_model = sum(a and not b for a, b in zip(won[args.rung], won["random"]))
only_random = sum(b and not a for a, b in zip(won[args.rung], won["random"]))
print(f"paired: {args.rung} only {only_model}, random only {only_random}, exact McNemar p = "
      f"{mcnemar_exact(only_model, only_random):.3f}")
