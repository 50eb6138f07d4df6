"""The reference ladder of small pretrained models (issue 40): one family's rungs on the same tasks
(families: ``alfworld``, ``hotpotqa``, ``webshop``).

Each rung is one command; each is resumable (a cut run continues where it stopped) and plays
the first ``--episodes`` (50) tasks of every panel of the family's spec
(``studies/specs/ladder_<family>.yaml``) into ``OUT/<family>/<rung>/``, a `lmgym bench` folder::

    python studies/ladder.py --family alfworld --rung teacher          # the grounded teacher (docs/teachers.md)
    python studies/ladder.py --family alfworld --rung random
    python studies/ladder.py --family alfworld --rung smollm2-fewshot  # SmolLM2-135M-Instruct, 2 demonstrations
    python studies/ladder.py --family alfworld --rung smollm2-sft      # teacher episodes -> LoRA SFT -> zoo -> play
    python studies/ladder.py --family hotpotqa --rung smollm2-rl       # the SFT model -> GRPO -> zoo -> play
    python studies/ladder.py --family webshop --rung tiny-sft          # the family's best tiny SFT model (zoo)
    python studies/ladder.py --family webshop --rung tiny-rl           # that model after studies/rl.py (zoo)
    python studies/ladder.py --family alfworld --summary               # the table, docs/ladder.md
    python studies/ladder.py --family alfworld --summary --docs        # and docs/results/ladder/summary.json

``smollm2-sft`` builds its model first, each step skipped once done:

1. grounded-teacher episodes of the family's TRAIN splits, won ones only
   (``examples/teacher_rollouts.py``; `Family.teacher_data`);
2. LoRA SFT of SmolLM2-135M-Instruct on them (`lmgym.training.lm`, fp32, loss on the model's
   reasoning and action tokens only, history cut to `Family.max_prompt_tokens` as `LMAgent` cuts
   it; `SFT`), a checkpoint every ``save_every`` steps, so a cut run resumes; in the family's
   stages (`Family.sft_stages`), each stage's checkpoint kept as ``step-N`` (`train_sft`);
3. with more than one stage, the checkpoint that wins most of the family's dev panel's first 50
   tasks (`choose_on_dev`): the test panels choose nothing;
4. the adapter installed in half precision (a few MB, no optimiser state) as the zoo model
   ``ladder/<family>-smollm2-sft``, its meta recording the train config, seed, train panels,
   wall time and tokens (`install_rung`). ``LMAgent("smollm2-sft")`` resolves it per family
   (`lmgym.agents.lm.FAMILY_MODELS`) and plays it on llama.cpp, merged into the base once.

The summary (``--summary``; `summarize`) reads every rung's folder: per panel and rung the
success rate with its Wilson 95% interval, steps, tokens and seconds per episode, invalid-action
and format-error rates, the training cost, and paired exact McNemar tests between rungs on the
same tasks (`lmgym.stats.mcnemar_exact`).

``run(quick=True)`` plays the teacher and random rungs on 2 test tasks of the family's twin (its
spec's first panel: no data, seconds).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from lmgym.benchmarks.runner import read_rows, run_benchmark
from lmgym.benchmarks.spec import BenchmarkSpec, EnvSpec, load_spec
from lmgym.errors import InputError
from lmgym.io import atomic_write_json, atomic_write_text, read_jsonl
from lmgym.models import zoo
from lmgym.stats import mcnemar_exact

ROOT = Path(__file__).resolve().parents[1]
RUNGS = ("teacher", "random", "tiny-sft", "tiny-rl", "smollm2-fewshot", "smollm2-sft", "smollm2-rl")
#: Rungs whose model is trained here, by the `lmgym.agents.lm.FAMILY_MODELS` alias they install.
TRAINED = {"smollm2-sft": "ladder/{family}-smollm2-sft", "smollm2-rl": "ladder/{family}-smollm2-rl"}


@dataclass(frozen=True)
class Family:
    spec: str
    #: (env id, gym.make kwargs as key=value, episodes, first seed) of the teacher's training episodes
    teacher_data: tuple[tuple[str, tuple[str, ...], int, int], ...]
    #: the SFT history budget: the few most recent turns (measured per family, docs/ladder.md)
    max_prompt_tokens: int
    #: this family's changes to `SFT` (its turns' length sets what a step affords)
    sft: tuple[tuple[str, Any], ...] = ()
    #: the dev panel that chooses among the SFT stages' checkpoints
    dev: str = ""
    #: SFT stages (step counts): each continues the last checkpoint and its optimiser to its count,
    #: on a schedule over that count; every stage's checkpoint is a candidate (default: one stage)
    sft_stages: tuple[int, ...] = ()
    #: RL stages (GRPO iterations from the installed SFT model), each checkpoint a dev candidate;
    #: none: the family has no RL rung (its SFT model wins no train episode: every group is flat)
    rl_stages: tuple[int, ...] = ()


FAMILIES = {
    # ALFWorld: ~90-105 tokens per turn (observation + "Thought/Action"), the room listing ~200-300:
    # 512 tokens keep the listing and the last 2-4 turns, or the last ~5 turns
    "alfworld": Family("studies/specs/ladder_alfworld.yaml",
                       (("lmgym/ALFWorld-Gen-v0", ("split=train",), 600, 1_000_000),
                        ("lmgym/ALFWorld-v0", ("split=train",), 711, 0)), max_prompt_tokens=512,
                       dev="alfworld-gen-dev-100"),
    # HotPotQA: the twin's turns are short (a whole won episode, 3-4 turns, fits in ~400 tokens);
    # real HotPotQA has no train split here (its shared files are dev), so the SFT data is the
    # twin's train split and the real test panel measures the transfer
    "hotpotqa": Family("studies/specs/ladder_hotpotqa.yaml",
                       (("lmgym/HotPotQA-Gen-v0", ("split=train",), 600, 1_000_000),), max_prompt_tokens=512,
                       sft=(("batch_size", 4), ("warmup", 10)), dev="hotpotqa-gen-dev-100", sft_stages=(100, 200),
                       rl_stages=(4, 8, 12)),
    # WebShop: a results page is long, and the next click depends on the product opened two turns
    # back (docs/results/distill.md, the 1,024-token teacher): 1,024 tokens keep about two pages
    "webshop": Family("studies/specs/ladder_webshop.yaml",
                      (("lmgym/WebShop-Gen-v0", ("split=train",), 1000, 1_000_000),
                       ("lmgym/WebShop-v0", ("split=train",), 1000, 0)), max_prompt_tokens=1024,
                      dev="webshop-gen-dev-100"),
}
#: LoRA SFT of SmolLM2-135M-Instruct: sized for one session of a shared 2-core CPU (~35 tokens/s
#: measured on one thread under load, 2 x ~515 tokens per step: ~30 s per step).
SFT = {"lora_r": 16, "lora_alpha": 16, "batch_size": 2, "steps": 60, "warmup": 10, "lr": 5e-4, "save_every": 10,
       "log_every": 5, "seed": 0, "threads": 1}
#: GRPO from the SFT model (`lmgym.training.grpo`): LoRA on the SFT adapter, 2 train-split tasks x 8
#: episodes per iteration, sampled at temperature 1 on llama.cpp (TIS-corrected), one optimiser
#: step per batch (on-policy: PPO's ratio is 1, the clip idle). ~230 s per iteration here, most
#: of it the forward and backward pass over ~60 turns' prompts (measured on HotPotQA-Gen).
RL = {"estimator": "grpo", "tasks": 2, "group": 8, "rollout_batch": 16, "ppo_epochs": 1, "micro_batch": 4,
      "lr": 2e-4, "sampler": "llamacpp", "seed": 0, "threads": 1, "quiet": True}


def command(family: str, rung: str) -> str:
    return f"python studies/ladder.py --family {family} --rung {rung}"


# -- building the trained rung ---------------------------------------------------------------------
def teacher_data(family: str, out: Path) -> list[Path]:
    """The won teacher episodes of the family's train splits, one file per env (resumable)."""
    files = []
    for env_id, kwargs, episodes, first in FAMILIES[family].teacher_data:
        path = out / f"teacher_{env_id.split('/')[-1]}.jsonl"
        done = sum(1 for _ in read_jsonl(path)) if path.exists() else 0
        if done < episodes * 0.9:  # the teacher loses a few; rerunning skips the seeds already there
            subprocess.run([sys.executable, str(ROOT / "examples/teacher_rollouts.py"), "--env-id", env_id,
                            "--env-kwargs", *kwargs, "--episodes", str(episodes), "--seed-start", str(first),
                            "--out", str(path)], check=True, stdout=subprocess.DEVNULL)
        files.append(path)
    return files


