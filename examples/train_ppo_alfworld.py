"""Train MaskablePPO on ALFWorld's pick_and_place_simple games and compare it with random.

Training plays the train split's pick_and_place_simple games (lmgym/ALFWorld-v0, official
json_2.1.1 files under LMGYM_DATA); the benchmark then sweeps the valid_seen games of the same
task type once each (task k in episode k), the trained policy beside the random agent on the
same games and seeds. The policy is reactive (it reads the task, the current observation and
the admissible actions, with no memory), which is the classic DRRN-style RL baseline.
Measured with the defaults (docs/notes/benchmarks.md): 3/35 valid_seen games vs random's 1/35,
intervals overlapping: a few minutes of PPO do not learn ALFWorld.

    LMGYM_DATA=/path/to/data python examples/train_ppo_alfworld.py --steps 60000 --out runs/ppo-alfworld

Smoke test: --steps 256 --episodes 2 --out {tmp}/ppo-alfworld
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import gymnasium as gym

import lmgym  # noqa: F401  registers the ids
from lmgym.benchmarks.report import summary_markdown
from lmgym.benchmarks.runner import run_benchmark
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec
from lmgym.training.ppo import PPOConfig, train

TASK_TYPES = ["pick_and_place_simple"]

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--steps", type=int, default=60_000, help="training env steps")
parser.add_argument("--episodes", type=int, default=0, help="valid_seen games to evaluate (0: all of them)")
parser.add_argument("--out", default="runs/ppo-alfworld")


def main() -> None:
    args = parser.parse_args()
    out = Path(args.out)

    # ---- train on the train split; 50 slots hold every admissible list seen (at most 39) ------
    config = PPOConfig(env_id="lmgym/ALFWorld-v0", env_kwargs=json.dumps({"task_types": TASK_TYPES}),
                       steps=args.steps, max_actions=50, max_tokens=96, n_steps=256, gamma=0.99,
                       ent_coef=0.01, learning_rate=1e-3,
                       out=str(out / "train"), quiet=True, eval_episodes=0, checkpoint_every=0)
    result = train(config)
    print(f"trained {result['steps']} steps in {result['train_seconds']} s ({result['training_episodes']} episodes)")

    # ---- evaluate on valid_seen: every pick_and_place_simple game once, paired agents --------
    eval_kwargs = {"split": "valid_seen", "task_types": TASK_TYPES}
    games = gym.make("lmgym/ALFWorld-v0", **eval_kwargs).unwrapped.num_tasks
    spec = BenchmarkSpec(
        id="ppo-alfworld",
        envs=(EnvSpec("lmgym/ALFWorld-v0", eval_kwargs, sweep=True, episodes=min(args.episodes or games, games),
                      label="ALFWorld valid_seen pick_and_place_simple"),),
        agents=(AgentSpec("ppo", kwargs={"path": str(out / "train" / "model.zip")}), AgentSpec("random")),
        episodes=1,
    )
    print(summary_markdown(run_benchmark(spec, out / "bench", quiet=True)))
    print(f"learning curve: {out / 'train' / 'learning_curve.png'}")


if __name__ == "__main__":
    main()
