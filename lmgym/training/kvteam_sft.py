"""Train the DiffMAS Solver's LoRA by SFT over the team's shared KV trace.

``python -m lmgym.training.kvteam_sft --data expert.jsonl --backbone smollm2 --out runs/diffmas``

DiffMAS (no public code; LoRA rank 8, alpha 16, lr 5e-5 with cosine decay from secondary
summaries of the paper) keeps the backbone frozen: the upstream agents build the shared trace
exactly as LatentMAS does (`lmgym.agents.kvteam.KVTeam.build_trace`), and the Solver, carrying
a LoRA adapter, is trained to write the reference completion after its prompt on that trace.
The paper leaves open whether gradients stop at the trace; both are offered:

* ``--gradient stop``: the trace is built without gradients by the frozen backbone (the
  adapter off); only the Solver's adapter learns.
* ``--gradient flow``: the upstream agents run with their own LoRA adapter (``upstream``); the
  Solver's loss back-propagates through the cache and the latent steps into it.

Data: rollout files of an expert on a single-answer env (`lmgym.envs.answer`; record them on
seeds >= 1,000,000, held out from the benchmark's 0..N-1): the first step's observation is the
question and its reasoning (the env's worked solution, ending ``Answer: <gold>``) the target.

Everything random comes from ``--seed`` (LoRA's initial A matrices, the batch of step k from a
generator seeded with (seed, k)), so an interrupted run resumes exactly: ``--save-every N``
writes the adapters with the optimizer state and the step every N steps, and a run whose
``--out`` holds them continues from there (``--no-resume`` starts afresh). Outputs in
``--out``: ``adapter/solver/`` (and ``adapter/upstream/``), ``adapter/lmgym.json`` (the trace
settings the agent reads back, and the step), ``adapter/optimizer.pt``, ``metrics.jsonl``
(``train/loss``, ``train/lr``, ``train/grad_norm``, ``train/step``).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
import tyro
from peft import set_peft_model_state_dict
from safetensors.torch import load_file

from lmgym.agents.kvteam import KEEP, SOLVER_ADAPTER, UPSTREAM_ADAPTER, KVTeam, load_backbone
from lmgym.io import append_jsonl, atomic_folder, atomic_write_json, rewind_log
from lmgym.models.checkpoints import OPTIMIZER_FILE, load_optimizer_state
from lmgym.rollouts import read_episodes
from lmgym.training.lm import learning_rate
from lmgym.training.lora import add_lora, lora_config, trainable_parameters


@dataclass
class KVTeamSFTConfig:
    data: tuple[str, ...] = ()
    """rollout files of an expert on a single-answer env (first step: question and worked solution)"""
    backbone: str = "smollm2"
    """'smollm2' or a model folder (frozen)"""
    out: str = "runs/diffmas"
    """output folder: adapter/ and metrics.jsonl"""
    gradient: Literal["stop", "flow"] = "stop"
    """stop: trace built without gradients; flow: upstream agents' own LoRA trained through the trace"""
    num_agents: int = 4
    """agents in the team (the last is the Solver)"""
    latent_steps: int = 10
    """latent steps per upstream agent (LatentMAS's default)"""
    keep: str = "all"
    """what the trace keeps: all, latent (only latent steps), latest (only the latest agent's segment)"""
    lora_r: int = 8
    """LoRA rank (DiffMAS: 8)"""
    lora_alpha: int = 16
    """LoRA alpha (DiffMAS: 16)"""
    lr: float = 5e-5
    """peak learning rate, cosine decay to 0 (DiffMAS: 5e-5)"""
    warmup: int = 0
    """linear warmup steps"""
    steps: int = 200
    """optimizer steps"""
    batch_size: int = 4
    """questions per step (each builds its own trace)"""
    max_target_tokens: int = 96
    """longer reference completions are cut"""
    grad_clip: float = 1.0
    """max gradient norm"""
    seed: int = 0
    """seed of the LoRA init and the batches"""
    log_every: int = 10
    """steps between metric lines"""
    save_every: int = 0
    """write the adapters and optimizer state every N steps (0: only at the end)"""
    resume: bool = True
    """continue from OUT/adapter when it holds an unfinished run"""
    threads: int = 1
    """torch CPU threads"""
    device: str | None = None
    """cpu or cuda (default: the loader's choice)"""
    quiet: bool = False
    """no progress lines"""


