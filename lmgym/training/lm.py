"""Train an autoregressive or a masked-diffusion LM on rollout or record files.

``lmgym train lm --objective {ar,mdlm} --data FILE.jsonl ... --out DIR`` (``--help`` lists every
field). One readable file in the CleanRL manner: config, data, losses, model, then the step
handed to the shared loop (`lmgym.training.loop`: resume, optimiser, schedule, logging, saving).

Data: JSON lines, either records (rows with ``prompt`` and ``completion``, laid out as
``[BOS] prompt [SEP] answer [EOS]``, `lmgym.models.tokenizer`) or rollouts
(`lmgym.rollouts.Episode` rows: multi-turn ReAct transcripts rendered exactly as
`lmgym.agents.lm.LMAgent` prompts, through the tokenizer's chat template, with a role per token:
`lmgym.training.transcripts`). Only tokens whose role is in ``--train-roles`` (the model's
reasoning and actions by default) get a loss: observations and tool output never do. The
prompt settings (``--instructions``, ``--few-shot``, ``--max-prompt-tokens``) are recorded in the
checkpoint's meta (``react_prompt``), so the agent prompts the model as it was trained.

Objectives:

* ``ar``: next-token cross-entropy on the trained tokens (SFT; the rest is context only).
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

Everything random comes from ``--seed``: the initial weights, and for step k the loop's
generator, which draws the batch and the masks, so ``--resume`` continues exactly. Outputs in
``--out``: ``checkpoint/`` (`lmgym.models.checkpoints`) and ``metrics.jsonl`` (the loop's keys;
``train/tokens`` counts every token of the batches).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F

from lmgym.envs.splits import panel_hash, task_id
from lmgym.errors import InputError
from lmgym.io import read_jsonl
from lmgym.models import zoo
from lmgym.models.checkpoints import TRAIN_PANELS, inherited_panels, load_checkpoint, save_checkpoint
from lmgym.models.networks import (
    TinyConfig,
    build_model,
    llama_config,
    load_local_model,
    model_folder,
    resize_for_tokenizer,
)
from lmgym.models.tokenizer import answer_ids, ensure_mask_token, load_tokenizer, positions_for, prompt_ids, train_bpe_tokenizer
from lmgym.agents.demonstrations import family_demonstrations
from lmgym.envs.registry import family_of, family_prompt
from lmgym.react import PromptProfile, format_completion, system_text
from lmgym.rollouts import Episode
from lmgym.training.loop import LoopConfig, cli, resume_from, run_loop
from lmgym.training.lora import add_lora, trainable_parameters
from lmgym.training.transcripts import (ACT, CONTEXT, REASON, ROLE_NAMES, Example, encode_episodes, panel_record,
                                       train_panels)

#: Smallest masking rate: t ~ U(EPS, 1) keeps the 1/t weight bounded (MDLM, LLaDA use 1e-3).
EPS = 1e-3


@dataclass
class LMTrainConfig(LoopConfig):
    data: tuple[str, ...] = ()
    """JSONL files of rollouts (Episode rows) or records (rows with prompt and completion)"""
    objective: Literal["ar", "mdlm"] = "ar"
    """ar: next-token SFT; mdlm: masked-diffusion SFT (LLaDA Eq. 5)"""
    mask_schedule: Literal["uniform", "blocks"] = "uniform"
    """mdlm masks: uniform over the answer (LLaDA), or one block at a time behind a clean prefix (the states the semi-autoregressive sampler visits)"""
    block_length: int = 32
    """answer block of --mask-schedule blocks (the sampler's block_length)"""
    out: str = "runs/lm"
    init: str | None = None
    """local model folder to start from ('smollm2': the bundled SmolLM2-135M-Instruct); None builds a tiny Llama"""
    tokenizer: str | None = None
    """tokenizer folder; None: the init model's, else a byte-level BPE trained on the data"""
    vocab_size: int = 1024
    """BPE vocabulary when the tokenizer is trained here"""
    split_digits: bool = False
    """a tokenizer trained here gives every digit its own token (for arithmetic)"""
    hidden_size: int = 128
    """width of a model built from scratch"""
    num_layers: int = 4
    """transformer blocks of a model built from scratch"""
    num_heads: int = 4
    """attention heads of a model built from scratch (2 key/value heads)"""
    max_prompt_tokens: int = 96
    """prompts are cut to their last N tokens; for rollouts, the transcript's history budget (as LMAgent's)"""
    train_roles: tuple[str, ...] = ("reason", "act")
    """token roles that get a loss (context, obs, reason, act; lmgym.training.transcripts)"""
    instructions: bool = False
    """rollouts: put the family's instructions in the system message"""
    few_shot: int = 0
    """rollouts: few-shot demonstrations in the system message"""
    max_answer_tokens: int = 128
    """longer answers are dropped (a cut record teaches broken records); mdlm pads to this length"""
    batch_size: int = 16
    """sequences per step"""
    lora_r: int = 0
    """LoRA rank (0: train all weights); needs --init"""
    lora_alpha: int = 16
    """LoRA scale numerator"""
    bf16: bool = False
    """bfloat16 autocast of the forward pass (weights, gradients and optimizer stay float32): faster on CPUs with bf16 units (studies/distill.py run() measures it)"""
    device: str | None = None
    """cpu or cuda (default: cuda when present)"""


# --- data -------------------------------------------------------------------------------------


def load_data(paths: tuple[str, ...]) -> tuple[list[tuple[str, str]], list[Episode]]:
    """The records (prompt, completion) and the rollouts of JSONL files, in file order."""
    if not paths:
        raise InputError("no --data files given")
    records, episodes = [], []
    for path in paths:
        if not Path(path).is_file():
            raise InputError(f"--data {path}: no such file")
        for line, row in enumerate(read_jsonl(path), start=1):
            if "steps" in row:
                episodes.append(Episode.from_dict(row))
            elif "prompt" in row and "completion" in row:
                records.append((str(row["prompt"]), str(row["completion"])))
            else:
                raise InputError(f"{path}:{line}: expected a rollout (steps) or a record (prompt, completion)")
    return records, episodes


def records_panels(paths: tuple[str, ...]) -> list[dict]:
    """The `train_panels` entries of the records in `paths`, one per source and split (a record's
    ``split`` key). A record made from an env's task says so with ``env_id`` and ``task_id``
    keys, and counts as that task; the others are named by their ``dataset`` key (else their
    file's name) and hashed, with unknown task ids."""
    groups: dict[tuple[str, str | None], list[dict]] = {}
    for path in paths:
        for row in read_jsonl(path):
            if "steps" not in row:
                source = row.get("env_id") or row.get("dataset") or Path(path).name
                groups.setdefault((str(source), row.get("split")), []).append(row)
    panels = []
    for (source, split), rows in groups.items():
        if all("env_id" in row and "task_id" in row for row in rows):
            panels.append(panel_record(source, {"split": split}, None, list(dict.fromkeys(r["task_id"] for r in rows))))
        else:
            panels.append({"dataset": source, "split": split, "n": len(rows), "task_ids": None,
                           "hash": panel_hash([task_id([row["prompt"], row["completion"]]) for row in rows])})
    return panels


def corpus_texts(records: list[tuple[str, str]], episodes: list[Episode], cfg: "LMTrainConfig") -> Iterator[str]:
    """The text a tokenizer made for this data learns from."""
    for pair in records:
        yield from pair
    for episode in episodes:
        yield episode.task
        for step in episode.steps:
            yield step.observation
            yield step.completion or format_completion(step.reasoning, step.action)[0]
    if episodes and (cfg.instructions or cfg.few_shot):
        for family in sorted({family_of(e.env_id) for e in episodes}):
            prompt = family_prompt(family)
            yield system_text(prompt, instructions=cfg.instructions, demonstrations=family_demonstrations(prompt, cfg.few_shot))


def prompt_profile(cfg: "LMTrainConfig") -> PromptProfile:
    return PromptProfile(instructions=cfg.instructions, few_shot=cfg.few_shot, max_prompt_tokens=cfg.max_prompt_tokens)


def encode_data(tokenizer, records, episodes, cfg: "LMTrainConfig") -> tuple[list[Example], int]:
    """Training examples (ids, roles, answer start) of every record and rollout that fits, and
    how many were dropped for length. Contexts are cut from the left to the model's room."""
    examples, dropped = [], 0
    for prompt, answer in records:
        answer_part = answer_ids(tokenizer, answer, cfg.max_answer_tokens, pad_to_max=False)
        if answer_part is None:
            dropped += 1
            continue
        context = prompt_ids(tokenizer, prompt, cfg.max_prompt_tokens)
        examples.append(Example(context + answer_part, [CONTEXT] * len(context) + [ACT] * len(answer_part), len(context)))
    for example in encode_episodes(tokenizer, episodes, prompt_profile(cfg), layout=cfg.objective):
        if cfg.objective == "mdlm":
            answer = example.ids[example.answer_start:] + [tokenizer.eos_token_id]
            if len(answer) > cfg.max_answer_tokens:
                dropped += 1
                continue
            keep = min(example.answer_start, cfg.max_prompt_tokens)
            context = example.ids[example.answer_start - keep:example.answer_start]
            roles = example.roles[example.answer_start - keep:example.answer_start] + example.roles[example.answer_start:] + [ACT]
            examples.append(Example(context + answer, roles, len(context)))
        else:
            room = cfg.max_prompt_tokens + cfg.max_answer_tokens
            examples.append(Example(example.ids[-room:], example.roles[-room:], len(example.ids[-room:])))
    if cfg.objective == "mdlm":  # LLaDA pads answers with EOS to a fixed length
        for example in examples:
            short = cfg.max_answer_tokens - (len(example.ids) - example.answer_start)
            example.ids += [tokenizer.eos_token_id] * short
            example.roles += [ACT] * short
    return examples, dropped


def longest_turn(examples: list[Example]) -> int:
    """The most tokens one assistant turn of `examples` writes: its longest run of REASON and ACT
    tokens, end of turn included. An AR agent given fewer per turn is cut before its action."""
    longest = 0
    for example in examples:
        run = 0
        for role in example.roles:
            run = run + 1 if role in (REASON, ACT) else 0
            longest = max(longest, run)
    return longest


def collate(examples: list[Example], pad_id: int, train_roles: tuple[int, ...] = (REASON, ACT)) -> dict[str, torch.Tensor]:
    """Left-padded batch (B, T): input_ids, attention_mask, roles, answer_mask (the denoising
    target: from each example's answer start on) and loss_mask (roles in `train_roles`)."""
    length = max(len(e.ids) for e in examples)
    input_ids = torch.full((len(examples), length), pad_id, dtype=torch.long)
    attention = torch.zeros((len(examples), length), dtype=torch.long)
    roles = torch.full((len(examples), length), CONTEXT, dtype=torch.long)
    answer = torch.zeros((len(examples), length), dtype=torch.bool)
    for row, example in enumerate(examples):
        start = length - len(example.ids)
        input_ids[row, start:] = torch.tensor(example.ids)
        attention[row, start:] = 1
        roles[row, start:] = torch.tensor(example.roles)
        answer[row, start + example.answer_start:] = True
    loss = torch.isin(roles, torch.tensor(train_roles)) & attention.bool()
    return {"input_ids": input_ids, "attention_mask": attention, "roles": roles, "answer_mask": answer, "loss_mask": loss}


# --- losses -----------------------------------------------------------------------------------


def ar_loss(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean next-token cross-entropy over the trained tokens (``loss_mask``)."""
    logits = model(batch["input_ids"], attention_mask=batch["attention_mask"]).logits  # (B, T, V)
    targets = batch["input_ids"][:, 1:].masked_fill(~batch["loss_mask"][:, 1:], -100)  # (B, T-1)
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), targets.flatten(), ignore_index=-100)


def mdlm_loss(model, batch: dict[str, torch.Tensor], mask_id: int, generator: torch.Generator,
              block_length: int | None = None, eos_id: int | None = None,
              t_range: tuple[float, float] = (EPS, 1.0)) -> torch.Tensor:
    """LLaDA SFT loss (Eq. 5): answer tokens masked at rate t, CE on them weighted 1/t.

    t ~ U(t_range) per sequence (LLaDA: U(EPS, 1); DLLM-Searcher's Agentic SFT: U(0.1, 0.9)).

    With `block_length` the masks follow the semi-autoregressive sampler instead (block
    diffusion, Arriola et al. 2025, arXiv:2503.09573, applied to LLaDA's layout): per sequence
    one answer block b is drawn, blocks before it stay clean, its tokens are masked at rate t,
    every later token is masked, and the loss is Eq. 5 over block b alone. Only blocks that
    start at or before the answer's first EOS are drawn; later ones hold nothing but padding.
    """
    x, answer = batch["input_ids"], batch["answer_mask"]  # (B, T)
    low, high = t_range
    t = low + (high - low) * torch.rand((x.shape[0], 1), generator=generator)  # (B, 1)
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


# --- model ------------------------------------------------------------------------------------


def build(cfg: LMTrainConfig, texts: Iterable[str], device: str | None):
    """(model, tokenizer, base_folder) for a fresh run; a tokenizer made here learns `texts`."""
    bidirectional = cfg.objective == "mdlm"
    if cfg.init is None:
        if cfg.lora_r:
            raise InputError("--lora-r needs --init: LoRA adapts an existing model")
        if cfg.tokenizer:
            tokenizer = load_tokenizer(cfg.tokenizer)
        else:  # the tokenizer learns from the same text the model will read
            tokenizer = train_bpe_tokenizer(texts, vocab_size=cfg.vocab_size, split_digits=cfg.split_digits)
        size = TinyConfig(hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, num_heads=cfg.num_heads,
                          num_kv_heads=max(1, cfg.num_heads // 2), intermediate_size=3 * cfg.hidden_size,
                          max_positions=positions_for(cfg.max_prompt_tokens, cfg.max_answer_tokens))
        model = build_model(llama_config(len(tokenizer), size, bidirectional=bidirectional, tokenizer=tokenizer), cfg.seed)
        return model.to(device or "cpu"), tokenizer, None
    base = model_folder(cfg.init)  # "smollm2", a zoo name or a folder
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
    return model, tokenizer, zoo.label(cfg.init)  # the base as a record names it: "smollm2", a zoo name


def record_positions(model, needed: int) -> None:
    """Rotary positions extend to any length, but the backends cut prompts to the saved
    max_position_embeddings: a longer budget than the model was built for must be recorded."""
    if getattr(model.config, "rope_parameters", None) and model.config.max_position_embeddings < needed:
        model.config.max_position_embeddings = needed


def train(cfg: LMTrainConfig) -> dict[str, float]:
    """Run (or resume) training; returns the last logged metrics."""
    torch.set_num_threads(cfg.threads)
    records, episodes = load_data(cfg.data)
    unknown = set(cfg.train_roles) - set(ROLE_NAMES)
    if unknown:
        raise InputError(f"--train-roles {sorted(unknown)} unknown; choose from {ROLE_NAMES}")
    if resumed := resume_from(cfg):
        model, tokenizer, saved = load_checkpoint(resumed, device=cfg.device, dtype=torch.float32, trainable=True)
        base = saved.get("base_model")
    else:
        model, tokenizer, base = build(cfg, corpus_texts(records, episodes, cfg), cfg.device)
        model.train()
    examples, dropped = encode_data(tokenizer, records, episodes, cfg)
    if not examples:
        raise InputError(f"no pair fits --max-answer-tokens {cfg.max_answer_tokens} ({dropped} dropped)")
    # an AR example keeps its turns whole within max_prompt + max_answer tokens: the agent's budget
    # covers the longest turn trained (MDLM drops the turns longer than its canvas)
    max_new_tokens = max(cfg.max_answer_tokens, longest_turn(examples) if cfg.objective == "ar" else 0)
    record_positions(model, positions_for(cfg.max_prompt_tokens, max_new_tokens))
    mask_id = tokenizer.mask_token_id if cfg.objective == "mdlm" else None
    train_roles = tuple(ROLE_NAMES.index(r) for r in cfg.train_roles)
    trainable, total = trainable_parameters(model)
    meta = {"kind": cfg.objective, "mask_token_id": mask_id, "base_model": base, "train_config": asdict(cfg),
            "max_prompt_tokens": cfg.max_prompt_tokens, "max_answer_tokens": cfg.max_answer_tokens,
            "pairs": len(examples), "dropped_for_length": dropped, "parameters": total, "trainable_parameters": trainable,
            "react_prompt": {**asdict(prompt_profile(cfg)), "show_actions": False, "max_new_tokens": max_new_tokens}
            if episodes else None,
            TRAIN_PANELS: [*inherited_panels(cfg.init), *train_panels(episodes), *(records_panels(cfg.data) if records else [])]}

    def step(k: int, generator: torch.Generator) -> dict[str, float]:
        rows = torch.randint(len(examples), (cfg.batch_size,), generator=generator).tolist()
        batch = collate([examples[i] for i in rows], tokenizer.pad_token_id, train_roles)
        with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
            if cfg.objective == "mdlm":
                loss = mdlm_loss(model, batch, mask_id, generator, eos_id=tokenizer.eos_token_id,
                                 block_length=cfg.block_length if cfg.mask_schedule == "blocks" else None)
            else:
                loss = ar_loss(model, {key: value.to(model.device) for key, value in batch.items()})
        loss.backward()
        return {"train/loss": loss.item(), "train/tokens": int(batch["attention_mask"].sum())}

    return run_loop(cfg, [p for p in model.parameters() if p.requires_grad], step,
                    partial(save_checkpoint, model=model, tokenizer=tokenizer), meta, name=f"train {cfg.objective}",
                    totals=("train/tokens",))


def main(argv: list[str] | None = None) -> int:
    return cli(LMTrainConfig, train, argv, "lm", __doc__)


if __name__ == "__main__":
    raise SystemExit(main())
