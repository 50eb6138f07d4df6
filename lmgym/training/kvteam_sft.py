"""Train the DiffMAS Solver's LoRA by SFT over the team's shared KV trace.

``lmgym train kvteam-sft --data expert.jsonl --backbone smollm2 --out runs/diffmas`` (``--help``
lists every field; the shared loop, `lmgym.training.loop`, runs the steps).

DiffMAS (no public code; LoRA rank 8, alpha 16, lr 5e-5 with cosine decay from secondary
summaries of the paper) keeps the backbone frozen: the upstream agents build the shared trace
exactly as LatentMAS does (`lmgym.agents.kvteam.KVTeam.build_trace`), and the Solver, carrying
a LoRA adapter, is trained to write the reference completion after its prompt on that trace.
The paper leaves open whether gradients stop at the trace; both are offered:

* ``--gradient stop``: the trace is built without gradients by the frozen backbone (the
  adapter off); only the Solver's adapter learns.
* ``--gradient flow``: the upstream agents run with their own LoRA adapter (``upstream``); the
  Solver's loss back-propagates through the cache and the latent steps into it.

``--num-agents 1`` trains the control: the Solver's LoRA with no team (an empty trace), on the same
data, steps and settings; `studies/kvteam.py` runs such an adapter alone (row ``lora-<label>``),
which tells the latent channel's effect from the SFT's.

Data: rollout files of an expert on a single-answer env (`lmgym.envs.answer`; record them on
seeds >= 1,000,000, held out from the benchmark's 0..N-1): the first step's observation is the
question and its reasoning (the env's worked solution, ending ``Answer: <gold>``) the target.

Everything random comes from ``--seed`` (LoRA's initial A matrices, the batch of step k from the
loop's generator), so an interrupted run resumes exactly: ``--save-every N`` writes the adapters
with the optimizer state and the step every N steps, and a run whose ``--out`` holds them
continues from there (``--no-resume`` starts afresh). Outputs in ``--out``: ``adapter/solver/``
(and ``adapter/upstream/``), ``adapter/lmgym.json`` (the trace settings the agent reads back,
and the step), ``adapter/optimizer.pt``, ``metrics.jsonl`` (the loop's keys).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from peft import set_peft_model_state_dict
from safetensors.torch import load_file

from lmgym.agents.kvteam import KEEP, SOLVER_ADAPTER, UPSTREAM_ADAPTER, KVTeam, load_backbone, resolve_installed
from lmgym.errors import InputError
from lmgym.io import atomic_folder, atomic_write_json
from lmgym.models.checkpoints import META_FILE, OPTIMIZER_FILE, TRAIN_PANELS, inherited_panels
from lmgym.training.lm import load_data
from lmgym.training.loop import LoopConfig, cli, resume_from, run_loop
from lmgym.training.lora import add_lora, lora_config, trainable_parameters
from lmgym.training.transcripts import train_panels


@dataclass
class KVTeamSFTConfig(LoopConfig):
    # the loop's options (lmgym.training.loop.LoopConfig), this trainer's defaults (DiffMAS:
    # lr 5e-5, cosine decay to 0; no weight decay, Adam's default betas)
    out: str = "runs/diffmas"
    """output folder: adapter/ and metrics.jsonl"""
    steps: int = 200
    lr: float = 5e-5
    warmup: int = 0
    lr_floor: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    data: tuple[str, ...] = ()
    """rollout files of an expert on a single-answer env (first step: question and worked solution)"""
    backbone: str = "smollm2"
    """'smollm2' or a model folder (frozen)"""
    gradient: Literal["stop", "flow"] = "stop"
    """stop: trace built without gradients; flow: upstream agents' own LoRA trained through the trace"""
    num_agents: int = 4
    """agents in the team (the last is the Solver); 1: the Solver alone, the control with no trace"""
    latent_steps: int = 10
    """latent steps per upstream agent (LatentMAS's default)"""
    keep: str = "all"
    """what the trace keeps: all, latent (only latent steps), latest (only the latest agent's segment)"""
    lora_r: int = 8
    """LoRA rank (DiffMAS: 8)"""
    lora_alpha: int = 16
    """LoRA alpha (DiffMAS: 16)"""
    batch_size: int = 4
    """questions per step (each builds its own trace)"""
    max_target_tokens: int = 96
    """longer reference completions are cut"""
    device: str | None = None
    """cpu or cuda (default: the loader's choice)"""


