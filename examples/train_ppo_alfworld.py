"""Train MaskablePPO on ALFWorld's pick_and_place_simple games through a curriculum; compare with random.

Three short runs in sequence, each starting from the previous policy (`PPOConfig.init_from`):

1. ALFWorld-Gen households with 4 receptacles, none closed, no distractors (random wins ~30%),
2. ALFWorld-Gen households with 8 receptacles, closed ones, 5 distractors (random wins ~2-8%),
3. the official train-split pick_and_place_simple games (lmgym/ALFWorld-v0, random wins ~1-3%).

Rewards are the env's own (1 on winning, else 0) at every stage; only the game source changes.
The benchmark then sweeps the valid_seen games of the same task type once each (task k in
episode k), the trained policy beside the random agent on the same games and seeds. Measured
(docs/notes/benchmarks.md): 20,000 steps, 9.9 minutes in all at load 6-13 on 2 shared cores,
25/35 valid_seen games vs random's 0/35 (training seed 0); 8,000 steps on the official games
alone won 0/50 in an earlier run.

    LMGYM_DATA=/path/to/data python examples/train_ppo_alfworld.py --steps 20000 --out runs/ppo-alfworld

Needs data: alfworld

Smoke test: --steps 256 --episodes 2 --out {tmp}/ppo-alfworld
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import gymnasium as gym

import lmgym  # noqa: F401  registers the ids
from lmgym.benchmarks.report import summary_markdown
from lmgym.benchmarks.runner import run_benchmark
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec
from lmgym.data import exit_if_data_missing
from lmgym.envs.sb3_wrappers import admissible_slots
from lmgym.training.ppo import PPOConfig, plot_learning_curve, train

TASK_TYPES = ["pick_and_place_simple"]
# (label, env id, gym.make kwargs, share of the steps)
CURRICULUM = [
    ("Gen: 4 recept., open", "lmgym/ALFWorld-Gen-v0",
     {"task_types": TASK_TYPES, "num_receptacles": 4, "closed_prob": 0.0, "num_distractors": 0}, 0.3),
    ("Gen: 8 recept., closed", "lmgym/ALFWorld-Gen-v0",
     {"task_types": TASK_TYPES, "num_receptacles": 8, "num_distractors": 5}, 0.3),
    ("official train games", "lmgym/ALFWorld-v0", {"task_types": TASK_TYPES}, 0.4),
]

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--steps", type=int, default=20_000, help="training env steps, all stages together")
parser.add_argument("--episodes", type=int, default=0, help="valid_seen games to evaluate (0: all of them)")
parser.add_argument("--out", default="runs/ppo-alfworld")


def main() -> None:
    args = parser.parse_args()
    out = Path(args.out)
    # Stage 3 and the evaluation play the official games: without them, stop before training.
    eval_kwargs = {"split": "valid_seen", "task_types": TASK_TYPES}
    with exit_if_data_missing():
        games = gym.make("lmgym/ALFWorld-v0", **eval_kwargs).unwrapped.num_tasks

    # ---- train: one short run per stage, each from the last one's policy ----------------------
    # One encoder for every stage and the evaluation: as many action slots as the largest
    # admissible list any of their games can show, so no action is unplayable.
    slots = max(admissible_slots(gym.make(env_id, **env_kwargs))
                for _, env_id, env_kwargs, _ in CURRICULUM + [("eval", "lmgym/ALFWorld-v0", eval_kwargs, 0)])
    # gamma 0.99 over 50-step episodes.
    curve, stages, offset, model_path = [], [], 0, None
    for k, (label, env_id, env_kwargs, share) in enumerate(CURRICULUM):
        stage_out = out / f"stage{k}"
        config = PPOConfig(env_id=env_id, env_kwargs=json.dumps(env_kwargs), steps=max(int(args.steps * share), 1),
                           max_actions=slots, max_tokens=96, n_steps=128, gamma=0.99, ent_coef=0.01,
                           learning_rate=1e-3, init_from=model_path, out=str(stage_out), quiet=True,
                           progress_every=max(args.steps // 20, 1), eval_episodes=0, checkpoint_every=0)
        print(f"stage {k} ({label}): training {config.steps} steps", flush=True)
        result = train(config)
        print(f"stage {k} ({label}): {slots} action slots, {result['steps']} steps in {result['train_seconds']} s, "
              f"{result['training_episodes']} episodes")
        with open(stage_out / "learning_curve.csv") as f:
            rows = [{**r, "timestep": int(r["timestep"]) + offset, "won": r["won"] == "True"}
                    for r in csv.DictReader(f)]
        curve += rows
        stages.append((offset, label))
        offset += result["timesteps"]
        model_path = str(stage_out / "model.zip")

    # ---- evaluate on valid_seen: every pick_and_place_simple game once, paired agents --------
    spec = BenchmarkSpec(
        id="ppo-alfworld",
        envs=(EnvSpec("lmgym/ALFWorld-v0", eval_kwargs, sweep=True, episodes=min(args.episodes or games, games),
                      label="ALFWorld valid_seen pick_and_place_simple"),),
        agents=(AgentSpec("ppo", kwargs={"path": model_path}), AgentSpec("random")),
        episodes=1,
    )
    summary = run_benchmark(spec, out / "bench", quiet=True)
    print(summary_markdown(summary))
    rates = {f"{cell['agent']} (valid_seen)": cell["success_rate"] for cell in summary["cells"]}
    plot_learning_curve(curve, out / "learning_curve.png", "MaskablePPO, ALFWorld pick_and_place_simple", rates, stages)
    print(f"learning curve: {out / 'learning_curve.png'}")


if __name__ == "__main__":
    main()
