"""Distil a ReAct teacher into a student ten times smaller, in minutes, and play both.

1. The teacher (the installed HotPotQA AR ReAct model, 0.92M parameters) plays training seeds
   ``1_000_000 + k`` as an `lm` agent; its rollouts are the distillation data.
2. A student (40 wide, 2 layers: 79,560 parameters, the teacher's tokenizer) learns from them
   with `lmgym.training.distill` (``--method sad``: KL to the teacher on the reasoning and the
   action spans, PCGrad between the two, an easy-to-hard curriculum; or seqkd, kd, rkl).
3. Teacher and student play held-out seeds ``0..N-1`` as `lm` agents (paired seeds).

    python examples/distill_tiny_student.py --out runs/distill/example
    python examples/distill_tiny_student.py --out runs/distill/example --method kd   # same data and teacher cache
    python examples/distill_tiny_student.py --out runs/distill/smollm2 --teacher ladder/hotpotqa-smollm2-sft \
        --teacher-bf16 --method kd   # the ladder's SmolLM2 (LoRA) teacher: the student takes its 49k-token tokenizer

Each method's student goes to ``OUT/student-<method>``; kd and sad read the teacher's
distributions from ``OUT/teacher_cache``, written by the first of them (``--teacher-cache``).

The full comparison (every method, two sizes, ablations, CoT match, paired tests) is
``studies/distill.py`` (docs/distill.md).

Smoke test: --out {tmp}/distill --teacher-episodes 4 --steps 3 --eval-episodes 2 --max-eval-steps 3
"""

import argparse
import time
from pathlib import Path

import torch

import lmgym  # noqa: F401  (registers the envs)
from lmgym.agents.registry import make_agent
from lmgym.agents.runner import record_rollouts
from lmgym.benchmarks.runner import run_benchmark
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec
from lmgym.training.distill import METHODS, DistillConfig, train

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--env", default="lmgym/HotPotQA-Gen-v0")
parser.add_argument("--teacher", default="react/hotpotqa-preact-ar", help="a checkpoint folder or zoo name (a LoRA adapter too)")
parser.add_argument("--teacher-bf16", action="store_true", help="the teacher's forward passes under bfloat16 autocast")
parser.add_argument("--out", default="runs/distill/example")
parser.add_argument("--method", default="sad", choices=METHODS)
parser.add_argument("--teacher-episodes", type=int, default=200)
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--hidden-size", type=int, default=40)
parser.add_argument("--num-layers", type=int, default=2)
parser.add_argument("--eval-episodes", type=int, default=20, help="held-out seeds 0..N-1")
parser.add_argument("--max-eval-steps", type=int, default=8)
args = parser.parse_args()
torch.set_num_threads(1)
out, started = Path(args.out), time.time()
lm = {"few_shot": 0, "batch_size": 8, "backend_kwargs": {"threads": 1}}

# --- 1. the teacher's rollouts on training seeds ---
rollouts = out / "teacher_rollouts.jsonl"
counts = record_rollouts(args.env, make_agent("lm", model=args.teacher, **lm),
                         range(1_000_000, 1_000_000 + args.teacher_episodes), rollouts, slots=8,
                         env_kwargs={"split": "train"})
print(f"teacher: {counts} ({time.time() - started:.0f} s)")

# --- 2. the student ---
student = out / f"student-{args.method}"
metrics = train(DistillConfig(teacher=args.teacher, data=(str(rollouts),), method=args.method, out=str(student),
                              hidden_size=args.hidden_size, num_layers=args.num_layers, steps=args.steps,
                              warmup=min(50, args.steps // 10 + 1), teacher_cache=str(out / "teacher_cache"),
                              teacher_bf16=args.teacher_bf16, quiet=True))
print(f"student: {metrics} ({time.time() - started:.0f} s)")

# --- 3. both on held-out seeds ---
spec = BenchmarkSpec("distill-example", (EnvSpec(args.env),),
                     (AgentSpec("teacher", "lm", {"model": args.teacher, **lm}),
                      AgentSpec(student.name, "lm", {"model": str(student / "checkpoint"), **lm})),
                     episodes=args.eval_episodes, max_steps=args.max_eval_steps)
run_benchmark(spec, out / f"eval-{args.method}", quiet=True, plots=False, backend="inprocess")
print((out / f"eval-{args.method}" / "summary.md").read_text())
print(f"total {time.time() - started:.0f} s")
