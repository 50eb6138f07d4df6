"""Structured Agent Distillation against token-level KD, SeqKD and reverse KL: one family end to end.

1. The teacher (an AR ReAct checkpoint or LoRA adapter trained here) plays seeds ``1_000_000 + k`` of ``--env``'s
   train split as an `lm` agent (greedy); its rollouts, all of them, are the distillation data
   (`record_rollouts`, resumable).
2. Students at each ``--size`` (``name:hidden:layers``) learn from them by every ``--method``
   (`lmgym.training.distill`), plus SAD's ablations at the first size (no projection, no
   curriculum, reason loss only, action loss only). Same data, steps, batch and seed for all.
3. Every student and the teacher play held-out seeds ``0..N-1`` of ``--env``'s test split as `lm`
   agents in one `lmgym bench` spec per env (paired seeds), plus ``--eval-env`` envs (e.g. the
   real HotPotQA dev questions, seeded), where the ablations do not play (they are compared on
   ``--env``), and ``--dev-episodes`` seeds of ``--env``'s dev split (the teacher and every
   method's students).
4. Per cell: success (EM for HotPotQA) with its Wilson interval; CoT match (below); reasoning
   tokens per step; steps per episode; completion tokens per second of decoding; and an exact
   McNemar test of SAD against token-level KD on the paired seeds.
5. Each method's student is chosen on the dev split (highest dev success, ties broken by the
   teacher-forced action-token accuracy on the teacher's dev turns) and reported on test
   (`chosen_on_dev`); ``--install`` installs that one. Test seeds choose nothing.

CoT match rate (our definition; SAD publishes none): on the states the *teacher* visited in
its held-out episodes (its well-formed turns: a Thought and an Action line), the student is
given the teacher's exact prompt and writes its turn
greedily; a state matches when the student's reasoning (the text after ``Thought:``, with
whitespace collapsed and case folded) equals the teacher's. Reported as a rate over states with
a Wilson interval; the same states for every student. Action match is the same for the action. Teacher-forced fit, on the same held-out turns: forward
KL(teacher || student) per REASON and per ACT token, and the share of ACT tokens whose argmax is
the teacher's (it separates methods at budgets too small for whole turns to come out right).

    python studies/distill.py --out runs/distill/hotpotqa --episodes 50
    python studies/distill.py --combine runs/distill/hotpotqa runs/distill/alfworld --out runs/distill/all

Outputs in ``--out``: ``teacher_rollouts.jsonl``, ``students/<name>/`` (checkpoints and
metrics), ``eval-<k>/`` (the benchmark run of env k), ``summary.json``, ``table.md``, ``success_vs_size.png``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import shlex
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import torch

import lmgym  # noqa: F401  (registers the envs)
from lmgym.agents.registry import make_agent
from lmgym.agents.runner import record_rollouts
from lmgym.benchmarks.report import _pyplot
from lmgym.benchmarks.runner import read_rows, run_benchmark
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec, parse_call
from lmgym.io import atomic_write_json, atomic_write_text, read_jsonl
from lmgym.envs.registry import family_of
from lmgym.models import zoo
from lmgym.models.checkpoints import install_checkpoint, load_checkpoint, read_meta
from lmgym.models.generation import generate
from lmgym.react import PromptProfile, parse_completion
from lmgym.rollouts import Episode
from lmgym.stats import mcnemar_exact, wilson_interval
from lmgym.training.distill import (METHODS, DistillConfig, at_completion, collate_turns, completion_window, encode_turns,
                                    forward_kl, teacher_log_probs, train, write_teacher_cache)
from lmgym.training.transcripts import encode_episode

TRAIN_SEEDS_FROM = 1_000_000
#: Where ``--install`` puts each method's best student (committed: a few hundred KB each).
DISTILL_ZOO = "distill"
ABLATIONS = {"sad-no-projection": {"projection": False}, "sad-no-curriculum": {"curriculum": False},
             "sad-reason-only": {"spans": "reason"}, "sad-act-only": {"spans": "act"}}


def students(args) -> list[tuple[str, str, dict]]:
    """(run name, size name, DistillConfig fields) of every student."""
    runs = []
    for index, size in enumerate(args.size):
        name, hidden, layers = size.split(":")
        shape = {"hidden_size": int(hidden), "num_layers": int(layers)}
        for method in args.methods:
            runs.append((f"{name}-{method}", name, {"method": method, **shape}))
        if index == 0 and not args.no_ablations:
            runs += [(f"{name}-{ablation}", name, {"method": "sad", **shape, **fields})
                     for ablation, fields in ABLATIONS.items()]
    return runs


def train_student(cfg: DistillConfig) -> float | None:
    """Train (or finish) one student; its training seconds over every attempt, as its checkpoint
    records them (None for a checkpoint saved before they were recorded)."""
    train(cfg)
    return read_meta(Path(cfg.out) / "checkpoint").get("train_seconds")


def trained_steps(checkpoint: Path) -> int:
    """Steps a student's checkpoint holds; 0 before its first save (read_meta refuses a missing folder)."""
    return (read_meta(checkpoint).get("step") or 0) if checkpoint.is_dir() else 0


