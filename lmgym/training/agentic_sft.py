"""Agentic SFT: the masked-diffusion objective on a search teacher's multi-turn trajectories.

``python -m lmgym.training.agentic_sft --data teacher.jsonl --out runs/preact/sft`` (``--help``
lists every field). DLLM-Searcher's first stage (arXiv:2602.07035, sec. 3): the response
tokens of every turn are masked, each response with its own rate t ~ U[0.1, 0.9], and the
model learns to fill them (LLaDA's SFT loss, Eq. 5: ``sum_masked CE / t`` over the response's
tokens, `lmgym.training.lm.mdlm_loss`); the tool responses (observations) are context, never
masked and never trained.

One example per turn, in the response layout P-ReAct decodes (`lmgym.agents.preact.TurnLayout`:
a reasoning region, then the call region between its delimiters, EOS-filled), after the prompt
the agent would send at that turn (`turn_prompt`: the task, the earlier turns as text, the
tool responses). A bidirectional model trained on the whole trajectory at once would see later
tool responses while denoising an earlier call, which inference never shows it. Turns whose
reasoning or call does not fit its region are dropped (counted in the meta).

The model: a tiny bidirectional Llama from scratch, or ``--init`` a folder (an AR model of the
same data: the AR-to-diffusion adaptation of `lmgym.training.lm`; or a LLaDA-style model).
Everything random comes from ``--seed``; ``--resume`` continues exactly. Outputs in ``--out``:
``checkpoint/`` (its meta records the layout, ``preact_layout``, which the agent reads) and
``metrics.jsonl`` (``train/loss``, ``train/lr``, ``train/grad_norm``, ``train/step``).
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import tyro
from tqdm.auto import tqdm

from lmgym.agents.preact import CLOSE, OPEN, TurnLayout, call_text, turn_prompt
from lmgym.io import append_jsonl, rewind_log
from lmgym.models.checkpoints import load_checkpoint, load_optimizer_state, read_meta, save_checkpoint
from lmgym.react import Turn
from lmgym.rollouts import Episode
from lmgym.training.lm import LMTrainConfig, build, collate, learning_rate, load_data, mdlm_loss
from lmgym.training.transcripts import ACT, CONTEXT, REASON, Example


@dataclass
class AgenticSFTConfig:
    data: tuple[str, ...] = ()
    """JSONL rollout files of the teacher (Episode rows)"""
    out: str = "runs/preact/sft"
    """output folder: checkpoint/ and metrics.jsonl"""
    init: str | None = None
    """model folder to start from (AR: adapted to diffusion); None builds a tiny Llama"""
    tokenizer: str | None = None
    """tokenizer folder; None: the init model's, else a byte-level BPE trained on the data"""
    vocab_size: int = 1024
    """BPE vocabulary when the tokenizer is trained here"""
    hidden_size: int = 128
    """width of a model built from scratch"""
    num_layers: int = 4
    """transformer blocks of a model built from scratch"""
    num_heads: int = 4
    """attention heads of a model built from scratch"""
    reason_tokens: int = 64
    """tokens of the reasoning region of each turn"""
    call_tokens: int = 32
    """tokens of the call region (delimiters included)"""
    max_prompt_tokens: int = 320
    """prompt budget (earliest turns dropped first, as the agent does)"""
    mask_low: float = 0.1
    """lowest masking rate of a response (DLLM-Searcher: 0.1)"""
    mask_high: float = 0.9
    """highest masking rate of a response (DLLM-Searcher: 0.9)"""
    steps: int = 1500
    """optimizer steps"""
    batch_size: int = 16
    """turns per step"""
    lr: float = 3e-3
    """peak learning rate (linear warmup, cosine decay to 10%)"""
    warmup: int = 100
    """warmup steps"""
    weight_decay: float = 0.01
    """AdamW weight decay"""
    grad_clip: float = 1.0
    """max gradient norm"""
    seed: int = 0
    """seed of the initial weights, the batches and the masks"""
    save_every: int = 250
    """checkpoint every N steps (0: only at the end)"""
    resume: bool = True
    """continue from OUT/checkpoint when it exists"""
    log_every: int = 25
    """steps between metric lines"""
    threads: int = 1
    """torch CPU threads"""
    device: str | None = None
    """cpu or cuda (default: cuda when present)"""
    quiet: bool = False
    """no progress bar"""


def turn_examples(tokenizer, episode: Episode, layout: TurnLayout, max_prompt_tokens: int) -> list[Example | None]:
    """One example per turn of `episode` (None where the turn does not fit the layout): the
    prompt the agent sends at that turn, then the turn's layout ids as the denoising target."""
    turns: list[Turn] = []
    examples: list[Example | None] = []
    for step in episode.steps:
        turns.append(Turn(step.observation))
        context = turn_prompt(tokenizer, episode.task, turns, max_prompt_tokens)
        target = layout.encode(tokenizer, step.reasoning, step.action)
        if target is None:
            examples.append(None)
        else:
            roles = [CONTEXT] * len(context) + [REASON] * layout.reason_tokens + [ACT] * layout.call_tokens
            examples.append(Example(context + target, roles, len(context)))
        turns[-1].completion = layout.text(step.reasoning, step.action)
    return examples


