"""How well the frozen PromptEdit generators follow prompts: schema-valid rate and TSR per task.

For each task (TruthfulQA, SelfInstruct, SuperNI, MultiWOZ), each generator and each prompt
kind, ``--samples`` records (batches of 16, batch k on seed k) are judged by the env's judge
(`lmgym.envs.promptedit.judge.JudgeCluster`, the task's held-out references):

* ``starting``: the task's starting prompt (``Write one JSON record: <description>.``);
* ``specified``: the starting prompt plus every field hint and the format cue in the
  curriculum's **train** phrasings (batch k: variant k of `phrasings.specified_prompt_in`;
  variant 0 is the edit library's own sentences);
* ``held_out``: the same cues in the **held-out** phrasings, which no training prompt holds;
* ``smollm2``: a free-form prompt SmolLM2-135M-Instruct wrote when asked for a prompt for the
  task's fields (`smollm2_request`; sampled at temperature 0.7, top-p 0.9, seed 0, one per
  task, written once and stored in ``smollm2_prompts.json`` beside the results, so a rerun
  judges the same prompt).

Generators (``--generators NAME=FOLDER ...``; default: the committed diffusion generator, the
committed AR comparison and the rule-based teacher ``rules``, the curriculum's rules
themselves, as a reference). Reported per cell: the share of records that parse as JSON,
pass the schema, and pass the schema and the task's semantic checks (TSR, the env's metric),
each with a 95% Wilson interval over the records; records of one cell are i.i.d. given their
batch seed. Cells are appended to ``cells.jsonl`` as they finish, so an interrupted run
resumes; the table goes to ``results.json`` and ``results.md``.

Run: ``LMGYM_DATA=/path/to/data python studies/promptedit_generator.py`` (64 samples) or
``--quick`` (16 samples, SuperNI: seconds, plus SmolLM2 writing its prompt once). `run(...)`
returns the results dict.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from lmgym.envs.promptedit.generators import RuleBasedGenerator
from lmgym.envs.promptedit.judge import JudgeCluster
from lmgym.envs.promptedit.metrics import parse_record
from lmgym.envs.promptedit.phrasings import specified_prompt_in
from lmgym.envs.promptedit.tasks import SchemaTask, load_task
from lmgym.io import append_jsonl, atomic_write_json, atomic_write_text, read_jsonl
from lmgym.stats import wilson_interval

TASKS = ("TruthfulQA", "SelfInstruct", "SuperNI", "MultiWOZ")
PROMPT_KINDS = ("starting", "specified", "held_out", "smollm2")
BATCH = 16


def default_generators() -> dict[str, str]:
    from lmgym.components.record_generator import AR_CHECKPOINT, DEFAULT_CHECKPOINT

    return {"diffusion": str(DEFAULT_CHECKPOINT), "ar": str(AR_CHECKPOINT), "rules": "rules"}


def smollm2_request(task: SchemaTask) -> str:
    """What SmolLM2 is asked: a prompt for the task's schema, fields named and described."""
    fields = "; ".join(f'"{name}": {text}' for name, text in task.field_descriptions.items())
    return (f"Write a prompt for a text generator. The prompt must make it output one JSON record, "
            f"{task.description}, with these fields: {fields}. Reply with the prompt only.")


#: how SmolLM2 writes its prompt: greedy decoding loops on a phrase at this size (measured:
#: "What is the truth about the most common misconceptions about the truth of ..."), so it samples
SMOLLM2_SAMPLING = dict(max_new_tokens=160, temperature=0.7, top_p=0.9)
SMOLLM2_SEED = 0


def smollm2_prompts(tasks: list[str], path: Path) -> dict[str, str]:
    """SmolLM2-135M-Instruct's prompt per task (`SMOLLM2_SAMPLING`, seed `SMOLLM2_SEED`),
    stored in `path` with the request and the settings."""
    stored = json.loads(path.read_text()) if path.exists() else {}
    missing = [t for t in tasks if t not in stored]
    if missing:
        from lmgym.models.backends import SamplingParams, make_text_backend

        backend = make_text_backend("hf", model="smollm2", threads=1)
        for name in missing:
            request = smollm2_request(load_task(name))
            answer = backend.complete([[{"role": "user", "content": request}]], SamplingParams(**SMOLLM2_SAMPLING),
                                      seeds=[SMOLLM2_SEED])[0]
            stored[name] = {"request": request, "prompt": " ".join(answer.text.split()),
                            "sampling": SMOLLM2_SAMPLING, "seed": SMOLLM2_SEED}
            atomic_write_json(path, stored)
    return {t: stored[t]["prompt"] for t in tasks}


def make_generator(name: str, folder: str, task: SchemaTask):
    if folder == "rules":
        return RuleBasedGenerator(task)
    from lmgym.components.record_generator import RecordGenerator

    return RecordGenerator(folder, threads=1)


def prompt_for(kind: str, task: SchemaTask, batch: int, free_form: dict[str, str]) -> str:
    if kind == "starting":
        return task.initial_prompt
    if kind == "smollm2":
        return free_form[task.name]
    return specified_prompt_in(task, held_out=kind == "held_out", variant=batch)