def keep_stages(out: Path, stages: tuple[int, ...], train_to: Callable[[int], Any]) -> list[Path]:
    """Run `train_to(steps)` for each stage's step count (a resumable run in `out`), each stage's
    checkpoint kept as ``out/step-N`` (whole or absent); a stage already kept is skipped."""
    kept = []
    for steps in stages:
        stage = out / f"step-{steps}"
        if not stage.is_dir():
            train_to(steps)
            shutil.copytree(out / "checkpoint", out / f".step-{steps}", dirs_exist_ok=True)
            (out / f".step-{steps}").rename(stage)
        kept.append(stage)
    return kept


def train_sft(family: str, data: list[Path], out: Path) -> list[Path]:
    """LoRA SFT of SmolLM2 on `data` in the family's stages, each stage's checkpoint kept as
    ``out/step-N`` (resumes a cut run; a stage already kept is skipped)."""
    from lmgym.training.lm import LMTrainConfig, train

    config = {**SFT, **dict(FAMILIES[family].sft)}
    return keep_stages(out, FAMILIES[family].sft_stages or (config["steps"],), lambda steps: train(LMTrainConfig(
        data=tuple(map(str, data)), out=str(out), init="smollm2", max_prompt_tokens=FAMILIES[family].max_prompt_tokens,
        quiet=True, **{**config, "steps": steps})))