def solver_sft_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of the reference tokens (SFT): logits (T, V), target (T,)."""
    return F.cross_entropy(logits.float(), target)


def load_examples(paths: tuple[str, ...]) -> tuple[list[tuple[str, str]], list[dict]]:
    """(question, reference completion) from the first step of every rollout, and the panels of
    the rollouts they come from (`lmgym.training.transcripts.train_panels`)."""
    episodes = [e for e in load_data(paths)[1] if e.steps and e.steps[0].reasoning]
    if not episodes:
        raise InputError(f"no rollout in {paths} has a first step with reasoning")
    return [(e.steps[0].observation, e.steps[0].reasoning) for e in episodes], train_panels(episodes)


def build_team_model(backbone, cfg: KVTeamSFTConfig):
    """A peft model with adapter ``solver`` (and ``upstream`` when gradients flow)."""
    torch.manual_seed(cfg.seed)  # LoRA's A matrices are drawn here
    model = add_lora(backbone, r=cfg.lora_r, alpha=cfg.lora_alpha, adapter_name=SOLVER_ADAPTER)
    if cfg.gradient == "flow":
        model.add_adapter(UPSTREAM_ADAPTER, lora_config(r=cfg.lora_r, alpha=cfg.lora_alpha))
    return model


def save_adapters(folder: Path, model, meta: dict, optimizer: torch.optim.Optimizer) -> None:
    """Write {solver,upstream}/, lmgym.json and the optimizer state into `folder` atomically
    (a new folder renamed over the old one)."""
    with atomic_folder(folder) as tmp:
        model.save_pretrained(tmp)  # peft writes each adapter but "default" into a sub-folder named after it
        atomic_write_json(tmp / META_FILE, meta)
        torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)


def train(cfg: KVTeamSFTConfig) -> dict[str, float]:
    """Run (or resume) the Solver's SFT; returns the last logged metrics."""
    torch.set_num_threads(cfg.threads)
    if cfg.keep not in KEEP:
        raise InputError(f"--keep must be one of {KEEP}, got {cfg.keep!r}")
    examples, panels = load_examples(cfg.data)
    backbone, tokenizer = load_backbone(cfg.backbone, cfg.device)
    model = build_team_model(backbone, cfg)
    trainable_names = (SOLVER_ADAPTER, UPSTREAM_ADAPTER) if cfg.gradient == "flow" else (SOLVER_ADAPTER,)
    if resumed := resume_from(cfg, "adapter"):
        for name in trainable_names:
            set_peft_model_state_dict(model, load_file(resumed / name / "adapter_model.safetensors"), adapter_name=name)
    team = KVTeam(model, tokenizer, "diffmas", num_agents=cfg.num_agents, latent_steps=cfg.latent_steps, keep=cfg.keep,
                  upstream_adapter=cfg.gradient == "flow")
    params = [p for n, p in model.named_parameters() if "lora_" in n and any(f".{a}." in n for a in trainable_names)]
    for p in params:
        p.requires_grad_(True)
    trainable, total = trainable_parameters(model)
    meta = {"kvteam": {"backbone": cfg.backbone, "gradient": cfg.gradient, "num_agents": cfg.num_agents,
                       "latent_steps": cfg.latent_steps, "keep": cfg.keep},
            "train_config": asdict(cfg), "examples": len(examples), "parameters": total, "trainable_parameters": trainable,
            TRAIN_PANELS: [*inherited_panels(resolve_installed(cfg.backbone)), *panels]}

    def step(k: int, generator: torch.Generator) -> dict[str, float]:
        total_loss = 0.0
        for row in torch.randint(len(examples), (cfg.batch_size,), generator=generator).tolist():
            question, reference = examples[row]
            if cfg.gradient == "flow":
                trace = team.build_trace(question, trainable_names)
            else:
                with torch.no_grad():
                    trace = team.build_trace(question)
            target = team.target_ids(reference)[: cfg.max_target_tokens]
            logits = team.solver_logits(trace, team.solver_ids(question), target, trainable_names)
            loss = solver_sft_loss(logits, torch.tensor(target, device=logits.device)) / cfg.batch_size
            loss.backward()  # one question at a time: each holds its own trace in memory
            total_loss += loss.item()
        return {"train/loss": total_loss}

    return run_loop(cfg, params, step, partial(save_adapters, model=model), meta, folder="adapter",
                    name=f"kvteam sft ({cfg.gradient})")


def main(argv: list[str] | None = None) -> int:
    return cli(KVTeamSFTConfig, train, argv, "kvteam-sft", __doc__)


if __name__ == "__main__":
    raise SystemExit(main())