def measure_cell(generator, task: SchemaTask, judge: JudgeCluster, kind: str, samples: int,
                 free_form: dict[str, str]) -> dict:
    """Counts over `samples` records of one (generator, task, prompt kind) cell."""
    counts = {"json_valid": 0, "schema_valid": 0, "tsr": 0}
    prompts, seconds, example = [], 0.0, None
    for batch in range(samples // BATCH):
        prompt = prompt_for(kind, task, batch, free_form)
        started = time.perf_counter()
        texts = generator.generate([prompt], BATCH, batch)
        seconds += time.perf_counter() - started
        records = [parse_record(t) for t in texts]
        counts["json_valid"] += sum(r is not None for r in records)
        counts["schema_valid"] += sum(r is not None and not task.validate(r) for r in records)
        counts["tsr"] += round(judge.measure(texts).metrics["tsr"] * len(texts))
        example = example or texts[0]
        if prompt not in prompts:
            prompts.append(prompt)
    return {"samples": samples // BATCH * BATCH, **counts, "seconds": round(seconds, 2), "prompts": prompts,
            "example": example}


#: Quick: one batch of records per cell, on one task.
QUICK_SAMPLES, QUICK_TASKS = BATCH, ("SuperNI",)


def run(quick: bool = False, samples: int = 64, tasks: tuple[str, ...] = TASKS, generators: dict[str, str] | None = None,
        out: str | Path | None = None) -> dict:
    """Every (task, generator, prompt kind) cell into `out` (resumable; default
    runs/promptedit_generator); quick: `QUICK_SAMPLES` on `QUICK_TASKS` into a fresh temporary folder."""
    if quick:
        samples, tasks, out = QUICK_SAMPLES, QUICK_TASKS, out or tempfile.mkdtemp(prefix="lmgym-promptedit-generator-")
    out = Path(out or "runs/promptedit_generator")
    generators = generators or default_generators()
    cells_file = out / "cells.jsonl"
    done = {(c["generator"], c["task"], c["prompt"]): c for c in (read_jsonl(cells_file) if cells_file.exists() else [])
            if c["samples"] == samples}
    free_form = smollm2_prompts(list(tasks), out / "smollm2_prompts.json")
    for task_name in tasks:
        task = load_task(task_name)
        judge = JudgeCluster(task)
        for name, folder in generators.items():
            generator = None
            for kind in PROMPT_KINDS:
                if (name, task_name, kind) in done:
                    continue
                generator = generator or make_generator(name, folder, task)
                cell = {"generator": name, "folder": folder, "task": task_name, "prompt": kind,
                        **measure_cell(generator, task, judge, kind, samples, free_form)}
                append_jsonl(cells_file, cell)
                done[(name, task_name, kind)] = cell
                print(f"{task_name:12s} {name:9s} {kind:9s} schema {cell['schema_valid']:2d}/{cell['samples']}  "
                      f"TSR {cell['tsr']:2d}/{cell['samples']}  {cell['seconds']:.1f}s", flush=True)
    rows = []
    for (name, task_name, kind), cell in sorted(done.items(), key=lambda item: (
            TASKS.index(item[0][1]), PROMPT_KINDS.index(item[0][2]), list(generators).index(item[0][0])
            if item[0][0] in generators else 99)):
        if name not in generators or task_name not in tasks:
            continue
        n = cell["samples"]
        rows.append({**cell, **{f"{k}_rate": cell[k] / n for k in ("json_valid", "schema_valid", "tsr")},
                     **{f"{k}_interval": wilson_interval(cell[k], n) for k in ("json_valid", "schema_valid", "tsr")}})
    results = {"samples": samples, "batch": BATCH, "generators": generators, "smollm2_prompts": free_form, "rows": rows}
    atomic_write_json(out / "results.json", results)
    atomic_write_text(out / "results.md", to_markdown(results))
    return results


def to_markdown(results: dict) -> str:
    """One row per (task, prompt), a schema-valid and a TSR column per generator; the JSON
    parse rates and seconds are in results.json."""
    def rate(row: dict, key: str) -> str:
        low, high = row[f"{key}_interval"]
        return f"{row[f'{key}_rate']:.2f} [{low:.2f}, {high:.2f}]"

    names = list(results["generators"])
    cells = {(r["task"], r["prompt"], r["generator"]): r for r in results["rows"]}
    lines = [f"n = {results['samples']} records per cell; rate [95% Wilson interval].", "",
             "| task | prompt | " + " | ".join(f"{n} schema-valid | {n} TSR" for n in names) + " |",
             "| --- | --- | " + " | ".join("---: | ---:" for _ in names) + " |"]
    for task, kind in dict.fromkeys((r["task"], r["prompt"]) for r in results["rows"]):
        row = [cells.get((task, kind, n)) for n in names]
        lines.append(f"| {task} | {kind} | " + " | ".join(
            f"{rate(c, 'schema_valid')} | {rate(c, 'tsr')}" if c else "- | -" for c in row) + " |")
    lines += ["", "SmolLM2-135M-Instruct's prompts:", ""]
    lines += [f"* {task}: {prompt}" for task, prompt in results["smollm2_prompts"].items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=64, help="records per cell (a multiple of 16)")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--generators", nargs="+", default=None, metavar="NAME=FOLDER",
                        help="model folders to compare ('rules': the rule-based teacher); default: diffusion, ar, rules")
    parser.add_argument("--out", default="runs/promptedit_generator")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SAMPLES} samples, {', '.join(QUICK_TASKS)}")
    args = parser.parse_args()
    generators = dict(g.split("=", 1) for g in args.generators) if args.generators else None
    print(to_markdown(run(args.quick, args.samples, tuple(args.tasks), generators, args.out)))


if __name__ == "__main__":
    main()