def choose_on_dev(family: str, rung: str, stages: list[Path], out: Path, episodes: int) -> tuple[Path, dict[str, Any]]:
    """The stage whose checkpoint wins most of the first `episodes` tasks of the family's dev
    panel (ties: the earlier stage), played as the spec's `rung` agent plays."""
    if len(stages) == 1:
        return stages[0], {"choice": "the only stage (no dev choice)"}
    spec = load_spec(ROOT / FAMILIES[family].spec)
    [agent] = [a for a in spec.agents if a.name == rung]
    env = EnvSpec.from_panel(FAMILIES[family].dev)
    wins = {}
    for stage in stages:
        candidate = replace(agent, name=f"{rung}-{stage.name}", kwargs={**agent.kwargs, "model": str(stage.resolve())})
        folder = out / family / f"{rung}-dev" / stage.name
        run_benchmark(replace(spec, id=f"ladder-{family}-dev", agents=(candidate,), episodes=episodes,
                              envs=(replace(env, episodes=min(episodes, env.episodes or episodes)),)),
                      folder, quiet=True, plots=False)
        wins[stage.name] = sum(bool(row["won"]) for row in finished_prefix(read_rows(folder)))
    chosen = max(stages, key=lambda stage: (wins[stage.name], -stages.index(stage)))
    return chosen, {"choice": f"on {FAMILIES[family].dev}, tasks 0-{episodes - 1}",
                    "dev_wins": wins, "dev_episodes": episodes, "chosen": chosen.name}


def training_cost(run: Path, steps: int) -> dict[str, Any]:
    """Steps, wall seconds and tokens (and, for RL, env steps) of a training run up to step
    `steps`, from its metrics log (every attempt)."""
    last = [row for row in read_jsonl(run / "metrics.jsonl") if row["train/step"] <= steps][-1]
    cost = {"steps": int(last["train/step"]), "wall_seconds": round(last["time/seconds"], 1),
            "train_tokens": int(last["train/tokens"]),
            "tokens_per_second": round(last["train/tokens"] / max(last["time/seconds"], 1e-9), 1)}
    return {**cost, "env_steps": int(last["time/env_steps"])} if "time/env_steps" in last else cost


