"""Build the P-ReAct search agent: teacher data, Agentic SFT, Agentic VRPO, and the AR baseline.

Stages (each resumable; ``--stages`` picks some, in this order):

1. ``data``: the grounded HotPotQA teacher plays *training* seeds 1,000,000 + k of
   HotPotQA-Gen's three difficulties; its won episodes are the SFT set.
2. ``tokenizer``: a byte-level BPE of 1,024 learnt on that data in the P-ReAct layout (so both
   models read the same tokens).
3. ``ar``: the AR baseline, a tiny Llama trained on the same episodes as an `lm` agent's
   Thought/Action transcripts (`lmgym.training.lm`).
4. ``sft``: the diffusion model, adapted from the AR model (attention made bidirectional, a
   ``[MASK]`` token), then Agentic SFT in the turn layout (`lmgym.training.agentic_sft`).
   From scratch the same budget gave a model that won 0 of 20 validation questions.
5. ``vrpo``: Agentic VRPO on the SFT model's own sampled rollouts of other training seeds
   (`lmgym.training.vrpo`).
6. ``install``: the half-precision folders the agents load by default:
   ``zoo/react/hotpotqa-preact`` (the VRPO model, or the SFT model
   without the vrpo stage) and ``hotpotqa-preact-ar``.

    python examples/train_preact.py --out runs/preact --install

The evaluation (latency and accuracy of every agent) is ``python studies/preact_latency.py``.

Smoke test: --out {tmp}/preact --stages data tokenizer ar sft --episodes 6 --sft-steps 2 --ar-steps 2 --hidden-size 32 --reason-tokens 160 --call-tokens 48
"""

import argparse
import json
import time
from pathlib import Path

import torch

import lmgym  # noqa: F401  (registers the envs)
from lmgym.agents.preact import DEFAULT_CHECKPOINT
from lmgym.agents.registry import make_agent
from lmgym.agents.runner import record_rollouts
from lmgym.models.checkpoints import install_checkpoint
from lmgym.rollouts import read_episodes
from lmgym.training import agentic_sft, vrpo
from lmgym.training.lm import LMTrainConfig, train as train_lm

TRAIN_SEEDS_FROM = 1_000_000
DIFFICULTIES = ("lmgym/HotPotQA-Gen-Easy-v0", "lmgym/HotPotQA-Gen-v0", "lmgym/HotPotQA-Gen-Hard-v0")
STAGES = ("data", "tokenizer", "ar", "sft", "vrpo", "install")

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--out", default="runs/preact")
parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
parser.add_argument("--episodes", type=int, default=4000, help="teacher episodes, split over the three difficulties")
parser.add_argument("--hidden-size", type=int, default=128)
parser.add_argument("--num-layers", type=int, default=4)
parser.add_argument("--reason-tokens", type=int, default=80)
parser.add_argument("--call-tokens", type=int, default=24)
parser.add_argument("--max-prompt-tokens", type=int, default=320)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--ar-steps", type=int, default=2000)
parser.add_argument("--ar-lr", type=float, default=3e-3)
parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast in the ar stage (lmgym.training.lm)")
parser.add_argument("--sft-steps", type=int, default=1500)
parser.add_argument("--sft-lr", type=float, default=3e-3, help="chosen over 1e-3 on validation seeds 500,000+ (docs/preact.md)")
parser.add_argument("--vrpo-questions", type=int, default=200, help="training questions the SFT model samples for pairs")
parser.add_argument("--vrpo-samples", type=int, default=4, help="rollouts per question")
parser.add_argument("--vrpo-steps", type=int, default=200)
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--install", action="store_true", help="the install stage writes the default checkpoints")
args = parser.parse_args()
torch.set_num_threads(args.threads)
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)
teacher_file, tokenizer_dir = out / "teacher.jsonl", out / "tokenizer"
size = dict(hidden_size=args.hidden_size, num_layers=args.num_layers)
started = time.time()

if "data" in args.stages:
    shares = [args.episodes // 4, 3 * args.episodes // 8, args.episodes - args.episodes // 4 - 3 * args.episodes // 8]
    for env_id, count in zip(DIFFICULTIES, shares):
        counts = record_rollouts(env_id, make_agent("teacher"), [TRAIN_SEEDS_FROM + k for k in range(count)],
                                 teacher_file, won_only=True, env_kwargs={"split": "train"})
        print(f"teacher on {env_id}: {counts}", flush=True)

if "tokenizer" in args.stages and not (tokenizer_dir / "tokenizer.json").exists():
    from lmgym.models.tokenizer import train_bpe_tokenizer

    tokenizer = train_bpe_tokenizer(agentic_sft.corpus_texts(list(read_episodes(teacher_file))), vocab_size=1024)
    tokenizer.save_pretrained(tokenizer_dir)

if "ar" in args.stages:
    train_lm(LMTrainConfig(data=(str(teacher_file),), objective="ar", out=str(out / "ar"), tokenizer=str(tokenizer_dir),
                           max_prompt_tokens=args.max_prompt_tokens, max_answer_tokens=args.reason_tokens + args.call_tokens,
                           steps=args.ar_steps, batch_size=args.batch_size, lr=args.ar_lr, warmup=100, seed=0,
                           save_every=250, log_every=25, threads=args.threads, bf16=args.bf16, **size))

if "sft" in args.stages:
    agentic_sft.train(agentic_sft.AgenticSFTConfig(
        data=(str(teacher_file),), out=str(out / "sft"), init=str(out / "ar" / "checkpoint"),
        reason_tokens=args.reason_tokens, call_tokens=args.call_tokens, max_prompt_tokens=args.max_prompt_tokens,
        steps=args.sft_steps, batch_size=args.batch_size, lr=args.sft_lr, threads=args.threads))

if "vrpo" in args.stages:
    vrpo.train(vrpo.VRPOConfig(model=str(out / "sft" / "checkpoint"), out=str(out / "vrpo"), envs=DIFFICULTIES,
                               questions=args.vrpo_questions, samples=args.vrpo_samples, steps=args.vrpo_steps,
                               threads=args.threads))

if "install" in args.stages and args.install:
    recipe = f"python examples/train_preact.py --out {args.out} --install"
    best = out / "vrpo" / "checkpoint" if (out / "vrpo" / "checkpoint").exists() else out / "sft" / "checkpoint"
    data = "HotPotQA-Gen training seeds (teacher episodes)"
    install_checkpoint(best, DEFAULT_CHECKPOINT, meta={"recipe": recipe}, data=data)
    install_checkpoint(out / "ar" / "checkpoint", "react/hotpotqa-preact-ar", meta={"recipe": recipe}, data=data)
    print(f"installed {best} -> {DEFAULT_CHECKPOINT}", flush=True)

print(json.dumps({"stages": args.stages, "seconds": round(time.time() - started, 1)}), flush=True)
