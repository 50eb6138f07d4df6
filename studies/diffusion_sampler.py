"""The LLaDA reference sampler vs Fast-dLLM decoding on the tiny JSON-record MDLM.

Model: the committed default of `lmgym.components.record_generator` (trained by
``examples/train_tiny_mdlm.py``), so the task is one it was trained for: write a JSON record
for each PromptEdit task's fully specified prompt (every field hint and the format sentence,
`lmgym.envs.promptedit.edits.specified_prompt`; stored beside the checkpoint, no data needed).
The starting prompts are left out on purpose: the model was taught to answer them with
incomplete records, as a vague prompt gets (`training_pairs`).

Samplers, all on the same model and prompts, answer length the checkpoint's (128) in blocks of 32:

* ``reference``: `lmgym.models.diffusion.generate` with one token per step (steps = 128), the
  usual quality setting of LLaDA;
* ``threshold``: `fast_generate`, confidence threshold 0.9, no cache (Fast-dLLM's parallel
  decoding alone);
* ``threshold+cache``: threshold 0.9 and the per-block prefix KV cache;
* ``threshold+dualcache``: threshold 0.9 and the DualCache (prefix and masked suffix cached,
  the steps inside a block feed the block alone);
* ``threshold+dualcache+eos``: threshold 0.9, DualCache, and no block decoded after every
  sequence has written EOS (the text before it is final): how `DiffusionRecordGenerator` runs.

Measured per sampler: record tokens per second (the tokens of each answer up to and including
its first EOS, summed over the batch, over wall time: the text a caller gets, so stopping early
at EOS earns nothing it does not deliver), forward passes per record token, the share of
valid JSON objects among the decoded answers (the task accuracy; with LMGYM_DATA also per
task: share parsed as JSON, share schema-valid, and TSR by the PromptEdit judge = schema-valid
and passing the task's semantic checks), and, at temperature 0, the share of the reference's
record tokens reproduced. Two settings: greedy (one answer per
prompt) and sampling at temperature 1 (``n`` answers per prompt, same seeds for every
sampler). The samplers run interleaved, ``repeats`` times, and the median time counts; the
machine is shared, so the speed-up ratio (same process, same moment) is the figure to quote,
absolute tokens/s only with its load note.

The README's claims about these samplers are checked here (`CLAIMS`, full runs only: a quick
run measures n=1 once, too little to test them): the speed-up of the generator's own
configuration (``threshold+dualcache+eos``) over the reference in each setting, and that its
schema validity and TSR are at least the reference's. ``results["failures"]`` lists every claim
that does not hold; the script exits 1 then, and ``lmgym bench perf`` reports it as a failure.

Run: ``python studies/diffusion_sampler.py`` (n=8, 3 repeats; ``--n``, ``--repeats``) or
``--quick`` (2 tasks, n=1, once).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from lmgym.models.checkpoints import load_checkpoint
from lmgym.models.diffusion import fast_generate, generate
from lmgym.components.record_generator import DEFAULT_CHECKPOINT, EVAL_PROMPTS_FILE
from lmgym.models import zoo
from lmgym.models.tokenizer import decode_answer, prompt_ids

BLOCK_LENGTH = 32
THRESHOLD = 0.9
#: The sampler the README's claims are about: how `DiffusionRecordGenerator` runs.
CLAIMED_SAMPLER = "threshold+dualcache+eos"
#: The README's claims (section "Language models"): at least this speed-up in tokens/s over the
#: reference sampler, per setting, at schema validity and TSR no lower than the reference's.
#: Measured (docs/lm_core.md): 24.7x / 42.0x on an idle machine, 11.8x / 34.2x at load ~19; the
#: floors are what both runs support, since the ratio of a short cached run to a long one falls
#: when the cores are contended.
CLAIMS = {"greedy": 10.0, "sampling": 30.0}


def _load_tasks(names) -> dict | None:
    """{name: SchemaTask} when the PromptEdit data is here, else None (JSON validity only)."""
    from lmgym.data import DataNotFoundError
    from lmgym.envs.promptedit.tasks import load_task

    try:
        return {name: load_task(name) for name in names}
    except DataNotFoundError:  # no LMGYM_DATA: the benchmark still runs, with JSON validity only
        return None


def check_claims(results: dict) -> list[str]:
    """The README claims (`CLAIMS`) that these results contradict, one line each."""
    by = {(r["setting"], r["sampler"]): r for r in results["rows"]}
    failures = []
    for setting, floor in CLAIMS.items():
        speedup = results["speedup"][f"{setting}/{CLAIMED_SAMPLER}"]
        if speedup < floor:
            failures.append(f"{setting}: {CLAIMED_SAMPLER} is {speedup}x the reference's tokens/s, the README claims >= {floor}x")
        fast, reference = by[(setting, CLAIMED_SAMPLER)], by[(setting, "reference")]
        if fast["schema_valid"] is not None and fast["schema_valid"] < reference["schema_valid"]:
            failures.append(f"{setting}: {CLAIMED_SAMPLER} schema validity {fast['schema_valid']:.3f} < the "
                            f"reference's {reference['schema_valid']:.3f}")
        if "per_task" in fast:
            tsr = {name: sum(r["per_task"][t]["tsr"] * r["per_task"][t]["samples"] for t in r["per_task"])
                   / sum(r["per_task"][t]["samples"] for t in r["per_task"]) for name, r in (("fast", fast), ("reference", reference))}
            if tsr["fast"] < tsr["reference"]:
                failures.append(f"{setting}: {CLAIMED_SAMPLER} TSR {tsr['fast']:.3f} < the reference's {tsr['reference']:.3f}")
    return failures


def _per_task(texts: list[str], tasks: list[str], schema_tasks: dict, judges: dict) -> dict:
    """Per task: share parsed as JSON, share schema-valid, the judge's parse rate and TSR."""
    report = {}
    for name in dict.fromkeys(tasks):
        mine = [t for t, task in zip(texts, tasks) if task == name]
        records = []
        for text in mine:
            try:
                records.append(json.loads(text))
            except ValueError:
                pass
        findings = judges[name].measure(mine)
        report[name] = {"samples": len(mine), "json_parse": round(len(records) / len(mine), 4),
                        "schema_valid": round(sum(isinstance(r, dict) and not schema_tasks[name].validate(r) for r in records) / len(mine), 4),
                        "judge_parse_rate": findings.metrics["parse_rate"], "tsr": findings.metrics["tsr"]}
    return report