def solver_sft_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of the reference tokens (SFT): logits (T, V), target (T,)."""
    return F.cross_entropy(logits.float(), target)


def load_examples(paths: tuple[str, ...]) -> list[tuple[str, str]]:
    """(question, reference completion) from the first step of every rollout."""
    if not paths:
        raise ValueError("no --data files given")
    examples = [(e.steps[0].observation, e.steps[0].reasoning) for path in paths for e in read_episodes(path)
                if e.steps and e.steps[0].reasoning]
    if not examples:
        raise ValueError(f"no rollout in {paths} has a first step with reasoning")
    return examples


def build_team_model(backbone, cfg: KVTeamSFTConfig):
    """A peft model with adapter ``solver`` (and ``upstream`` when gradients flow)."""
    torch.manual_seed(cfg.seed)  # LoRA's A matrices are drawn here
    model = add_lora(backbone, r=cfg.lora_r, alpha=cfg.lora_alpha, adapter_name=SOLVER_ADAPTER)
    if cfg.gradient == "flow":
        model.add_adapter(UPSTREAM_ADAPTER, lora_config(r=cfg.lora_r, alpha=cfg.lora_alpha))
    return model


def save_adapters(out: Path, model, meta: dict, optimizer: torch.optim.Optimizer | None = None) -> Path:
    """Write adapter/{solver,upstream}/, adapter/lmgym.json and the optimizer state atomically
    (a new folder renamed over the old one)."""
    target = out / "adapter"
    with atomic_folder(target) as tmp:
        model.save_pretrained(tmp)  # peft writes each adapter but "default" into a sub-folder named after it
        atomic_write_json(tmp / "lmgym.json", meta)
        if optimizer is not None:
            torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
    return target


def resume_step(out: Path, model, optimizer: torch.optim.Optimizer, adapters: tuple[str, ...], steps: int) -> int:
    """The step to start from: that of the interrupted run in ``out/adapter`` (its adapters and
    optimizer state loaded), ``steps`` for a finished one, else 0."""
    folder = out / "adapter"
    if not (folder / "lmgym.json").is_file():
        return 0
    step = int(json.loads((folder / "lmgym.json").read_text())["step"])
    if not (folder / OPTIMIZER_FILE).is_file():  # a finished run keeps no optimizer state
        return steps if step >= steps else 0
    for name in adapters:
        set_peft_model_state_dict(model, load_file(folder / name / "adapter_model.safetensors"), adapter_name=name)
    load_optimizer_state(folder, optimizer)
    return step


def train(cfg: KVTeamSFTConfig) -> dict[str, float]:
    # --- seeding and setup ---
    torch.set_num_threads(cfg.threads)
    if cfg.keep not in KEEP:
        raise ValueError(f"--keep must be one of {KEEP}, got {cfg.keep!r}")
    out = Path(cfg.out)
    examples = load_examples(cfg.data)
    backbone, tokenizer = load_backbone(cfg.backbone, cfg.device)
    model = build_team_model(backbone, cfg)
    trainable_names = (SOLVER_ADAPTER, UPSTREAM_ADAPTER) if cfg.gradient == "flow" else (SOLVER_ADAPTER,)
    team = KVTeam(model, tokenizer, "diffmas", num_agents=cfg.num_agents, latent_steps=cfg.latent_steps, keep=cfg.keep,
                  upstream_adapter=cfg.gradient == "flow")
    params = [p for n, p in model.named_parameters() if "lora_" in n and any(f".{a}." in n for a in trainable_names)]
    for p in params:
        p.requires_grad_(True)
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    trainable, total = trainable_parameters(model)
    meta = {"kvteam": {"backbone": cfg.backbone, "gradient": cfg.gradient, "num_agents": cfg.num_agents,
                       "latent_steps": cfg.latent_steps, "keep": cfg.keep},
            "train_config": asdict(cfg), "examples": len(examples), "parameters": total, "trainable_parameters": trainable}

    start = resume_step(out, model, optimizer, trainable_names, cfg.steps) if cfg.resume else 0
    if start:
        print(f"kvteam sft: resuming {out} at step {start}", file=sys.stderr, flush=True)

    # --- training loop ---
    metrics: dict[str, float] = {}
    rewind_log(out / "metrics.jsonl", start)  # the steps about to run are logged once
    started = time.time()
    report_every = 0 if cfg.quiet else max(cfg.steps // 10, 1)
    for step in range(start, cfg.steps):
        generator = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
        rows = torch.randint(len(examples), (cfg.batch_size,), generator=generator).tolist()
        lr = learning_rate(cfg, step, floor=0.0)  # DiffMAS decays to 0
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        total_loss = 0.0
        for row in rows:
            question, reference = examples[row]
            if cfg.gradient == "flow":
                trace = team.build_trace(question, trainable_names)
            else:
                with torch.no_grad():
                    trace = team.build_trace(question)
            prompt = team.solver_ids(question)
            target = team.target_ids(reference)[: cfg.max_target_tokens]
            logits = team.solver_logits(trace, prompt, target, trainable_names)
            loss = solver_sft_loss(logits, torch.tensor(target, device=logits.device)) / len(rows)
            loss.backward()
            total_loss += loss.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optimizer.step()
        if (step + 1) % cfg.log_every == 0 or step + 1 == cfg.steps:
            metrics = {"train/step": step + 1, "train/loss": total_loss, "train/lr": lr,
                       "train/grad_norm": float(grad_norm), "train/seconds": time.time() - started}
            append_jsonl(out / "metrics.jsonl", metrics)
        if cfg.save_every and (step + 1) % cfg.save_every == 0 and step + 1 < cfg.steps:
            save_adapters(out, model, {**meta, "step": step + 1}, optimizer)
        if report_every and ((step + 1) % report_every == 0 or step + 1 == cfg.steps):
            print(f"kvteam sft ({cfg.gradient}) step {step + 1}/{cfg.steps}: loss {total_loss:.4f}, "
                  f"{time.time() - started:.0f} s", file=sys.stderr, flush=True)
    if start < cfg.steps:
        save_adapters(out, model, {**meta, "step": cfg.steps})  # finished: no optimizer state to resume from
    return metrics


def main(argv: list[str] | None = None) -> dict[str, float]:
    cfg = tyro.cli(KVTeamSFTConfig, args=argv, prog="python -m lmgym.training.kvteam_sft",
                   description=__doc__.split("\n\n")[0])
    metrics = train(cfg)
    if metrics:
        print(f"step {metrics['train/step']}: loss {metrics['train/loss']:.4f} -> {Path(cfg.out) / 'adapter'}")
    return metrics


if __name__ == "__main__":
    main()
