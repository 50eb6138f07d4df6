"""Train tiny ReAct agents on a family's grounded teacher, then evaluate them as `lm` agents.

1. Data: the grounded teacher (agent ``teacher``, which acts only on what it has seen) plays
   *training* seeds ``1_000_000 + k``; its won episodes are the SFT set (`record_rollouts`,
   resumable).
2. An autoregressive model (a small Llama built from scratch, its BPE trained on the data)
   learns the teacher's Thought/Action turns with `lmgym.training.lm`: multi-turn transcripts,
   loss on the reasoning and action tokens only, rendered exactly as `LMAgent` prompts.
3. A masked-diffusion model starts from that AR model (AR-to-diffusion adaptation: attention
   made bidirectional, then LLaDA's SFT objective with the semi-autoregressive block masks).
4. Both play held-out seeds ``0..N-1`` as `lm` agents in `lmgym bench`, beside random and the
   teacher on the same seeds (``--eval-env`` adds envs, e.g. the real ALFWorld valid_unseen).

    python examples/train_tiny_react.py --env lmgym/ALFWorld-Gen-v0 --out runs/react/alfworld
    python examples/train_tiny_react.py --env lmgym/ALFWorld-Gen-v0 --out runs/react/alfworld \\
        --eval-env "lmgym/ALFWorld-v0(split=valid_unseen)" --install

``--install`` writes both models in half precision to ``zoo/react/``
(``<family>-ar``, ``<family>-mdlm``), the folders `LMAgent(model=...)` and the README use.

Smoke test: --env lmgym/KeyDoor-v0 --teacher expert --out {tmp}/react --episodes 4 --ar-steps 3 --mdlm-steps 3 --eval-episodes 1 --hidden-size 32 --max-eval-steps 2
"""

import argparse
import shlex
import sys
import time
from pathlib import Path

import torch

import lmgym  # noqa: F401  (registers the envs)
from lmgym.agents.registry import make_agent
from lmgym.agents.runner import record_rollouts
from lmgym.benchmarks.runner import run_benchmark
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec, parse_call
from lmgym.benchmarks.suites import probe
from lmgym.envs.registry import family_of
from lmgym.models.checkpoints import install_checkpoint
from lmgym.training.lm import LMTrainConfig, train

TRAIN_SEEDS_FROM = 1_000_000

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--env", default="lmgym/ALFWorld-Gen-v0", help="env whose training seeds the teacher plays")
parser.add_argument("--out", default="runs/react")
parser.add_argument("--episodes", type=int, default=2000, help="teacher episodes played on training seeds")
parser.add_argument("--teacher", default="teacher", help="the demonstrator (KeyDoor has no grounded teacher: its expert sees no hidden state but the key's room)")
parser.add_argument("--ar-steps", type=int, default=1500)
parser.add_argument("--mdlm-steps", type=int, default=1500, help="0: no masked-diffusion model")
parser.add_argument("--init", default=None, help="start the AR model from this checkpoint folder (its tokenizer and shape) instead of from scratch")
parser.add_argument("--name", default=None, help="installed as <name>-ar, <name>-mdlm (default: the env family)")
parser.add_argument("--hidden-size", type=int, default=128)
parser.add_argument("--num-layers", type=int, default=4)
parser.add_argument("--vocab-size", type=int, default=1024)
parser.add_argument("--max-prompt-tokens", type=int, default=320, help="the transcript's history budget")
parser.add_argument("--max-answer-tokens", type=int, default=64)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--eval-episodes", type=int, default=100, help="held-out seeds 0..N-1 (0: train only, no evaluation)")
parser.add_argument("--eval-env", action="append", default=[],
                    help="more envs to evaluate on, as ID or ID(key=value, ...); a finite split of at most "
                         "--sweep-up-to tasks is played once, whole, a larger one on the held-out seeds")
parser.add_argument("--sweep-up-to", type=int, default=600,
                    help="largest split played whole (others: --eval-episodes seeds, each drawing its task)")