def _validity(texts: list[str], tasks: list[str], schema_ok) -> dict[str, float | None]:
    json_ok, schema = 0, 0
    for text, task in zip(texts, tasks):
        try:
            record = json.loads(text)
        except ValueError:
            continue
        json_ok += isinstance(record, dict)
        schema += bool(schema_ok and schema_ok(task, record))
    return {"json_valid": json_ok / len(texts), "schema_valid": schema / len(texts) if schema_ok else None}


def _record_mask(answer: torch.Tensor, eos_id: int) -> torch.Tensor:
    """(B, G) bool: each answer's tokens up to and including its first EOS (the record's text)."""
    eos_seen_before = (answer == eos_id).long().cumsum(dim=1) - (answer == eos_id).long()  # (B, G)
    return eos_seen_before == 0


def _batch(tokenizer, prompts: list[str], max_prompt_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    rows = [prompt_ids(tokenizer, p, max_prompt_tokens) for p in prompts]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, width - len(row):] = torch.tensor(row)
        attention[i, width - len(row):] = 1
    return ids, attention


def run(quick: bool = False, checkpoint: str | None = None, threads: int = 1, n: int = 8, repeats: int = 3) -> dict:
    """Measure the three samplers; returns settings, per-sampler rows and speed-up ratios."""
    torch.set_num_threads(threads)
    folder = zoo.resolve(checkpoint or DEFAULT_CHECKPOINT)
    model, tokenizer, meta = load_checkpoint(folder, device="cpu")
    with open(os.path.join(folder, EVAL_PROMPTS_FILE), encoding="utf-8") as f:
        task_prompts: dict[str, str] = json.load(f)["specified"]
    gen_length, mask_id = meta["max_answer_tokens"], tokenizer.mask_token_id
    n, repeats = (1, 1) if quick else (n, repeats)
    if quick:  # two record types: enough to exercise every sampler and the report
        task_prompts = {name: task_prompts[name] for name in ("SuperNI", "MultiWOZ")}
    schema_tasks = _load_tasks(task_prompts)
    schema_ok = schema_tasks and (lambda task, record: isinstance(record, dict) and not schema_tasks[task].validate(record))
    if schema_tasks:
        from lmgym.envs.promptedit.judge import JudgeCluster

        judges = {name: JudgeCluster(task) for name, task in schema_tasks.items()}

    def fast(cache: str, stop_at_eos: bool = False):
        return lambda ids, att, temperature, seed: fast_generate(
            model, ids, att, steps=gen_length, gen_length=gen_length, block_length=BLOCK_LENGTH,
            temperature=temperature, mask_id=mask_id, threshold=THRESHOLD, cache=cache,
            eos_id=tokenizer.eos_token_id if stop_at_eos else None, generator=torch.Generator().manual_seed(seed))

    samplers = {
        "reference": lambda ids, att, temperature, seed: generate(
            model, ids, att, steps=gen_length, gen_length=gen_length, block_length=BLOCK_LENGTH,
            temperature=temperature, mask_id=mask_id, generator=torch.Generator().manual_seed(seed)),
        "threshold": fast("none"),
        "threshold+cache": fast("prefix"),
        "threshold+dualcache": fast("dual"),
        "threshold+dualcache+eos": fast("dual", stop_at_eos=True),
    }
    settings = {"greedy": (0.0, 1), "sampling": (1.0, n)}
    results: dict = {"checkpoint": str(folder), "gen_length": gen_length, "block_length": BLOCK_LENGTH,
                     "threshold": THRESHOLD, "threads": threads, "repeats": repeats, "parameters": meta.get("parameters"),
                     "schema_checked": schema_ok is not None, "rows": []}
    for setting, (temperature, per_prompt) in settings.items():
        tasks = [t for t in task_prompts for _ in range(per_prompt)]
        ids, attention = _batch(tokenizer, [task_prompts[t] for t in tasks], meta["max_prompt_tokens"])
        seconds = {name: [] for name in samplers}
        outputs = {}
        for _ in range(repeats):
            for name, sample in samplers.items():  # interleaved: every sampler sees the same load
                started = time.perf_counter()
                out = sample(ids, attention, temperature, 0)
                seconds[name].append(time.perf_counter() - started)
                outputs[name] = out
        reference_answer = outputs["reference"][:, ids.shape[1]:]
        reference_record = _record_mask(reference_answer, tokenizer.eos_token_id)
        for name, out in outputs.items():
            sequences = out if isinstance(out, torch.Tensor) else out.sequences
            passes = gen_length if isinstance(out, torch.Tensor) else out.forward_passes
            answer = sequences[:, ids.shape[1]:]
            record_tokens = int(_record_mask(answer, tokenizer.eos_token_id).sum())
            wall = statistics.median(seconds[name])
            texts = [decode_answer(tokenizer, a) for a in answer.tolist()]
            row = {"setting": setting, "sampler": name, "sequences": len(tasks), "seconds": round(wall, 4),
                   "record_tokens": record_tokens, "tokens_per_s": round(record_tokens / wall, 1), "forward_passes": passes,
                   "passes_per_token": round(passes * len(tasks) / record_tokens, 4), **_validity(texts, tasks, schema_ok)}
            if schema_tasks:
                row["per_task"] = _per_task(texts, tasks, schema_tasks, judges)
            if temperature == 0:  # share of the reference's record tokens this sampler reproduces
                same = (answer == reference_answer) & reference_record
                row["agreement_with_reference"] = round(float(same.sum() / reference_record.sum()), 4)
            results["rows"].append(row)
    by = {(r["setting"], r["sampler"]): r for r in results["rows"]}
    results["speedup"] = {f"{setting}/{name}": round(by[(setting, name)]["tokens_per_s"] / by[(setting, "reference")]["tokens_per_s"], 2)
                          for setting in settings for name in samplers if name != "reference"}
    results["claims"] = {"sampler": CLAIMED_SAMPLER, "min_speedup": CLAIMS, "checked": not quick}
    results["failures"] = [] if quick else check_claims(results)
    return results


