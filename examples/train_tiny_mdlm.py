"""Train a tiny masked-diffusion LM that writes JSON records for the PromptEdit tasks, then sample it.

Reads the four PromptEdit-JSON tasks (TruthfulQA, SelfInstruct, SuperNI, MultiWOZ; needs
LMGYM_DATA), writes their (prompt, record) training pairs to a records file, trains an MDLM
on it with `lmgym.training.lm` (LLaDA's SFT objective), then asks the trained model for
records with each task's starting prompt and measures how many parse as JSON and how many pass
the task's schema. ``--install`` swaps the checkpoint in where
`lmgym.policies.record_generator` looks for its default (the recipe of the committed model).
Records are compacted first (`compact_record`: strings cut to 5 words, lists to 2 items, still
schema-valid and passing the task's semantic checks) so they fit the 128-token answer window.

    LMGYM_DATA=/path/to/data python examples/train_tiny_mdlm.py --out runs/json_mdlm --install

``--init smollm2`` instead adapts SmolLM2-135M into a diffusion LM (bidirectional attention,
a [MASK] token, continued training): the AR-to-diffusion recipe.

Smoke test: --out {tmp}/mdlm --steps 4 --per-task 8 --samples 2 --hidden-size 32 --num-layers 1
"""

import argparse
import json
import time
from pathlib import Path

from lmgym.envs.promptedit.generators import training_pairs
from lmgym.envs.promptedit.tasks import load_task
from lmgym.io import append_jsonl
from lmgym.policies.record_generator import DEFAULT_CHECKPOINT, EVAL_PROMPTS_FILE, DiffusionRecordGenerator
from lmgym.training.lm import LMTrainConfig, train

TASKS = ["TruthfulQA", "SelfInstruct", "SuperNI", "MultiWOZ"]
#: prompt variants per train record, so the small tasks are not drowned by MultiWOZ's 1,739
VARIANTS = {"TruthfulQA": 8, "SelfInstruct": 8, "SuperNI": 2, "MultiWOZ": 1}
#: records are compacted (strings cut to 5 words, lists to 2 items, still schema- and check-valid;
#: `compact_record`) so every record fits the 128-token answer window instead of being dropped
COMPACT_WORDS = 5

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--out", default="runs/json_mdlm")
parser.add_argument("--steps", type=int, default=700)
parser.add_argument("--per-task", type=int, default=None, help="cap on train records per task (smoke runs)")
parser.add_argument("--samples", type=int, default=16, help="records sampled per task for the validity check")
parser.add_argument("--hidden-size", type=int, default=128)
parser.add_argument("--num-layers", type=int, default=4)
parser.add_argument("--init", default=None, help="'smollm2' or an AR model folder to adapt (AR-to-diffusion)")
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--install", action="store_true", help=f"copy the checkpoint to {DEFAULT_CHECKPOINT}")
args = parser.parse_args()
out = Path(args.out)

# --- data: (prompt, record) pairs of every task, as a records file ---
records_file = out / "records.jsonl"
if not records_file.exists():
    for name in TASKS:
        task = load_task(name)
        pairs = training_pairs(task, seed=0, per_record=VARIANTS[name], compact=COMPACT_WORDS)
        for prompt, record in pairs[: args.per_task and args.per_task * VARIANTS[name]]:
            append_jsonl(records_file, {"prompt": prompt, "completion": record, "task": name})

# --- training ---
config = LMTrainConfig(
    data=(str(records_file),), objective="mdlm", out=str(out), init=args.init, vocab_size=1024,
    hidden_size=args.hidden_size, num_layers=args.num_layers, num_heads=4, max_prompt_tokens=96,
    max_answer_tokens=128, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
    warmup=min(100, args.steps // 10 + 1), seed=0, save_every=100, threads=args.threads, log_every=50,
)
started = time.time()
metrics = train(config)
print(f"trained {config.steps} steps in {time.time() - started:.0f} s: {metrics}")

# --- sampling: JSON and schema validity per task ---
generator = DiffusionRecordGenerator(out / "checkpoint", threads=args.threads)
rows = []
for name in TASKS:
    task = load_task(name)
    started = time.time()
    texts = generator.generate([task.initial_prompt], n=args.samples, seed=0)
    seconds = time.time() - started
    parsed = []
    for text in texts:
        try:
            parsed.append(json.loads(text))
        except ValueError:
            pass
    schema_ok = sum(isinstance(r, dict) and not task.validate(r) for r in parsed)
    rows.append({"task": name, "samples": len(texts), "json_valid": len(parsed) / len(texts),
                 "schema_valid": schema_ok / len(texts), "seconds": round(seconds, 3), "example": texts[0]})
    print(f"{name:12s} json {len(parsed)}/{len(texts)}  schema {schema_ok}/{len(texts)}  {seconds:.2f}s  e.g. {texts[0][:120]}")
(out / "samples.json").write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

if args.install:
    import shutil

    # copy beside the default, clean the meta of this run's paths, then swap the folders
    staging = DEFAULT_CHECKPOINT.with_name(DEFAULT_CHECKPOINT.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(out / "checkpoint", staging, ignore=shutil.ignore_patterns("optimizer.pt"))
    meta = json.loads((staging / "lmgym.json").read_text())
    meta["train_config"].update(data=["records.jsonl"], out=None)
    meta["recipe"] = "LMGYM_DATA=/path/to/data python examples/train_tiny_mdlm.py --out runs/json_mdlm --install"
    meta["samples"] = {row["task"]: {k: row[k] for k in ("samples", "json_valid", "schema_valid")} for row in rows}
    (staging / "lmgym.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    # the prompts benchmarks/diffusion_sampler.py decodes, so it runs without LMGYM_DATA
    (staging / EVAL_PROMPTS_FILE).write_text(json.dumps({name: load_task(name).initial_prompt for name in TASKS}, indent=2) + "\n")
    retired = DEFAULT_CHECKPOINT.with_name(DEFAULT_CHECKPOINT.name + ".old")
    shutil.rmtree(retired, ignore_errors=True)
    if DEFAULT_CHECKPOINT.exists():
        DEFAULT_CHECKPOINT.rename(retired)
    staging.rename(DEFAULT_CHECKPOINT)
    shutil.rmtree(retired, ignore_errors=True)
    print(f"installed {DEFAULT_CHECKPOINT}")