def corpus_texts(episodes: list[Episode]):
    """What a tokenizer made for this data learns from (the delimiters included)."""
    for episode in episodes:
        yield episode.task
        for step in episode.steps:
            yield step.observation
            yield f"{step.reasoning}{OPEN} {call_text(step.action)}{CLOSE}"


def model_config(cfg: AgenticSFTConfig, layout: TurnLayout) -> LMTrainConfig:
    """The `lmgym.training.lm` config that builds this run's model (bidirectional, ``mdlm``)."""
    return LMTrainConfig(objective="mdlm", init=cfg.init, tokenizer=cfg.tokenizer, vocab_size=cfg.vocab_size,
                         hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, num_heads=cfg.num_heads,
                         max_prompt_tokens=cfg.max_prompt_tokens, max_answer_tokens=layout.length, seed=cfg.seed)


def train(cfg: AgenticSFTConfig) -> dict[str, float]:
    """Run (or resume) Agentic SFT; returns the last logged metrics."""
    # --- setup ---
    torch.set_num_threads(cfg.threads)
    out, layout = Path(cfg.out), TurnLayout(cfg.reason_tokens, cfg.call_tokens)
    checkpoint = out / "checkpoint"
    _, episodes = load_data(cfg.data)
    if not episodes:
        raise ValueError(f"no rollouts in {cfg.data}")
    start_step, earlier = 0, 0.0  # earlier: seconds trained before an interruption
    if cfg.resume and read_meta(checkpoint).get("step") is not None:
        model, tokenizer, meta = load_checkpoint(checkpoint, device=cfg.device, dtype=torch.float32, trainable=True)
        start_step, base, earlier = meta["step"], meta.get("base_model"), meta.get("train_seconds", 0.0)
    else:
        model, tokenizer, base = build(model_config(cfg, layout), corpus_texts(episodes), cfg.device)
        model.train()
    examples = [e for episode in episodes for e in turn_examples(tokenizer, episode, layout, cfg.max_prompt_tokens)]
    kept = [e for e in examples if e is not None]
    if not kept:
        raise ValueError(f"no turn fits the layout ({layout.reason_tokens} + {layout.call_tokens} tokens)")
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.95))
    if start_step:
        load_optimizer_state(checkpoint, optimizer)
    meta = {"kind": "mdlm", "mask_token_id": tokenizer.mask_token_id, "base_model": base, "train_config": asdict(cfg),
            "max_prompt_tokens": cfg.max_prompt_tokens, "max_answer_tokens": layout.length, "turns": len(kept),
            "dropped_for_length": len(examples) - len(kept), "episodes": len(episodes),
            "parameters": sum(p.numel() for p in model.parameters()),
            "preact_layout": {"reason_tokens": layout.reason_tokens, "call_tokens": layout.call_tokens,
                              "max_prompt_tokens": cfg.max_prompt_tokens}}

    def save(step: int, seconds: float) -> None:
        save_checkpoint(checkpoint, model, tokenizer, {**meta, "step": step, "train_seconds": seconds}, optimizer)

    # --- training loop ---
    metrics: dict[str, float] = {}
    rewind_log(out / "metrics.jsonl", start_step)  # the steps about to run are logged once
    started = time.time() - earlier
    bar = tqdm(range(start_step, cfg.steps), initial=start_step, total=cfg.steps,
               disable=cfg.quiet or not sys.stderr.isatty(), desc="agentic sft")
    report_every = 0 if cfg.quiet or not bar.disable else max(cfg.steps // 10, 1)
    for step in bar:
        generator = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)  # batch and masks of step k
        rows = torch.randint(len(kept), (cfg.batch_size,), generator=generator).tolist()
        batch = collate([kept[i] for i in rows], tokenizer.pad_token_id)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(cfg, step)
        loss = mdlm_loss(model, batch, tokenizer.mask_token_id, generator, t_range=(cfg.mask_low, cfg.mask_high))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optimizer.step()
        if (step + 1) % cfg.log_every == 0 or step + 1 == cfg.steps:
            metrics = {"train/step": step + 1, "train/loss": loss.item(), "train/lr": learning_rate(cfg, step),
                       "train/grad_norm": float(grad_norm), "train/seconds": time.time() - started}
            append_jsonl(out / "metrics.jsonl", metrics)
            bar.set_postfix(loss=f"{metrics['train/loss']:.3f}")
        if report_every and ((step + 1) % report_every == 0 or step + 1 == cfg.steps):
            print(f"agentic sft step {step + 1}/{cfg.steps}: loss {loss.item():.4f}, {time.time() - started:.0f} s",
                  flush=True)
        if cfg.save_every and (step + 1) % cfg.save_every == 0 and step + 1 < cfg.steps:
            save(step + 1, time.time() - started)
    if start_step < cfg.steps:
        save(cfg.steps, time.time() - started)
    return metrics


def main(argv: list[str] | None = None) -> dict[str, float]:
    cfg = tyro.cli(AgenticSFTConfig, args=argv, prog="python -m lmgym.training.agentic_sft",
                   description=__doc__.split("\n\n")[0])
    metrics = train(cfg)
    if metrics:
        print(f"step {metrics['train/step']}: loss {metrics['train/loss']:.4f} -> {Path(cfg.out) / 'checkpoint'}")
    return metrics


if __name__ == "__main__":
    main()