def to_markdown(results: dict) -> str:
    lines = ["| setting | sampler | seqs | tokens/s | passes/token | JSON valid | schema valid | agreement |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results["rows"]:
        schema = "-" if r["schema_valid"] is None else f"{r['schema_valid']:.2f}"
        lines.append(f"| {r['setting']} | {r['sampler']} | {r['sequences']} | {r['tokens_per_s']} | {r['passes_per_token']} | "
                     f"{r['json_valid']:.2f} | {schema} | {r.get('agreement_with_reference', '-')} |")
    per_task = [r for r in results["rows"] if "per_task" in r]
    if per_task:
        lines += ["", "| setting | sampler | task | samples | JSON parse | schema valid | TSR (judge) |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in per_task:
            for task, m in r["per_task"].items():
                lines.append(f"| {r['setting']} | {r['sampler']} | {task} | {m['samples']} | {m['json_parse']:.2f} | "
                             f"{m['schema_valid']:.2f} | {m['tsr']:.2f} |")
    lines.append("")
    lines.append("Speed-up in tokens/s over the reference (same process, interleaved): "
                 + ", ".join(f"{k} {v}x" for k, v in results["speedup"].items()))
    if not results["claims"]["checked"]:
        lines.append("README claims not checked (quick mode measures too little).")
    elif results["failures"]:
        lines += ["", "README claims that do NOT hold in this run:"] + [f"- {f}" for f in results["failures"]]
    else:
        lines.append(f"README claims hold: {CLAIMED_SAMPLER} >= {CLAIMS} x the reference, validity and TSR not lower.")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n", type=int, default=8, help="samples per task prompt at temperature 1")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (the median counts)")
    parser.add_argument("--out", default=None, help="write the results JSON here")
    args = parser.parse_args()
    results = run(args.quick, args.checkpoint, args.threads, args.n, args.repeats)
    print(to_markdown(results))
    if args.out:
        from lmgym.io import atomic_write_json

        atomic_write_json(args.out, results)
    raise SystemExit(1 if results["failures"] else 0)
