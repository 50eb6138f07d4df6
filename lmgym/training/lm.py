"""Train an autoregressive or a masked-diffusion LM on rollout or record files.

``python -m lmgym.training.lm --objective {ar,mdlm} --data FILE.jsonl ... --out DIR`` (the CLI
wires it as ``lmgym train lm|mdlm``). One readable file in the CleanRL manner: config, seeding,
data, model, then the loop; ``--help`` lists every field.

Data: JSON lines, either rollouts (`lmgym.rollouts.Episode` rows: each step becomes the pair
``"Task: <task>\\nObservation: <observation>\\n"`` -> the step's ``Thought: ...\\nAction: ...``
completion) or records (rows with ``prompt`` and ``completion``). Each pair is laid out as
``[BOS] prompt [SEP] answer [EOS]`` (`lmgym.policies.tokenizer`), left-padded in a batch.

Objectives:

* ``ar``: next-token cross-entropy on the answer tokens (SFT; the prompt is context only).
* ``mdlm``: the masked-diffusion objective of LLaDA's SFT (Nie et al. 2025, arXiv:2502.09992,
  Eq. 5; MDLM, Sahoo et al. 2024, arXiv:2406.07524, Eq. 10 with the linear schedule): draw
  t ~ U(0, 1] per sequence, mask each answer token with probability t, and minimise
  ``sum_masked CE(x_i | x_t) / t`` divided by the number of answer tokens. Answers are padded
  with EOS to ``--max-answer-tokens``, as LLaDA does, so the sampler can write EOS after the end.
  ``--mask-schedule blocks`` draws the masks the semi-autoregressive sampler visits instead
  (one block behind a clean prefix, the rest masked; `mdlm_loss`): on a small budget it
  learns the sampler's actual task far sooner.
  Starting from an AR folder (``--init``) this is the AR-to-diffusion adaptation (DiffuLLaMA,
  Gong et al. 2024, arXiv:2410.17891, without its attention-mask annealing and logit shift):
  attention made bidirectional, a ``[MASK]`` token added, then continued training.

Everything random comes from ``--seed``: the initial weights, and for step k a generator
seeded with (seed, k) that draws the batch and the masks, so ``--resume`` continues exactly.
Outputs in ``--out``: ``checkpoint/`` (`lmgym.policies.checkpoints`), ``metrics.jsonl``
(``train/loss``, ``train/lr``, ``train/grad_norm``, ``train/tokens``, ``train/step``).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
import tyro
from tqdm.auto import tqdm

from lmgym.io import append_jsonl, read_jsonl
from lmgym.policies.checkpoints import load_checkpoint, load_optimizer_state, read_meta, save_checkpoint
from lmgym.policies.models import (
    TinyConfig,
    build_model,
    llama_config,
    load_local_model,
    resize_for_tokenizer,
    smollm2_folder,
)
from lmgym.policies.tokenizer import answer_ids, ensure_mask_token, load_tokenizer, prompt_ids, train_bpe_tokenizer
from lmgym.rollouts import Episode, format_completion
from lmgym.training.lora import add_lora, trainable_parameters

#: Smallest masking rate: t ~ U(EPS, 1) keeps the 1/t weight bounded (MDLM, LLaDA use 1e-3).
EPS = 1e-3


@dataclass
class LMTrainConfig:
    data: tuple[str, ...] = ()
    """JSONL files of rollouts (Episode rows) or records (rows with prompt and completion)"""
    objective: Literal["ar", "mdlm"] = "ar"
    """ar: next-token SFT; mdlm: masked-diffusion SFT (LLaDA Eq. 5)"""
    mask_schedule: Literal["uniform", "blocks"] = "uniform"
    """mdlm masks: uniform over the answer (LLaDA), or one block at a time behind a clean prefix (the states the semi-autoregressive sampler visits)"""
    block_length: int = 32
    """answer block of --mask-schedule blocks (the sampler's block_length)"""
    out: str = "runs/lm"
    """output folder: checkpoint/ and metrics.jsonl"""
    init: str | None = None
    """local model folder to start from ('smollm2': the bundled SmolLM2-135M-Instruct); None builds a tiny Llama"""
    tokenizer: str | None = None
    """tokenizer folder; None: the init model's, else a byte-level BPE trained on the data"""
    vocab_size: int = 1024
    """BPE vocabulary when the tokenizer is trained here"""
    hidden_size: int = 128
    """width of a model built from scratch"""
    num_layers: int = 4
    """transformer blocks of a model built from scratch"""
    num_heads: int = 4
    """attention heads of a model built from scratch (2 key/value heads)"""
    max_prompt_tokens: int = 96
    """prompts are cut to their first N tokens"""
    max_answer_tokens: int = 128
    """longer answers are dropped (a cut record teaches broken records); mdlm pads to this length"""
    steps: int = 500
    """optimizer steps"""
    batch_size: int = 16
    """sequences per step"""
    lr: float = 1e-3
    """peak learning rate (linear warmup, cosine decay to 10%)"""
    warmup: int = 50
    """warmup steps"""
    weight_decay: float = 0.01
    """AdamW weight decay"""
    grad_clip: float = 1.0
    """max gradient norm"""
    lora_r: int = 0
    """LoRA rank (0: train all weights); needs --init"""
    lora_alpha: int = 16
    """LoRA scale numerator"""
    seed: int = 0
    """seed of the initial weights, the batches and the masks"""
    save_every: int = 0
    """checkpoint every N steps (0: only at the end)"""
    resume: bool = True
    """continue from OUT/checkpoint when it exists"""
    log_every: int = 10
    """steps between metric lines"""
    threads: int = 1
    """torch CPU threads (1: on a small shared CPU, 2 threads ran a step 2.4x slower than 1)"""
    device: str | None = None
    """cpu or cuda (default: cuda when present)"""
    quiet: bool = False
    """no progress bar"""


# --- data -------------------------------------------------------------------------------------


def rollout_pairs(episode: Episode) -> list[tuple[str, str]]:
    """(prompt, completion) per step of a rollout: the agent's ReAct turn given what it read."""
    pairs = []
    for step in episode.steps:
        completion = step.completion or format_completion(step.reasoning, step.action)[0]
        pairs.append((f"Task: {episode.task}\nObservation: {step.observation}\n", completion))
    return pairs


def load_pairs(paths: tuple[str, ...]) -> list[tuple[str, str]]:
    """All (prompt, completion) pairs of rollout and record files, in file order."""
    if not paths:
        raise ValueError("no --data files given")
    pairs = []
    for path in paths:
        for line, row in enumerate(read_jsonl(path), start=1):
            if "steps" in row:
                pairs.extend(rollout_pairs(Episode.from_dict(row)))
            elif "prompt" in row and "completion" in row:
                pairs.append((str(row["prompt"]), str(row["completion"])))
            else:
                raise ValueError(f"{path}:{line}: expected a rollout (steps) or a record (prompt, completion)")
    return pairs


def encode_pairs(tokenizer, pairs, cfg: LMTrainConfig) -> tuple[list[tuple[list[int], list[int]]], int]:
    """Token ids of each pair that fits, and how many were dropped for length."""
    encoded, dropped = [], 0
    for prompt, answer in pairs:
        answer_part = answer_ids(tokenizer, answer, cfg.max_answer_tokens, pad_to_max=cfg.objective == "mdlm")
        if answer_part is None:
            dropped += 1
            continue
        encoded.append((prompt_ids(tokenizer, prompt, cfg.max_prompt_tokens), answer_part))
    return encoded, dropped


def collate(examples: list[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Left-padded batch: input_ids, attention_mask and answer_mask, all (B, T)."""
    length = max(len(p) + len(a) for p, a in examples)
    input_ids = torch.full((len(examples), length), pad_id, dtype=torch.long)
    attention = torch.zeros((len(examples), length), dtype=torch.long)
    answer = torch.zeros((len(examples), length), dtype=torch.bool)
    for row, (prompt, ans) in enumerate(examples):
        start = length - len(prompt) - len(ans)
        input_ids[row, start:] = torch.tensor(prompt + ans)
        attention[row, start:] = 1
        answer[row, length - len(ans):] = True
    return {"input_ids": input_ids, "attention_mask": attention, "answer_mask": answer}


# --- losses -----------------------------------------------------------------------------------


def ar_loss(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean next-token cross-entropy over answer tokens."""
    logits = model(batch["input_ids"], attention_mask=batch["attention_mask"]).logits  # (B, T, V)
    targets = batch["input_ids"][:, 1:].masked_fill(~batch["answer_mask"][:, 1:], -100)  # (B, T-1)
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), targets.flatten(), ignore_index=-100)


def mdlm_loss(model, batch: dict[str, torch.Tensor], mask_id: int, generator: torch.Generator,
              block_length: int | None = None, eos_id: int | None = None) -> torch.Tensor:
    """LLaDA SFT loss (Eq. 5): answer tokens masked at rate t, CE on them weighted 1/t.

    With `block_length` the masks follow the semi-autoregressive sampler instead (block
    diffusion, Arriola et al. 2025, arXiv:2503.09573, applied to LLaDA's layout): per sequence
    one answer block b is drawn, blocks before it stay clean, its tokens are masked at rate t,
    every later token is masked, and the loss is Eq. 5 over block b alone. Only blocks that
    start at or before the answer's first EOS are drawn; later ones hold nothing but padding.
    """
    x, answer = batch["input_ids"], batch["answer_mask"]  # (B, T)
    t = EPS + (1 - EPS) * torch.rand((x.shape[0], 1), generator=generator)  # (B, 1)
    masked = answer & (torch.rand(x.shape, generator=generator) < t)  # (B, T)
    scored = answer
    if block_length:
        # position of each answer token within the answer: 0, 1, ... (-1 outside it)
        index = answer.long().cumsum(dim=1) - 1  # (B, T)
        content = (answer & (x != eos_id)).sum(dim=1)  # (B,) answer tokens before the padding EOS
        choices = content // block_length + 1  # blocks starting at or before the first EOS
        block = (torch.rand((x.shape[0],), generator=generator) * choices).long().unsqueeze(1)  # (B, 1)
        scored = answer & (index // block_length == block)  # (B, T): the current block
        masked = (masked & scored) | (answer & (index // block_length > block))  # later blocks fully masked
    x_t = x.masked_fill(masked, mask_id)
    logits = model(x_t.to(model.device), attention_mask=batch["attention_mask"].to(model.device)).logits  # (B, T, V)
    target = (masked & scored).to(logits.device)  # the masked tokens the loss is over
    ce = F.cross_entropy(logits[target].float(), x.to(logits.device)[target], reduction="none")  # (M,)
    weight = 1.0 / t.to(logits.device).expand_as(target)[target]  # (M,)
    return (ce * weight).sum() / scored.sum().clamp(min=1).to(logits.device)


def learning_rate(cfg: LMTrainConfig, step: int) -> float:
    """Linear warmup to cfg.lr, then cosine decay to 10% (a pure function of the step)."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


# --- model ------------------------------------------------------------------------------------


def build(cfg: LMTrainConfig, pairs, device: str | None):
    """(model, tokenizer, base_folder) for a fresh run."""
    bidirectional = cfg.objective == "mdlm"
    if cfg.init is None:
        if cfg.lora_r:
            raise ValueError("--lora-r needs --init: LoRA adapts an existing model")
        if cfg.tokenizer:
            tokenizer = load_tokenizer(cfg.tokenizer)
        else:  # the tokenizer learns from the same text the model will read
            tokenizer = train_bpe_tokenizer((text for pair in pairs for text in pair), vocab_size=cfg.vocab_size)
        size = TinyConfig(hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, num_heads=cfg.num_heads,
                          num_kv_heads=max(1, cfg.num_heads // 2), intermediate_size=3 * cfg.hidden_size,
                          max_positions=cfg.max_prompt_tokens + cfg.max_answer_tokens + 8)
        model = build_model(llama_config(len(tokenizer), size, bidirectional=bidirectional, tokenizer=tokenizer), cfg.seed)
        return model.to(device or "cpu"), tokenizer, None
    base = str(smollm2_folder()) if cfg.init == "smollm2" else cfg.init
    tokenizer = load_tokenizer(cfg.tokenizer or base)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    # float32 weights for training on CPU; on CUDA bf16 is the loader's default
    model = load_local_model(base, device=device, dtype=torch.float32 if not (device or "").startswith("cuda") else None,
                             bidirectional=bidirectional)
    if bidirectional:
        ensure_mask_token(tokenizer)
        resize_for_tokenizer(model, tokenizer)
    torch.manual_seed(cfg.seed)  # LoRA's A matrices are drawn here
    if cfg.lora_r:
        model = add_lora(model, r=cfg.lora_r, alpha=cfg.lora_alpha)
    return model, tokenizer, base


def train(cfg: LMTrainConfig) -> dict[str, float]:
    """Run (or resume) training; returns the last logged metrics."""
    # --- seeding and setup ---
    torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    checkpoint = out / "checkpoint"
    pairs = load_pairs(cfg.data)
    start_step = 0
    if cfg.resume and read_meta(checkpoint).get("step") is not None:
        model, tokenizer, meta = load_checkpoint(checkpoint, device=cfg.device, dtype=torch.float32, trainable=True)
        start_step, base = meta["step"], meta.get("base_model")
    else:
        model, tokenizer, base = build(cfg, pairs, cfg.device)
        model.train()
    device = model.device
    examples, dropped = encode_pairs(tokenizer, pairs, cfg)
    if not examples:
        raise ValueError(f"no pair fits --max-answer-tokens {cfg.max_answer_tokens} ({dropped} dropped)")
    mask_id = tokenizer.mask_token_id if cfg.objective == "mdlm" else None
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.95))
    if start_step:
        load_optimizer_state(checkpoint, optimizer)
    trainable, total = trainable_parameters(model)
    meta = {"kind": cfg.objective, "mask_token_id": mask_id, "base_model": base, "train_config": asdict(cfg),
            "max_prompt_tokens": cfg.max_prompt_tokens, "max_answer_tokens": cfg.max_answer_tokens,
            "pairs": len(examples), "dropped_for_length": dropped, "parameters": total, "trainable_parameters": trainable}

    def save(step: int) -> None:
        save_checkpoint(checkpoint, model, tokenizer, {**meta, "step": step}, optimizer)

    # --- training loop ---
    metrics: dict[str, float] = {}
    tokens, started = 0, time.time()
    bar = tqdm(range(start_step, cfg.steps), initial=start_step, total=cfg.steps, disable=cfg.quiet or not sys.stderr.isatty(),
               desc=f"train {cfg.objective}")
    # Off a terminal (logs, CI) there is no bar: a line every tenth of the run shows progress instead.
    report_every = 0 if cfg.quiet or not bar.disable else max(cfg.steps // 10, 1)
    for step in bar:
        generator = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)  # batch and masks of step k
        rows = torch.randint(len(examples), (cfg.batch_size,), generator=generator).tolist()
        batch = collate([examples[i] for i in rows], tokenizer.pad_token_id)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(cfg, step)
        if cfg.objective == "mdlm":
            loss = mdlm_loss(model, batch, mask_id, generator, eos_id=tokenizer.eos_token_id,
                             block_length=cfg.block_length if cfg.mask_schedule == "blocks" else None)
        else:
            loss = ar_loss(model, {k: v.to(device) for k, v in batch.items()})
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optimizer.step()
        tokens += int(batch["attention_mask"].sum())
        if (step + 1) % cfg.log_every == 0 or step + 1 == cfg.steps:
            metrics = {"train/step": step + 1, "train/loss": loss.item(), "train/lr": learning_rate(cfg, step),
                       "train/grad_norm": float(grad_norm), "train/tokens": tokens,
                       "train/tokens_per_s": tokens / max(1e-9, time.time() - started)}
            append_jsonl(out / "metrics.jsonl", metrics)
            bar.set_postfix(loss=f"{metrics['train/loss']:.3f}")
        if report_every and ((step + 1) % report_every == 0 or step + 1 == cfg.steps):
            print(f"train {cfg.objective} step {step + 1}/{cfg.steps}: loss {loss.item():.4f}, "
                  f"{time.time() - started:.0f} s", flush=True)
        if cfg.save_every and (step + 1) % cfg.save_every == 0 and step + 1 < cfg.steps:
            save(step + 1)
    if start_step < cfg.steps:
        save(cfg.steps)
    return metrics


def main(argv: list[str] | None = None) -> dict[str, float]:
    cfg = tyro.cli(LMTrainConfig, args=argv, prog="lmgym train lm", description=__doc__.split("\n\n")[0])
    metrics = train(cfg)
    if metrics:
        print(f"step {metrics['train/step']}: loss {metrics['train/loss']:.4f} -> {Path(cfg.out) / 'checkpoint'}")
    return metrics


if __name__ == "__main__":
    main()