def install_rung(family: str, rung: str, checkpoint: Path, *, run: Path, data: str, extra: dict[str, Any]) -> Path:
    """Install `rung`'s chosen LoRA checkpoint of `run` in the zoo: the adapter in half precision,
    the tokenizer, and a meta without this run's local paths whose base is ``"smollm2"`` and whose
    ``ladder`` entry holds the training cost up to that checkpoint and `extra`; no optimiser state."""
    import safetensors.torch

    from lmgym.models.checkpoints import ADAPTER_CONFIG_FILE, META_FILE, OPTIMIZER_FILE, portable_meta, read_meta

    meta = portable_meta(read_meta(checkpoint))
    meta["ladder"] = {"family": family, "rung": rung, "cost": training_cost(run, meta["step"]), **extra}
    adapter = "adapter_model.safetensors"

    def write(folder: Path) -> None:
        for file in checkpoint.iterdir():
            if file.name not in (adapter, META_FILE, OPTIMIZER_FILE, "README.md", ADAPTER_CONFIG_FILE):
                shutil.copy2(file, folder / file.name)
        peft_config = json.loads((checkpoint / ADAPTER_CONFIG_FILE).read_text(encoding="utf-8"))
        atomic_write_json(folder / ADAPTER_CONFIG_FILE, {**peft_config, "base_model_name_or_path": "smollm2"})
        weights = safetensors.torch.load_file(str(checkpoint / adapter))
        safetensors.torch.save_file({k: v.half() for k, v in weights.items()}, str(folder / adapter))
        atomic_write_json(folder / META_FILE, meta)

    return zoo.install(TRAINED[rung].format(family=family), write, command=command(family, rung), data=data)


def build_sft(family: str, out: Path, dev_episodes: int = 50) -> Path:
    """The installed SFT model of `family` (built first when missing: the stages, the dev choice)."""
    name = TRAINED["smollm2-sft"].format(family=family)
    if zoo.is_installed(name):
        return zoo.path(name)
    work = out / family / "smollm2-sft-train"
    data = teacher_data(family, work)
    chosen, choice = choose_on_dev(family, "smollm2-sft", train_sft(family, data, work), out, dev_episodes)
    described = "; ".join(f"{env_id} {' '.join(kw)}: won grounded-teacher episodes of {n} seeds from {first}"
                          for env_id, kw, n, first in FAMILIES[family].teacher_data)
    return install_rung(family, "smollm2-sft", chosen, run=work, data=described, extra={"checkpoint_choice": choice})


def train_rl(family: str, start: Path, out: Path) -> list[Path]:
    """GRPO from `start` on the family's twin (its train split), in the family's stages, each
    stage's checkpoint kept as ``out/step-N`` (resumes a cut run; a stage already kept is skipped)."""
    from lmgym.training.grpo import GRPOConfig, train

    max_turns = load_spec(ROOT / FAMILIES[family].spec).max_steps
    return keep_stages(out, FAMILIES[family].rl_stages, lambda steps: train(GRPOConfig(
        out=str(out), model=str(start), env=FAMILIES[family].teacher_data[0][0], max_turns=max_turns, steps=steps,
        save_every=steps, **RL)))


def build_rl(family: str, out: Path, dev_episodes: int = 50) -> Path:
    """The installed RL model of `family`: GRPO from its SFT model (built first when missing),
    the stage chosen on the dev panel."""
    name = TRAINED["smollm2-rl"].format(family=family)
    if zoo.is_installed(name):
        return zoo.path(name)
    if not FAMILIES[family].rl_stages:
        raise InputError(f"{family} has no RL rung: its SFT model wins no train-split episode, so every GRPO group "
                         "is flat (docs/results/ladder.md)")
    start = build_sft(family, out, dev_episodes)
    work = out / family / "smollm2-rl-train"
    chosen, choice = choose_on_dev(family, "smollm2-rl", train_rl(family, start, work), out, dev_episodes)
    data = f"{FAMILIES[family].teacher_data[0][0]} split=train: GRPO groups from {start.name} (tasks: the meta's train panels)"
    return install_rung(family, "smollm2-rl", chosen, run=work, data=data, extra={"config": RL, "checkpoint_choice": choice})


