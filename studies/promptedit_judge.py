"""Speed of one PromptEdit judge pass over 64 records, and seconds per cycle (generate + judge).

Per task, in one process: the judge cluster is built (reference embeddings, n-gram index and
trigram LM computed once and cached), then for R rounds a fresh batch of 64 records is written
by the env's generator (a new seed each round, so the batch's embeddings are not cached) and

* ``judge_new_s``: one full pass (parse, schema, checks, metrics, statements, rubric, reward)
  with the reference embeddings cached and the batch embedded fresh;
* ``judge_cached_s``: the same batch again, every embedding now cached (the issue's "with
  embeddings cached" figure);
* ``floor_s``: the reference run beside it: only json.loads + schema validation of the same
  64 texts, the part any judge pays; ``judge_new / floor`` is the load-independent ratio;
* ``generate_s``: the generator's time for the 64 records;
* ``build_s``: making the env (task, references, judge cluster) in this process; with another
  embedder, building its judge cluster (embedding the references).

Medians over the rounds. With ``--minilm`` (and not quick) the same is measured with the
all-MiniLM-L6-v2 embedder (`lmgym.components.embeddings.MiniLMEmbedder`) on one task. The
machine is shared: absolute seconds move with its load; ratios move much less.

Run: ``python studies/promptedit_judge.py [--minilm]`` (5 rounds, every task) or ``--quick``
(1 round, SelfInstruct: seconds). `run(quick)` returns the figures as a dict. ``--lm-judge`` instead compares the
SmolLM2 rubric judge with the rule judge on 4 SelfInstruct batches (`measure_lm_judge`).
``--memory N`` instead makes N judge calls on fresh 16-record batches (`measure_memory`) and
reports the process's resident memory every N/10 calls: the judge's caches are bounded in MB,
so it must level off.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from lmgym.data import DataNotFoundError
from lmgym.envs.promptedit.edits import FORMAT_SENTENCE, apply_edit
from lmgym.envs.promptedit.env import PromptEditEnv
from lmgym.envs.promptedit.judge import JudgeCluster, RuleRubricJudge, describe
from lmgym.envs.promptedit.metrics import parse_record
from lmgym.envs.promptedit.tasks import LOADERS

BATCH = 64
TARGET_S = 1.0


def _timed(function, *args):
    start = time.perf_counter()
    value = function(*args)
    return value, time.perf_counter() - start


def measure_task(task: str, rounds: int, embedder=None) -> dict:
    env, build_s = _timed(lambda: PromptEditEnv(task, batch_size=BATCH))
    judge = env.judge
    if embedder is not None:  # then "build" is this judge's: embedding the references with `embedder`
        judge, build_s = _timed(JudgeCluster, env.task, embedder)
    # a mid-specific prompt: every library append but the examples, so batches mix successes and failures
    prompt = env.task.initial_prompt
    for index, name in enumerate(env.library.entries):
        if not name.startswith(("add example", "delete", "restart")):
            prompt = apply_edit(prompt, env.library.command(index, prompt)).prompt
    rows = []
    for seed in range(rounds):
        texts, generate_s = _timed(env.generator.generate, [prompt], BATCH, 1_000 + seed)
        verdict, judge_new_s = _timed(judge.evaluate, texts)
        _, judge_cached_s = _timed(judge.evaluate, texts)
        _, floor_s = _timed(lambda: [env.task.validate(r) for r in map(parse_record, texts) if r is not None])
        rows.append({"generate_s": generate_s, "judge_new_s": judge_new_s, "judge_cached_s": judge_cached_s,
                     "floor_s": floor_s, "tsr": verdict.metrics["tsr"]})
    result = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
    result["judge_new_over_floor"] = result["judge_new_s"] / max(result["floor_s"], 1e-9)
    result["build_s"] = build_s
    result["seconds_per_cycle_batch64"] = result["generate_s"] + result["judge_new_s"]
    return result


def measure_lm_judge(task: str, seeds: range) -> dict:
    """`LMRubricJudge` (SmolLM2-135M-Instruct) against the rule judge on the same findings.

    Batches of 16 for two prompts (the starting one, and one with the format sentence and a
    field hint) and each seed; reports the seconds per judgement, the share of questions both
    judges answer alike and each judge's share of "yes".
    """
    import torch

    from lmgym.components.lm_judge import LMRubricJudge

    torch.set_num_threads(1)
    lm_judge, load_s = _timed(LMRubricJudge)
    env = PromptEditEnv(task, batch_size=16)
    hint = env.library.command(0, env.task.initial_prompt).removeprefix("append: ")
    prompts = [env.task.initial_prompt, f"{env.task.initial_prompt} {hint} {FORMAT_SENTENCE}"]
    rows = []
    for prompt in prompts:
        for seed in seeds:
            findings = env.judge.measure(env.generator.generate([prompt], 16, seed))
            statements = describe(findings)
            (lm_answers, _), seconds = _timed(lm_judge.judge, env.task, env.judge.questions, findings, statements)
            rule_answers, _ = RuleRubricJudge().judge(env.task, env.judge.questions, findings, statements)
            rows.append({"seconds": seconds, "agreement": np.mean([lm_answers[q] == rule_answers[q] for q in lm_answers]),
                         "lm_yes": np.mean(list(lm_answers.values())), "rule_yes": np.mean(list(rule_answers.values()))})
    return {"load_s": load_s, **{k: float(np.mean([r[k] for r in rows])) for k in rows[0]}, "judgements": len(rows)}


def resident_mb() -> float:
    """This process's resident set size now (Linux /proc), in MiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _made_new(text: str, tag: str) -> str:
    """`text` with the word `tag` added (to a record's first string value, so it stays a
    record): a text no cache has seen, with n-grams and trigrams of its own."""
    try:
        record = json.loads(text)
    except ValueError:
        return f"{text} {tag}"
    key = next((k for k, v in record.items() if isinstance(v, str)), None) if isinstance(record, dict) else None
    if key is None:
        return f"{text} {tag}"
    return json.dumps({**record, key: f"{record[key]} {tag}"})