def normalized(text: str) -> str:
    return " ".join(text.split()).casefold()


@torch.no_grad()
def cot_match(model, tokenizer, meta: dict, teacher_episodes: list[Episode], batch_size: int = 64) -> dict:
    """Reasoning and action agreement of a loaded checkpoint with the teacher's own turns,
    given the teacher's exact prompts (see the module docstring)."""
    prompt = meta["react_prompt"]
    profile = PromptProfile.from_meta(prompt)
    states = [(example.ids[:example.answer_start], step)  # only the teacher's well-formed turns: an empty
              for episode in teacher_episodes                # reasoning would "match" a student's broken turn
              for example, step in zip(encode_episode(tokenizer, episode, profile, layout="mdlm"), episode.steps)
              if step.reasoning.strip() and not json.loads(step.agent_json or "{}").get("format_error")]
    reason_hits = act_hits = 0
    for begin in range(0, len(states), batch_size):
        chunk = states[begin:begin + batch_size]
        batch = collate_turns([(ids, [], []) for ids, _ in chunk], tokenizer.pad_token_id)
        output = generate(model, batch["input_ids"], batch["attention_mask"], max_new_tokens=prompt["max_new_tokens"],
                          eos_token_id=tokenizer.eos_token_id)
        for row, (_, step) in enumerate(chunk):
            written = parse_completion(tokenizer.decode(output.tokens[row, :output.lengths[row]], skip_special_tokens=True))
            reason_hits += normalized(written.reasoning) == normalized(step.reasoning)
            act_hits += normalized(written.action) == normalized(step.action)
    n = len(states)
    return {"states": n, "cot_match": reason_hits / n if n else None, "cot_match_ci95": wilson_interval(reason_hits, n),
            "action_match": act_hits / n if n else None}


def teacher_turns(teacher, tokenizer, meta: dict, teacher_episodes: list[Episode], bf16: bool = False) -> tuple[list, list[torch.Tensor]]:
    """The teacher's held-out turns of an env and its distributions on them (at the students'
    teacher precision): computed once per env, shared by every student's `teacher_forced_fit`."""
    turns, _ = encode_turns(tokenizer, teacher_episodes, PromptProfile.from_meta(meta["react_prompt"]), meta["max_answer_tokens"])
    return turns, teacher_log_probs(teacher, turns, tokenizer.pad_token_id, bf16=bf16)


@torch.no_grad()
def teacher_forced_fit(model, pad_id: int, turns: list, cached: list[torch.Tensor], batch_size: int = 16) -> dict:
    """How closely the model follows the teacher on the teacher's held-out turns (`teacher_turns`),
    teacher-forced: forward KL(teacher || model) per REASON and per ACT token, and the share of ACT
    tokens whose argmax is the teacher's token (a budget too small to write whole turns still shows here)."""
    totals = {"reason_kl": 0.0, "act_kl": 0.0, "act_hits": 0, "reason": 0, "act": 0}
    for begin in range(0, len(turns), batch_size):
        batch = completion_window(collate_turns([(t.context, t.answer, t.roles) for t in turns[begin:begin + batch_size]], pad_id))
        logits = model(batch["input_ids"], attention_mask=batch["attention_mask"],
                       logits_to_keep=batch["answer"].shape[1] + 1).logits[:, :-1]
        reference = at_completion(cached[begin:begin + batch_size], batch["answer"])
        for span in ("reason", "act"):
            count = int(batch[span].sum())
            totals[f"{span}_kl"] += forward_kl(logits, reference, batch[span]).item() * count
            totals[span] += count
        totals["act_hits"] += int(((logits.argmax(-1) == batch["targets"]) & batch["act"]).sum())
    return {"heldout_kl_reason": totals["reason_kl"] / max(totals["reason"], 1),
            "heldout_kl_act": totals["act_kl"] / max(totals["act"], 1),
            "act_token_accuracy": totals["act_hits"] / max(totals["act"], 1)}