# -- evaluating ------------------------------------------------------------------------------------
def slug(label: str) -> str:
    return "-".join(label.lower().replace("_", "-").split())


def rung_specs(family: str, rung: str, episodes: int, envs: tuple[str, ...] = ()) -> list[BenchmarkSpec]:
    """One spec per panel of the family's spec, cut to `rung`'s agent and the panel's first
    `episodes` tasks (a panel that sweeps its tasks keeps sweeping: tasks 0..episodes-1)."""
    spec = load_spec(ROOT / FAMILIES[family].spec)
    agents = tuple(a for a in spec.agents if a.name == rung)
    if not agents:
        raise InputError(f"rung {rung!r} is not in {FAMILIES[family].spec}; choose from {[a.name for a in spec.agents]}")
    return [replace(spec, id=f"ladder-{family}-{rung}", agents=agents, episodes=episodes,
                    envs=(replace(env, episodes=min(episodes, env.episodes or spec.episodes)),))
            for env in spec.envs if not envs or env.name in envs]


def evaluate(family: str, rung: str, out: Path, episodes: int, envs: tuple[str, ...] = (),
             max_steps: int | None = None, quiet: bool = True) -> None:
    """Play `rung` on each panel into ``out/<family>/<rung>/<panel>/`` (a resumable bench folder)."""
    for spec in rung_specs(family, rung, episodes, envs):
        spec = replace(spec, max_steps=max_steps) if max_steps else spec
        run_benchmark(spec, out / family / rung / slug(spec.envs[0].name), quiet=quiet, plots=False)


def finished_prefix(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of tasks 0..K-1, K the first task not finished: a run cut mid-way reports the
    tasks it finished in order, not the quick ones that finished early in a lockstep batch."""
    done = {row["episode"]: row for row in rows if row.get("error") is None}
    k = 0
    while k in done:
        k += 1
    return [done[i] for i in range(k)]


# -- the table -------------------------------------------------------------------------------------
def cost_of(family: str, spec: BenchmarkSpec) -> dict[str, Any] | None:
    """The training cost of the checkpoint `spec`'s agent plays, from its installed meta (None: the
    agent plays no checkpoint, or it is not installed). The ladder's own rungs record their whole
    run (`training_cost`); another model's meta holds its last training run only (the stages
    before it: the meta's ``recipe``, docs/results/lm-agents.md), so its cost is marked ``last_stage``."""
    from lmgym.agents.lm import FAMILY_MODELS, installed_family_model
    from lmgym.models.checkpoints import read_meta

    model = spec.agents[0].kwargs.get("model")
    try:
        model = installed_family_model(model, family) if model in FAMILY_MODELS else model
    except zoo.ModelNotInstalled:
        return None
    if model is None or not (Path(model).is_dir() or zoo.is_installed(str(model))):
        return None  # no model (teacher, random), or one that is not a checkpoint (the packaged SmolLM2)
    meta = read_meta(model)
    if "ladder" in meta:
        return meta["ladder"]["cost"]
    totals = meta.get("totals", {})
    return {"steps": meta["step"], "env_steps": totals.get("time/env_steps"), "train_tokens": totals.get("train/tokens"),
            "wall_seconds": meta.get("train_seconds"), "last_stage": True}