def measure_memory(task: str, calls: int, batch: int = 16) -> dict:
    """Resident MiB before the first call and after every calls/10 judge calls, each a full
    `JudgeCluster.evaluate` of `batch` texts that no cache has seen.

    Texts come from the rule-based generator with a new seed per call (cheap), each then made
    new with a word of its own (`_made_new`): the generator alone repeats its favourite
    records, which the caches would serve without growing, and the bound would go untested.
    """
    from lmgym.envs.promptedit.generators import RuleBasedGenerator

    env = PromptEditEnv(task, batch_size=batch, generator=RuleBasedGenerator)
    prompt, generator, judge = env.task.initial_prompt, env.generator, env.judge
    embedder, lm = judge.embedder, judge.language_model
    checkpoints, start = [{"calls": 0, "resident_mb": round(resident_mb(), 1)}], time.perf_counter()
    for call in range(1, calls + 1):
        texts = generator.generate([prompt], batch, call)
        judge.evaluate([_made_new(text, f"w{call}x{i}") for i, text in enumerate(texts)])
        if call % max(calls // 10, 1) == 0:
            checkpoints.append({"calls": call, "resident_mb": round(resident_mb(), 1),
                                "embedding_cache_mb": round(embedder.cached_bytes / 2**20, 2),
                                "embedding_cache_texts": len(embedder._cache), "lm_memo_entries": len(lm._memo)})
    first, last = checkpoints[1]["resident_mb"], checkpoints[-1]["resident_mb"]
    return {"task": task, "calls": calls, "batch": batch, "texts_judged": calls * batch,
            "seconds": round(time.perf_counter() - start, 1),
            "embedding_cache_cap_mb": embedder.cache_bytes / 2**20,
            "lm_memo_cap_entries": lm.memo_entries, "checkpoints": checkpoints,
            "growth_after_first_tenth_mb": round(last - first, 1)}


def run(quick: bool = False, minilm: bool = False) -> dict:
    rounds = 1 if quick else 5
    tasks, skipped = {}, {}
    for task in ("SelfInstruct",) if quick else sorted(LOADERS):
        try:
            tasks[task] = measure_task(task, rounds)
        except DataNotFoundError as error:
            skipped[task] = str(error).splitlines()[0]
    result = {"batch": BATCH, "rounds": rounds, "embedder": "hashed n-gram TF-IDF", "tasks": tasks, "skipped": skipped,
              "all_under_target_cached": all(t["judge_cached_s"] < TARGET_S for t in tasks.values())}
    if minilm and not quick and "SelfInstruct" in tasks:
        import torch

        from lmgym.components.embeddings import MiniLMEmbedder

        torch.set_num_threads(1)
        result["minilm_SelfInstruct"] = measure_task("SelfInstruct", rounds, MiniLMEmbedder())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 round, SelfInstruct")
    parser.add_argument("--minilm", action="store_true", help="also measure with all-MiniLM-L6-v2 (needs torch)")
    parser.add_argument("--lm-judge", action="store_true", help="only compare the SmolLM2 rubric judge with the rule judge")
    parser.add_argument("--memory", type=int, metavar="CALLS", help="only measure memory over CALLS judge calls")
    parser.add_argument("--task", default="TruthfulQA", help="the task of --memory")
    args = parser.parse_args()
    if args.memory:
        print(json.dumps(measure_memory(args.task, args.memory), indent=1))
        return
    if args.lm_judge:
        print(json.dumps(measure_lm_judge("SelfInstruct", range(2))))
        return
    result = run(args.quick, args.minilm)
    header = "| task | judge 64 new (s) | judge 64 cached (s) | floor (s) | judge/floor | generate 64 (s) | build (s) |"
    print(header + "\n|" + " --- |" * 7)
    rows = dict(result["tasks"], **({"SelfInstruct + MiniLM": result["minilm_SelfInstruct"]} if "minilm_SelfInstruct" in result else {}))
    for task, r in rows.items():
        print(f"| {task} | {r['judge_new_s']:.3f} | {r['judge_cached_s']:.3f} | {r['floor_s']:.3f} | "
              f"{r['judge_new_over_floor']:.1f} | {r['generate_s']:.3f} | {r['build_s']:.2f} |")
    print(json.dumps({k: v for k, v in result.items() if k not in ("tasks", "minilm_SelfInstruct")}))


if __name__ == "__main__":
    main()