parser.add_argument("--max-eval-steps", type=int, default=None, help="cap on steps per evaluation episode")
parser.add_argument("--batch", type=int, default=8, help="episodes each LM agent plays at once")
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--save-every", type=int, default=250, help="checkpoint every N steps; a rerun of the same command resumes from the last one")
parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast of the training forward passes (weights stay float32)")
parser.add_argument("--install", action="store_true", help="install the models in half precision in the zoo as react/<family>-<kind>")
args = parser.parse_args()
if args.install and not args.eval_episodes:
    parser.error("--install records the evaluation beside the model: it needs --eval-episodes > 0")
torch.set_num_threads(args.threads)
out = Path(args.out)
family = family_of(args.env).lower()
kinds = ("ar", "mdlm") if args.mdlm_steps else ("ar",)
started = time.time()

envs = [EnvSpec(args.env)]
for text in args.eval_env:  # checked before training; a small finite split is swept: every task once
    env_id, kwargs = parse_call(text)
    found = probe(env_id, kwargs)
    if found.error:  # e.g. a data-backed env without LMGYM_DATA: one line, before any training
        sys.exit(found.error)
    tasks = found.num_tasks
    sweep = tasks is not None and tasks <= args.sweep_up_to
    envs.append(EnvSpec(env_id, kwargs, sweep=sweep, episodes=tasks if sweep else None))

# --- 1. data: the grounded teacher on training seeds ---
rollouts = out / "teacher_rollouts.jsonl"
counts = record_rollouts(args.env, make_agent(args.teacher), range(TRAIN_SEEDS_FROM, TRAIN_SEEDS_FROM + args.episodes),
                         rollouts, won_only=True, env_kwargs={"split": "train"})
print(f"teacher: {counts} -> {rollouts} ({time.time() - started:.0f} s)")

# --- 2. the autoregressive agent ---
common = dict(data=(str(rollouts),), vocab_size=args.vocab_size, hidden_size=args.hidden_size,
              num_layers=args.num_layers, num_heads=4, max_prompt_tokens=args.max_prompt_tokens,
              max_answer_tokens=args.max_answer_tokens, batch_size=args.batch_size, lr=args.lr, seed=0,
              threads=args.threads, bf16=args.bf16, log_every=50, save_every=args.save_every)
metrics = train(LMTrainConfig(objective="ar", out=str(out / "ar"), steps=args.ar_steps, init=args.init,
                              warmup=min(100, args.ar_steps // 10 + 1), **common))
print(f"ar: {metrics} ({time.time() - started:.0f} s)")

# --- 3. the masked-diffusion agent, adapted from the AR one ---
if args.mdlm_steps:
    metrics = train(LMTrainConfig(objective="mdlm", out=str(out / "mdlm"), steps=args.mdlm_steps,
                                  init=str(out / "ar" / "checkpoint"), mask_schedule="blocks", block_length=32,
                                  warmup=min(100, args.mdlm_steps // 10 + 1), **common))
    print(f"mdlm: {metrics} ({time.time() - started:.0f} s)")

if not args.eval_episodes:
    print(f"trained, not evaluated (--eval-episodes 0); total {time.time() - started:.0f} s")
    sys.exit()

# --- 4. evaluation on held-out seeds, beside random and the teacher ---
lm = {"few_shot": 0, "batch_size": args.batch, "backend_kwargs": {"threads": args.threads}}
agents = (AgentSpec("random"), AgentSpec(args.teacher),
          *(AgentSpec(f"tiny-{kind}", "lm", {"model": str(out / kind / "checkpoint"), **lm}) for kind in kinds))
spec = BenchmarkSpec(f"react-{family}", tuple(envs), agents, episodes=args.eval_episodes, base_seed=0,
                     max_steps=args.max_eval_steps)
summary = run_benchmark(spec, out / "eval", quiet=True)
print((out / "eval" / "summary.md").read_text())
print(f"total {time.time() - started:.0f} s")

if args.install:
    for kind in kinds:
        target = install_checkpoint(out / kind / "checkpoint", f"react/{args.name or family}-{kind}",
                                    data=f"{args.env} training seeds from 1,000,000 (teacher episodes)", meta={
            "recipe": shlex.join(["python", "examples/train_tiny_react.py", *sys.argv[1:]]),
            "eval": {f"{c['env']}/{c['agent']}": c["success_rate"] for c in summary["cells"]}})
        print(f"installed {target} ({sum(f.stat().st_size for f in target.iterdir()) / 1e6:.1f} MB)")