def summarize(family: str, out: Path) -> dict[str, Any]:
    """Every measured rung's cells (the finished prefix of each panel's tasks) and the paired
    McNemar tests between rungs on the tasks both finished."""
    from lmgym.benchmarks.report import summarize as bench_summary

    cells, won = [], {}
    for rung in RUNGS:
        for folder in sorted((out / family / rung).glob("*/spec.json")):
            spec = BenchmarkSpec.from_dict(json.loads(folder.read_text(encoding="utf-8")))
            rows = finished_prefix(read_rows(folder.parent))
            for cell in bench_summary(spec, rows)["cells"]:
                cells.append({**cell, "rung": rung, "command": command(family, rung), "training": cost_of(family, spec)})
            won.update({(rung, row["env"], row["episode"]): bool(row["won"]) for row in rows})
    pairs = []
    for env in dict.fromkeys(c["env"] for c in cells):
        rungs = [c["rung"] for c in cells if c["env"] == env and c["episodes"]]
        for a, b in itertools.combinations(rungs, 2):
            shared = sorted({k for r, e, k in won if (r, e) == (a, env)} & {k for r, e, k in won if (r, e) == (b, env)})
            only_a = sum(won[a, env, k] and not won[b, env, k] for k in shared)
            only_b = sum(won[b, env, k] and not won[a, env, k] for k in shared)
            if shared:
                pairs.append({"env": env, "first": a, "second": b, "n": len(shared), "only_first": only_a,
                              "only_second": only_b, "p": mcnemar_exact(only_a, only_b)})
    return {"family": family, "cells": cells, "mcnemar": pairs}


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


COLUMNS = ["panel", "rung", "success [Wilson 95%]", "n", "F1 / score", "steps", "tokens/episode", "s/episode",
           "invalid", "format errors", "training"]


def cell_row(c: dict[str, Any]) -> list[str]:
    """One rung on one panel, as the tables print it."""
    low, high = c["success_ci95"]
    n = c["episodes"] if c["episodes"] == c["expected_episodes"] else f"{c['episodes']} of {c['expected_episodes']}"
    cost = c["training"] or {}
    units = (("steps", 1, "{:,.0f} steps"), ("env_steps", 1, "{:,.0f} env steps"),
             ("train_tokens", 1000, "{:,.0f}k tokens"), ("wall_seconds", 60, "{:,.0f} min"))
    trained = ", ".join(form.format(cost[key] / per) for key, per, form in units if cost.get(key) is not None) or "none"
    trained += " (last stage)" * bool(cost.get("last_stage"))
    graded = c["mean_f1"] if c["mean_f1"] is not None else c["mean_score"]  # HotPotQA's F1, WebShop's reward
    return [c["env"], c["rung"], f"{c['success_rate']:.2f} [{low:.2f}, {high:.2f}]", str(n), _num(graded, 2),
            _num(c["mean_steps"], 1), _num(c["tokens_per_episode"] or None), _num(c["seconds_per_episode"], 2),
            _num(c["invalid_action_rate"], 2), _num(c["format_error_rate"], 2), trained]


def pair_row(p: dict[str, Any]) -> list[str]:
    return [p["env"], f"{p['first']} vs {p['second']}", str(p["n"]), str(p["only_first"]), str(p["only_second"]),
            f"{p['p']:.3g}"]


PAIR_COLUMNS = ["panel", "rungs", "paired n", "won by first only", "won by second only", "exact McNemar p"]


def markdown(summary: dict[str, Any]) -> str:
    from lmgym.benchmarks.results_docs import markdown_table

    return (markdown_table(COLUMNS, "lllrrrrrrrl", [cell_row(c) for c in summary["cells"] if c["episodes"]]) + "\n"
            + markdown_table(PAIR_COLUMNS, "llrrrr", [pair_row(p) for p in summary["mcnemar"]]))


#: Published figures beside each real panel (other models, protocols and task sets: docs/results/ladder.md).
ANCHORS = {
    "ALFWorld valid_unseen": [
        (("BUTLER, seq2seq imitation of the expert with beam search, best of 8 (Shridhar et al. 2021, as ReAct "
          "tabulates it: Yao et al. 2023, Table 3)"), "0.37", "134"),
        ("ReAct, PaLM-540B, 2 task-type demonstrations, best of 6 prompts (Yao et al. 2023, Table 3)", "0.71", "134")],
    "WebShop test": [
        (("the original paper's best model, BART + BERT trained by imitation (and RL) on 1,600 human demonstrations "
          "(Yao et al. 2022, arXiv:2207.01206)"), "0.29", "500"),
        ("ReAct, PaLM-540B, one demonstration (Yao et al. 2023, Table 4)", "0.40", "500")],
    "HotPotQA test": [
        ("ReAct, PaLM-540B, 6 demonstrations, exact match on 500 dev questions (Yao et al. 2023, Table 1)", "0.27",
         "500")],
}