def decoding_stats(tokenizer, transcripts: list[dict]) -> dict:
    """Reasoning tokens per step (the agent's tokenizer) and completion tokens per second of decoding."""
    steps = [step for rollout in transcripts for step in rollout["steps"]]
    reasoning = [len(tokenizer.encode(step["reasoning"], add_special_tokens=False)) for step in steps]
    seconds = sum(step["seconds"] for step in steps)
    return {"reasoning_tokens_per_step": sum(reasoning) / len(reasoning) if reasoning else None,
            "tokens_per_s": sum(step["completion_tokens"] for step in steps) / seconds if seconds else None}


def plot(cells: list[dict], envs: list[str], path: Path) -> None:
    """Per env (a column, at most four to a band): success (top) and teacher-forced action token
    accuracy (bottom) against student parameters, one line per method, the teacher's success dashed."""
    plt = _pyplot()
    per_band = min(len(envs), 4)
    bands = -(-len(envs) // per_band)
    figure, axes = plt.subplots(2 * bands, per_band, figsize=(4.2 * per_band, 7 * bands), squeeze=False)
    for unused in range(len(envs), bands * per_band):
        axes[-2][unused % per_band].axis("off")
        axes[-1][unused % per_band].axis("off")
    for index, env in enumerate(envs):
        band, column = divmod(index, per_band)
        top, bottom = axes[2 * band][column], axes[2 * band + 1][column]
        for method in METHODS:
            here = sorted((c for c in cells if c["env"] == env and c["method"] == method and not c["ablation"]),
                          key=lambda c: c["parameters"])
            if here:
                size = [c["parameters"] for c in here]
                success = [c["success"] for c in here]
                errors = [[c["success"] - c["success_ci95"][0] for c in here], [c["success_ci95"][1] - c["success"] for c in here]]
                top.errorbar(size, success, yerr=errors, marker="o", capsize=3, label=method)
                bottom.plot(size, [c["act_token_accuracy"] for c in here], marker="o", label=method)
        teacher = next((c for c in cells if c["env"] == env and c["method"] == "teacher"), None)
        if teacher:
            top.axhline(teacher["success"], color="grey", linestyle="--", label=f"teacher ({teacher['parameters'] / 1e6:.2f}M)")
        top.set(xscale="log", ylabel="success, 95% CI", title=env.replace(" (", "\n("), ylim=(-0.02, 1.02))
        bottom.set(xscale="log", xlabel="student parameters", ylabel="action tokens = teacher's (teacher-forced)",
                   ylim=(-0.02, 1.02))
        top.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def chosen_on_dev(cells: list[dict], dev_env: str, test_env: str) -> list[dict]:
    """Per method, the student with the highest success on `dev_env` (ties: the higher action-token
    accuracy on the teacher's dev turns, then the first), and its cell on `test_env`, where it is
    reported: the choice reads no test episode."""
    chosen = []
    for method in dict.fromkeys(c["method"] for c in cells if c["env"] == dev_env and c["method"] != "teacher"):
        best = max((c for c in cells if c["env"] == dev_env and c["method"] == method and not c["ablation"]),
                   key=lambda c: (c["success"], c.get("act_token_accuracy") or 0.0))
        test = next(c for c in cells if c["env"] == test_env and c["name"] == best["name"])
        chosen.append({"method": method, "student": best["name"], "dev_wins": best["wins"], "dev_n": best["n"],
                       "test_wins": test["wins"], "test_n": test["n"], "test_success": test["success"],
                       "test_success_ci95": test["success_ci95"]})
    return chosen


def chosen_table(chosen: list[dict], dev_env: str, test_env: str) -> str:
    lines = [f"Each method's student chosen on {dev_env}, reported on {test_env}:", "",
             "| method | student | dev wins | test success [95% CI] |", "| --- | --- | ---: | --- |"]
    lines += [f"| {c['method']} | {c['student']} | {c['dev_wins']} / {c['dev_n']} | {c['test_success']:.2f} "
              f"[{c['test_success_ci95'][0]:.2f}, {c['test_success_ci95'][1]:.2f}] ({c['test_wins']} / {c['test_n']}) |"
              for c in chosen]
    return "\n".join(lines) + "\n"


def row_name(cell: dict) -> str:
    """A cell's row: its method, or its ablation's name (``sad-no-projection``)."""
    return cell["name"].split("-", 1)[1] if cell["ablation"] else cell["method"]


def interval(cell: dict) -> str:
    return f"{cell['success']:.2f} [{cell['success_ci95'][0]:.2f}, {cell['success_ci95'][1]:.2f}]"


def success_matrix(cells: list[dict]) -> str:
    """The paper's shape: a row per method (ablations last), a column per env and size, success with its interval."""
    columns = list(dict.fromkeys((c["env"], c["size"]) for c in cells if c["size"] != "teacher"))
    names = list(dict.fromkeys(row_name(c) for c in cells if c["size"] != "teacher"))
    lines = ["| method | " + " | ".join(f"{env} {size}" for env, size in columns) + " |",
             "| --- |" + " --- |" * len(columns)]
    teachers = {c["env"]: c for c in cells if c["method"] == "teacher"}
    lines.append("| teacher | " + " | ".join(
        interval(teachers[env]) if env in teachers else "-" for env, _ in columns) + " |")
    for name in names:
        row = []
        for env, size in columns:
            cell = next((c for c in cells if c["env"] == env and c["size"] == size and row_name(c) == name), None)
            row.append(interval(cell) if cell else "-")
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def table(cells: list[dict], tests: list[dict]) -> str:
    lines = ["| env | size | method | params | n | success [95% CI] | CoT match [95% CI] | action match | held-out KL reason / act | act token acc | reasoning tok/step | steps | tok/s |",
             "| --- | --- | --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c in cells:
        lines.append(f"| {c['env']} | {c['size']} | {row_name(c)} | {c['parameters']:,} | {c['n']} | "
                     f"{interval(c)} | "
                     + (f"{c['cot_match']:.2f} [{c['cot_match_ci95'][0]:.2f}, {c['cot_match_ci95'][1]:.2f}] | {c['action_match']:.2f} | "
                        f"{c['heldout_kl_reason']:.2f} / {c['heldout_kl_act']:.2f} | {c['act_token_accuracy']:.2f}"
                        if c.get("cot_match") is not None else "- | - | - | -")
                     + f" | {c['reasoning_tokens_per_step']:.1f} | {c['steps']:.2f} | {c['tokens_per_s']:.0f} |")
    lines += ["", "| env | size | SAD wins | KD wins | SAD only | KD only | McNemar exact p | SAD beats KD? |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for t in tests:
        verdict = ("yes" if t["sad_only"] > t["kd_only"] else "no (KD ahead)") if t["p"] < 0.05 else "not shown (p >= 0.05)"
        lines.append(f"| {t['env']} | {t['size']} | {t['sad_wins']} | {t['kd_wins']} | {t['sad_only']} | {t['kd_only']} | "
                     f"{t['p']:.3f} | {verdict} |")
    return "\n".join(lines) + "\n"


def combine(runs: list[str], out: Path) -> None:
    """One table and one plot from several runs of this script (one family each). An env distilled
    from several teachers gets a column set per teacher, named by its size, and by its folder
    where two teachers of the env have the same size."""
    summaries = []
    for run in runs:
        path = Path(run) / "summary.json"
        if not path.is_file():
            sys.exit(f"error: {path} not found (run studies/distill.py --out {run} first)")
        summaries.append(json.loads(path.read_text()))
    teachers = [{c["env"]: (c["parameters"], Path(summary["options"]["teacher"]).name)
                 for c in summary["cells"] if c["method"] == "teacher"}
                for summary in summaries]  # per run: env -> its teacher (parameters, folder name)
    distinct = collections.defaultdict(set)
    for run_teachers in teachers:
        for env, teacher in run_teachers.items():
            distinct[env].add(teacher)

    def column(env: str, teacher: tuple[int, str]) -> str:
        if len(distinct[env]) == 1:
            return env
        parameters, name = teacher
        shared = sum(size == parameters for size, _ in distinct[env]) > 1
        return f"{env} ({parameters / 1e6:.1f}M teacher{f' {name}' if shared else ''})"

    cells, tests = [], []
    for summary, run_teachers in zip(summaries, teachers):
        for row in summary["cells"] + summary["tests"]:
            row["env"] = column(row["env"], run_teachers[row["env"]])
        cells += summary["cells"]
        tests += summary["tests"]
    out.mkdir(parents=True, exist_ok=True)
    plot(cells, list(dict.fromkeys(c["env"] for c in cells)), out / "success_vs_size.png")
    markdown = success_matrix(cells) + "\n" + table(cells, tests)
    atomic_write_text(out / "table.md", markdown)
    print(markdown)


def step_seconds(quick: bool = False, repeats: int | None = None) -> dict:
    """One kd training step (forward, forward KL from the cached teacher, backward) on the same
    16 HotPotQA-Gen turns with logits over the whole sequence and over the completion window only
    (what the trainer does), alternated so both see the same machine load; seconds per step
    and their ratio. The turns come from the grounded teacher's episodes on 8 training seeds,
    the distributions from the installed HotPotQA teacher."""
    from lmgym.training.distill import student_size
    from lmgym.models.networks import build_model, llama_config
    from lmgym.rollouts import Episode

    repeats = repeats or (3 if quick else 10)
    teacher, tokenizer, meta = load_checkpoint("react/hotpotqa-preact-ar", dtype=torch.float32)
    profile = PromptProfile.from_meta(meta["react_prompt"])
    path = Path(tempfile.mkdtemp()) / "teacher.jsonl"
    record_rollouts("lmgym/HotPotQA-Gen-v0", make_agent("teacher"), range(TRAIN_SEEDS_FROM, TRAIN_SEEDS_FROM + 8), path,
                    won_only=True)
    episodes = [Episode.from_dict(row) for row in read_jsonl(path)]
    turns = encode_turns(tokenizer, episodes, profile, meta["max_answer_tokens"])[0][:16]
    cached = teacher_log_probs(teacher, turns, tokenizer.pad_token_id)
    student = build_model(llama_config(len(tokenizer), student_size(DistillConfig(hidden_size=40), 440), bidirectional=False,
                                       tokenizer=tokenizer), 0)
    full = collate_turns([(t.context, t.answer, t.roles) for t in turns], tokenizer.pad_token_id)
    window = completion_window(full)

    def step(batch: dict, keep: int | None) -> float:
        begun = time.perf_counter()
        logits = student(batch["input_ids"], attention_mask=batch["attention_mask"],
                         **({"logits_to_keep": keep} if keep else {})).logits[:, :-1]
        forward_kl(logits, at_completion(cached, batch["answer"]), batch["answer"]).backward()
        return time.perf_counter() - begun

    seconds = {"full": [], "window": []}
    for _ in range(repeats):
        seconds["full"].append(step(full, None))
        seconds["window"].append(step(window, window["answer"].shape[1] + 1))
    best = {k: min(v) for k, v in seconds.items()}
    return {"kd_step_s_full_logits": round(best["full"], 4), "kd_step_s_completion_window": round(best["window"], 4),
            "speedup": round(best["full"] / best["window"], 2), "turns": len(turns),
            "tokens": list(full["input_ids"].shape), "completion_window": window["answer"].shape[1],
            "note": "best of the alternated repeats, one thread; compare the ratio, not the seconds"}


def bf16_step_seconds(hidden_size: int = 384, num_layers: int = 6, repeats: int = 3, threads: int = 2) -> dict:
    """One AR training step (`lmgym.training.lm.ar_loss`, backward, AdamW) of a teacher-sized
    Llama (default: the 11M HotPotQA teacher's shape) on 16 random 300-token rows, in float32
    and under bfloat16 autocast (`--bf16`), alternated; seconds per step and their ratio. The
    ratio depends on the CPU: bf16 matrix units (avx512_bf16, AMX) make autocast faster."""
    from lmgym.models.networks import TinyConfig, build_model, llama_config
    from lmgym.training.lm import ar_loss

    size = TinyConfig(hidden_size=hidden_size, num_layers=num_layers, num_heads=4, num_kv_heads=2,
                      intermediate_size=3 * hidden_size, max_positions=432)
    model = build_model(llama_config(1024, size, bidirectional=False), 0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(3, 1024, (16, 300), generator=torch.Generator().manual_seed(0))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "loss_mask": torch.ones_like(ids, dtype=torch.bool)}

    def step(bf16: bool) -> float:
        begun = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = ar_loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return time.perf_counter() - begun

    seconds = {"fp32": [], "bf16": []}
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)  # the teacher trained with two; restored for the suite's next entries
    try:
        for _ in range(repeats):
            seconds["fp32"].append(step(False))
            seconds["bf16"].append(step(True))
    finally:
        torch.set_num_threads(previous)
    best = {k: min(v) for k, v in seconds.items()}
    return {"ar_step_s_fp32": round(best["fp32"], 3), "ar_step_s_bf16_autocast": round(best["bf16"], 3),
            "speedup": round(best["fp32"] / best["bf16"], 2), "parameters": sum(p.numel() for p in model.parameters()),
            "threads": threads, "note": "best of the alternated repeats; compare the ratio, not the seconds"}


def run(quick: bool = False) -> dict:
    """The trainer's timings (the whole study is `main`): the completion-window speed-up, and bf16
    autocast against float32 on a teacher-sized training step. Quick: one repeat each, and the
    bf16 step on a 64-wide, 1-layer model (seconds: a check of the pipeline, not a figure)."""
    torch.set_num_threads(1)
    bf16 = bf16_step_seconds(hidden_size=64, num_layers=1, repeats=1) if quick else bf16_step_seconds(repeats=10)
    return {**step_seconds(quick, repeats=1 if quick else None), "teacher_step_bf16": bf16}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="lmgym/HotPotQA-Gen-v0", help="env the teacher plays for data and everyone is evaluated on")
    parser.add_argument("--teacher", default="react/hotpotqa-preact-ar",
                        help="teacher checkpoint folder or zoo name (e.g. the ladder's ladder/hotpotqa-smollm2-sft)")
    parser.add_argument("--teacher-bf16", action="store_true",
                        help="the teacher's forward passes under bfloat16 autocast (DistillConfig.teacher_bf16)")
    parser.add_argument("--out", default="runs/distill/hotpotqa")
    parser.add_argument("--teacher-episodes", type=int, default=600, help="teacher episodes on training seeds (the data)")
    parser.add_argument("--size", action="append", default=None, help="student size name:hidden:layers (repeat; default small:40:2, tiny:16:2)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--no-ablations", action="store_true")
    parser.add_argument("--steps", type=int, default=600, help="training steps per student (HotPotQA's table: 600)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=50, help="held-out seeds 0..N-1 of --env's test split")
    parser.add_argument("--dev-episodes", type=int, default=50,
                        help="seeds 0..N-1 of --env's dev split, where each method's student is chosen (0: no choice)")
    parser.add_argument("--eval-env", action="append", default=[], help="more envs to evaluate on (ID or ID(key=value, ...)), seeded")
    parser.add_argument("--max-steps", type=int, default=8, help="step limit per episode (teacher data and evaluation)")
    parser.add_argument("--batch", type=int, default=8, help="episodes each lm agent plays at once")
    parser.add_argument("--workers", type=int, default=1, help="processes playing the evaluation episodes, one thread each")
    parser.add_argument("--jobs", type=int, default=1, help="students trained at once, one process and one thread each "
                        "(the stages that run alone use max(jobs, workers) threads)")
    parser.add_argument("--install", action="store_true",
                        help=f"copy each method's student chosen on the dev split, in half precision, to the zoo as "
                             f"{DISTILL_ZOO}/<family>-<method>")
    parser.add_argument("--combine", nargs="+", metavar="RUN", default=None,
                        help="only write --out's table.md and success_vs_size.png from these finished runs' summary.json")
    args = parser.parse_args()
    if args.combine:
        return combine(args.combine, Path(args.out))
    args.size = args.size or ["small:40:2", "tiny:16:2"]
    if args.install and not args.dev_episodes:
        parser.error("--install installs the students chosen on the dev split: give --dev-episodes > 0")
    args.teacher = str(zoo.resolve(args.teacher))  # an installed name ("react/hotpotqa-preact-ar") or a folder
    alone = max(args.jobs, args.workers)  # the stages that run by themselves (teacher data and cache, metrics) use every core
    out, started = Path(args.out), time.time()
    timings: dict[str, float] = {}

    # --- 1. data: the teacher's own rollouts on training seeds ---
    rollouts = out / "teacher_rollouts.jsonl"
    lm = {"few_shot": 0, "batch_size": args.batch, "backend_kwargs": {"threads": 1}}  # evaluation: one thread per worker
    counts = record_rollouts(args.env, make_agent("lm", model=args.teacher, **{**lm, "backend_kwargs": {"threads": alone}}),
                             range(TRAIN_SEEDS_FROM, TRAIN_SEEDS_FROM + args.teacher_episodes), rollouts, slots=args.batch,
                             max_steps=args.max_steps, env_kwargs={"split": "train"})  # never a dev or test task
    timings["teacher_rollouts_s"] = time.time() - started
    print(f"teacher rollouts: {counts} ({timings['teacher_rollouts_s']:.0f} s)", flush=True)

    # --- 2. students ---
    runs = students(args)
    configs = [DistillConfig(teacher=args.teacher, data=(str(rollouts),), out=str(out / "students" / name), steps=args.steps,
                             batch_size=args.batch_size, lr=args.lr, seed=args.seed, teacher_cache=str(out / "teacher_cache"),
                             teacher_bf16=args.teacher_bf16,
                             quiet=True, **fields)
               for name, _, fields in runs]
    unfinished = [cfg for cfg in configs if trained_steps(Path(cfg.out) / "checkpoint") < cfg.steps]
    if any(cfg.method in ("kd", "sad") for cfg in unfinished):  # their teacher distributions, computed once for all
        write_teacher_cache(dataclasses.replace(unfinished[0], threads=alone))
    if args.jobs > 1:  # spawned, not forked: a child forked after torch ran its thread pool can hang
        with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
            seconds = list(pool.map(train_student, configs))
    else:
        seconds = [train_student(cfg) for cfg in configs]
    for (name, _, _), spent in zip(runs, seconds):
        if spent is not None:
            timings[f"train_{name}_s"] = spent
        print(f"{name}: trained ({'time not recorded' if spent is None else f'{spent:.0f} s'})", flush=True)

    # --- 3. evaluation on held-out seeds, paired ---
    envs = [EnvSpec(args.env)] + [EnvSpec(*parse_call(text)) for text in args.eval_env]  # the runner plays split=test
    dev = EnvSpec(args.env, {"split": "dev"}, label=f"{args.env} (dev)", episodes=args.dev_episodes)
    envs += [dev] if args.dev_episodes else []  # last: the folders eval-<k> of the other envs keep their index
    agents = [AgentSpec("teacher", "lm", {"model": args.teacher, **lm})]
    agents += [AgentSpec(name, "lm", {"model": str(out / "students" / name / "checkpoint"), **lm}) for name, _, _ in runs]
    ablations = {name for name, _, _ in runs if name.split("-", 1)[1] in ABLATIONS}
    evaluated = [agents] + [[a for a in agents if a.name not in ablations]] * (len(envs) - 1)  # ablations: --env only
    rows, transcripts = [], {}
    for index, env in enumerate(envs):  # a folder per env, so an env added later leaves the others' runs as they are
        spec = BenchmarkSpec("distill", (env,), tuple(evaluated[index]), episodes=args.episodes, base_seed=0,
                             max_steps=args.max_steps)
        begun = time.time()
        run_benchmark(spec, out / f"eval-{index}", backend="processes" if args.workers > 1 else "inprocess",
                      workers=args.workers, quiet=True, plots=False)
        timings[f"evaluation_{index}_s"] = time.time() - begun
        rows += [r for r in read_rows(out / f"eval-{index}") if r.get("error") is None]
        transcripts.update({r["key"]: r for r in read_jsonl(out / f"eval-{index}" / "transcripts.jsonl")})

    # --- 4. metrics per cell, CoT match on the teacher's states, paired tests ---
    torch.set_num_threads(alone)  # (the trainers and backends above set their own)
    folders = {"teacher": Path(args.teacher), **{name: out / "students" / name / "checkpoint" for name, _, _ in runs}}
    sizes = {"teacher": "teacher", **{name: size for name, size, _ in runs}}
    methods = {"teacher": "teacher", **{name: fields["method"] for name, _, fields in runs}}
    cells, tests = [], []
    teacher = load_checkpoint(args.teacher, dtype=torch.float32)  # once: every student's fit is measured against it
    for index, env in enumerate(envs):
        here = {a.name: sorted((r for r in rows if r["env"] == env.name and r["agent"] == a.name), key=lambda r: r["episode"])
                for a in evaluated[index]}
        teacher_episodes = [Episode.from_dict(transcripts[r["key"]]) for r in here["teacher"]]
        heldout = teacher_turns(*teacher, teacher_episodes, bf16=args.teacher_bf16)  # the students share the teacher's tokenizer
        for name, group in here.items():
            model, tokenizer, meta = load_checkpoint(folders[name], dtype=torch.float32)
            wins = sum(bool(r["won"]) for r in group)
            cell = {"env": env.name, "name": name, "size": sizes[name], "method": methods[name],
                    "ablation": name in ablations,
                    "parameters": meta["parameters"], "n": len(group), "wins": wins,
                    "success": wins / len(group), "success_ci95": wilson_interval(wins, len(group)),
                    "mean_em": sum(r.get("em") or 0 for r in group) / len(group),
                    "steps": sum(r["steps"] for r in group) / len(group),
                    **decoding_stats(tokenizer, [transcripts[r["key"]] for r in group])}
            if name != "teacher":
                cell.update(cot_match(model, tokenizer, meta, teacher_episodes))
                cell.update(teacher_forced_fit(model, tokenizer.pad_token_id, *heldout))
            cells.append(cell)
        for size in args.size:
            size = size.split(":")[0]
            sad, kd = here.get(f"{size}-sad"), here.get(f"{size}-kd")
            if sad and kd:
                sad_only = sum(a["won"] and not b["won"] for a, b in zip(sad, kd))
                kd_only = sum(b["won"] and not a["won"] for a, b in zip(sad, kd))
                tests.append({"env": env.name, "size": size, "sad_wins": sum(bool(r["won"]) for r in sad),
                              "kd_wins": sum(bool(r["won"]) for r in kd), "sad_only": sad_only, "kd_only": kd_only,
                              "p": mcnemar_exact(sad_only, kd_only)})
    plot(cells, [env.name for env in envs], out / "success_vs_size.png")
    chosen = chosen_on_dev(cells, dev.name, envs[0].name) if args.dev_episodes else []
    timings["total_s"] = time.time() - started
    atomic_write_json(out / "summary.json", {"cells": cells, "tests": tests, "chosen_on_dev": chosen, "options": vars(args),
                                             "teacher_rollouts": counts, "seconds": {k: round(v, 1) for k, v in timings.items()}})
    markdown = success_matrix(cells) + "\n" + table(cells, tests)
    markdown += "\n" + chosen_table(chosen, dev.name, envs[0].name) if chosen else ""
    atomic_write_text(out / "table.md", markdown)
    print(markdown)
    print(json.dumps({k: round(v) for k, v in timings.items()}))
    if args.install:
        for choice in chosen:
            name = choice["student"]
            target = install_checkpoint(folders[name], f"{DISTILL_ZOO}/{family_of(args.env).lower()}-{choice['method']}", meta={
                "recipe": shlex.join(["python", "studies/distill.py", *sys.argv[1:]]), "student": name,
                "chosen_on": dev.name,
                "eval": {f"{c['env']}/{c['name']}": c["success"] for c in cells if c["name"] in (name, "teacher")}},
                data=f"{args.env} split=train: the teacher {Path(args.teacher).name}'s greedy episodes on seeds "
                     f"{TRAIN_SEEDS_FROM:,}..{TRAIN_SEEDS_FROM + args.teacher_episodes - 1:,}, distilled by {choice['method']}")
            print(f"installed {target} ({sum(f.stat().st_size for f in target.iterdir()) / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
