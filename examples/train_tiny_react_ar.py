"""Train a tiny autoregressive LM on expert ReAct trajectories, then let it play.

Records the expert's episodes of an env (default ``lmgym/KeyDoor-v0``, procedural: no data
needed) as a rollout file, trains a small Llama-style AR model on it with
`lmgym.training.lm` (each step: ``Task/Observation`` -> ``Thought: ...\\nAction: ...``), then
plays unseen seeds greedily with the model (KV-cache generation, cut at the end of the action
line) and reports the win rate, beside the expert's and a random agent's on the same seeds.

    python examples/train_tiny_react_ar.py --out runs/react_ar

Smoke test: --out {tmp}/react --episodes 4 --steps 4 --eval-episodes 1 --max-episode-steps 2 --hidden-size 32
Smoke expects: train ar step 4/4
"""

import argparse
import time
from pathlib import Path

import gymnasium as gym
import torch

import lmgym  # noqa: F401  (registers the envs)
from lmgym.agents import ExpertAgent, RandomAgent, run_episode
from lmgym.policies.checkpoints import load_checkpoint
from lmgym.policies.generation import generate_ids
from lmgym.policies.tokenizer import decode_answer, prompt_ids
from lmgym.rollouts import ACTION_PREFIX, write_episode
from lmgym.training.lm import LMTrainConfig, train

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--env-id", default="lmgym/KeyDoor-v0")
parser.add_argument("--out", default="runs/react_ar")
parser.add_argument("--episodes", type=int, default=200, help="expert episodes to train on (seeds 0..N-1)")
parser.add_argument("--steps", type=int, default=2000)
parser.add_argument("--hidden-size", type=int, default=64)
parser.add_argument("--eval-episodes", type=int, default=100, help="unseen seeds 10_000.. to play")
parser.add_argument("--max-episode-steps", type=int, default=None, help="cap on moves per played episode (default: the env's limit)")
parser.add_argument("--threads", type=int, default=1, help="torch threads (1 on a shared machine)")
args = parser.parse_args()
out = Path(args.out)
env = gym.make(args.env_id)

# --- data: expert trajectories as a rollout file ---
rollouts = out / "expert_rollouts.jsonl"
if not rollouts.exists():
    for seed in range(args.episodes):
        write_episode(rollouts, run_episode(env, ExpertAgent(), seed=seed, env_id=args.env_id))

# --- training ---
config = LMTrainConfig(data=(str(rollouts),), objective="ar", out=str(out), vocab_size=512,
                       hidden_size=args.hidden_size, num_layers=2, num_heads=4, max_prompt_tokens=96,
                       max_answer_tokens=48, steps=args.steps, batch_size=16, lr=1e-2,
                       warmup=min(30, args.steps // 10 + 1), seed=0, threads=args.threads, log_every=25)
started = time.time()
metrics = train(config)
print(f"trained {config.steps} steps in {time.time() - started:.0f} s: loss {metrics['train/loss']:.3f}")

# --- play unseen seeds with the model ---
model, tokenizer, _ = load_checkpoint(out / "checkpoint")


def model_action(task: str, observation: str) -> str:
    ids = torch.tensor([prompt_ids(tokenizer, f"Task: {task}\nObservation: {observation}\n", config.max_prompt_tokens)])
    new, _ = generate_ids(model, ids, max_new_tokens=config.max_answer_tokens, eos_token_id=tokenizer.eos_token_id)
    completion = decode_answer(tokenizer, new[0].tolist())
    return completion.split(ACTION_PREFIX, 1)[-1].split("\n")[0].strip()


wins = {"model": 0, "expert": 0, "random": 0}
for k in range(args.eval_episodes):
    seed = 10_000 + k
    observation, info = env.reset(seed=seed)
    for _ in range(args.max_episode_steps or env.spec.max_episode_steps or 50):
        observation, reward, terminated, truncated, info = env.step(model_action(info["task"], observation))
        if terminated or truncated:
            break
    wins["model"] += bool(info.get("won"))
    for name, agent in (("expert", ExpertAgent()), ("random", RandomAgent())):
        wins[name] += run_episode(env, agent, seed=seed, env_id=args.env_id).won
for name, won in wins.items():
    print(f"{name:>6}: won {won}/{args.eval_episodes} unseen episodes")