def docs_summary(out: Path) -> dict[str, Any]:
    """docs/results/ladder/summary.json (`lmgym.benchmarks.results_docs`): every measured family's
    rungs and paired tests, the literature anchors beside the real panels, one command per rung."""
    rows, pairs, headline = [], [], []
    for family in FAMILIES:
        if not (out / family).is_dir():
            continue
        summary = summarize(family, out)
        cells = [c for c in summary["cells"] if c["episodes"]]
        for env in dict.fromkeys(c["env"] for c in cells):
            rows += [cell_row(c) for c in cells if c["env"] == env]
            rows += [[env, f"anchor: {name}", rate, n, *["-"] * 6, "-"] for name, rate, n in ANCHORS.get(env, ())]
        pairs += [pair_row(p) for p in summary["mcnemar"]]
        headline += [f"{c['env']} {c['success_rate']:.2f} (n = {c['episodes']})" for c in cells if c["rung"] == "smollm2-sft"]
    commands = "\n".join(command(f, r) for f in FAMILIES if (out / f).is_dir() for r in RUNGS)
    return {"title": "The reference ladder: small pretrained models as agents", "order": 97,
            "headline": ("SmolLM2-135M after LoRA SFT on teacher episodes: " + "; ".join(headline)) if headline
                        else "not run",
            "source": "studies/ladder.py (run folders runs/ladder/<family>/<rung>/<panel>, not committed; "
                      "the episodes are reproducible from the commands)",
            "tables": {"rungs": {"columns": COLUMNS, "align": "lllrrrrrrrl", "rows": rows, "command": commands},
                       "pairs": {"columns": PAIR_COLUMNS, "align": "llrrrr", "rows": pairs, "command": commands}}}


def run(quick: bool = False, family: str = "alfworld", rungs: tuple[str, ...] = ("teacher", "random"),
        out: Path | None = None, episodes: int = 50, envs: tuple[str, ...] = ()) -> dict[str, Any]:
    """Play `rungs` (quick: on 2 tasks of the spec's first panel, the twin, at most 20 steps)
    and return the summary of every rung measured in `out`."""
    out = Path(out or tempfile.mkdtemp(prefix="lmgym-ladder-"))
    for rung in rungs:
        if quick:
            first_panel = load_spec(ROOT / FAMILIES[family].spec).envs[0].name
            evaluate(family, rung, out, 2, envs=(first_panel,), max_steps=20)
        else:
            if rung == "smollm2-sft":
                build_sft(family, out)
            elif rung == "smollm2-rl":
                build_rl(family, out)
            evaluate(family, rung, out, episodes, envs, quiet=False)
    summary = summarize(family, out)
    atomic_write_json(out / family / "summary.json", summary)
    atomic_write_text(out / family / "summary.md", markdown(summary) + "\n")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", choices=sorted(FAMILIES), default="alfworld")
    parser.add_argument("--rung", choices=RUNGS, action="append", help="rung to build and play (repeatable)")
    parser.add_argument("--summary", action="store_true", help="only write and print the table of what is measured")
    parser.add_argument("--episodes", type=int, default=50, help="first tasks of each panel")
    parser.add_argument("--envs", nargs="*", default=(), help="panel labels to play (default: every panel of the spec)")
    parser.add_argument("--out", type=Path, default=Path("runs/ladder"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--docs", action="store_true",
                        help="also write docs/results/ladder/summary.json from every family measured in --out")
    args = parser.parse_args()
    rungs = () if args.summary else tuple(args.rung or ("teacher", "random"))
    try:
        summary = run(quick=args.quick, family=args.family, rungs=rungs, out=args.out, episodes=args.episodes,
                      envs=tuple(args.envs))
    except InputError as error:
        raise SystemExit(f"ladder: {error}") from None
    print(markdown(summary))
    if args.docs:
        atomic_write_json(ROOT / "docs/results/ladder/summary.json", docs_summary(args.out))


if __name__ == "__main__":
    main()
