"""Distil a ReAct teacher into a small student: SeqKD, token-level KD, reverse KL, or SAD.

``lmgym train distill --teacher FOLDER --data ROLLOUTS.jsonl --method sad --out DIR``
(``--help`` lists every field). One readable file in the CleanRL manner: config, losses,
data, then the step the shared loop runs (`lmgym.training.loop`). The data are the teacher's own rollouts (`lmgym.rollouts.Episode` rows,
what the teacher wrote as an `lm` agent on training seeds); each turn becomes one example: the
prompt the agent sent (rendered exactly as `lmgym.agents.lm.LMAgent` renders it,
`lmgym.training.transcripts`, ``layout="mdlm"``) and the completion with a role per token
(``REASON``: the ``Thought:`` line; ``ACT``: the ``Action:`` line and the end-of-turn token).
Observations and the prompt are context only: no method trains on them. The frozen teacher's
token distributions at the completion positions are computed once, before the loop, and held in
memory (`teacher_log_probs`: V floats per completion token); with ``--teacher-cache`` they are
also written to a folder that later students of the same teacher and data read instead
(`cached_teacher_log_probs`). rkl's teacher scores the student's fresh samples on each batch.
The teacher may be a LoRA adapter on a pretrained model (the ladder's SmolLM2 rungs): the
student then takes its tokenizer, 49,152 tokens for SmolLM2, and ``--teacher-bf16`` runs the
teacher's forward passes under bfloat16 autocast.

Methods (``--method``):

* ``seqkd``: sequence-level KD (Kim & Rush 2016, arXiv:1606.07947): cross-entropy on the
  teacher's sampled completions.
* ``kd``: token-level KD (Hinton et al. 2015, arXiv:1503.02531; the GKD paper's supervised
  forward KL, Agarwal et al. 2024, arXiv:2306.13649): forward KL(teacher || student) on every
  completion token, averaged over them.
* ``rkl``: reverse KL on the student's own samples (GKD with lambda = 1, beta = 1; MiniLLM,
  Gu et al. 2024, arXiv:2306.08543, optimises the same reverse KL with a policy gradient): the
  student samples a completion for each prompt (temperature 1), then KL(student || teacher) is
  taken over the full vocabulary at each sampled position, the samples held fixed.
* ``sad``: Structured Agent Distillation (the SAD paper; no code is public): L_CoT, forward
  KL(teacher || student) averaged over the REASON tokens, and L_Act, the same over the ACT
  tokens, with equal weights. ``--projection`` combines their gradients by PCGrad's rule
  (`project_conflicting`); ``--curriculum`` orders examples easy to hard
  (`difficulty_scores`, `competence`). ``--spans reason|act`` keeps one loss (ablations).

Everything random comes from ``--seed``: the student's initial weights, and for step k the
loop's generator, which draws the batch and the student's samples, so ``--resume`` continues
exactly. Outputs in ``--out``: ``checkpoint/`` (an `lm` agent's ``model=`` folder, prompted as
the teacher was), ``metrics.jsonl`` (the loop's keys, ``train/tokens`` counting completion
tokens, and ``train/loss_reason``, ``train/loss_act``, ``train/conflict_rate`` (of this
attempt's steps), ``train/competence``).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Literal, NamedTuple

import safetensors
import safetensors.torch
import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase

from lmgym.errors import InputError
from lmgym.io import atomic_folder
from lmgym.models import zoo
from lmgym.models.checkpoints import TRAIN_PANELS, inherited_panels, is_lora_checkpoint, load_checkpoint, save_checkpoint
from lmgym.models.generation import generate
from lmgym.models.networks import TinyConfig, build_model, llama_config
from lmgym.models.tokenizer import positions_for
from lmgym.react import PromptProfile
from lmgym.training.lm import collate as lm_collate, load_data
from lmgym.training.loop import LoopConfig, cli, resume_from, run_loop
from lmgym.training.objectives import masked_mean
from lmgym.training.transcripts import ACT, CONTEXT, REASON, Example, encode_episode, train_panels

METHODS = ("seqkd", "kd", "rkl", "sad")


@dataclass
class DistillConfig(LoopConfig):
    # the loop's options (lmgym.training.loop.LoopConfig), this trainer's defaults
    out: str = "runs/distill"
    steps: int = 600
    lr: float = 3e-3
    teacher: str = ""
    """the teacher's checkpoint folder or zoo name (an AR model or LoRA adapter trained here: its tokenizer and prompt are the student's)"""
    data: tuple[str, ...] = ()
    """JSONL rollout files the teacher played (Episode rows): the distillation data"""
    method: Literal["seqkd", "kd", "rkl", "sad"] = "sad"
    """seqkd: SFT on teacher samples; kd: forward KL on every completion token; rkl: reverse KL on student samples; sad: span-level KL"""
    projection: bool = True
    """sad: combine the reason and action gradients by PCGrad's projection of conflicting components"""
    curriculum: bool = True
    """sad: sample from the easiest examples first (trajectory length and teacher uncertainty)"""
    spans: Literal["both", "reason", "act"] = "both"
    """sad: which span losses train (reason or act alone: the ablations)"""
    curriculum_start: float = 0.25
    """competence at step 0: the easiest fraction of examples sampled at first"""
    curriculum_steps: float = 0.5
    """fraction of the run after which every example is in the pool"""
    hidden_size: int = 48
    """student width"""
    num_layers: int = 2
    """student transformer blocks"""
    num_heads: int = 4
    """student attention heads (half as many key/value heads)"""
    max_answer_tokens: int | None = None
    """longest completion kept (and rkl's sampling length); None: the teacher's"""
    teacher_cache: str | None = None
    """kd, sad: folder holding the teacher's distributions over this data; read when it was written for the same teacher weights and turns, else computed and written (students of one data set share it)"""
    batch_size: int = 16
    """turns per step"""
    teacher_bf16: bool = False
    """the frozen teacher's forward passes (its cached distributions, rkl's scoring) under bfloat16 autocast: faster for a SmolLM2 teacher on CPUs with bf16 units (AMX), its distributions rounded to bf16"""
    device: str | None = None
    """cpu or cuda (default: cuda when present)"""


# --- losses: small pure functions over logits (B, T, V) and a token mask (B, T) ------------------


def kl_divergence(p_logits: torch.Tensor, q_logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """KL(p || q) per token, summed over the vocabulary, averaged over `mask`."""
    log_p = torch.log_softmax(p_logits.float(), dim=-1)
    log_q = torch.log_softmax(q_logits.float(), dim=-1)
    return masked_mean((log_p.exp() * (log_p - log_q)).sum(dim=-1), mask)


def forward_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """KL(p_teacher || p_student) per token, summed over the vocabulary, averaged over `mask`.

    Hinton et al. 2015 (arXiv:1503.02531) at temperature 1; equals TRL's
    ``generalized_jsd_loss(..., beta=0)`` with the unmasked tokens' labels -100 (tested).
    """
    return kl_divergence(teacher_logits, student_logits, mask)


def reverse_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """KL(p_student || p_teacher) per token, summed over the vocabulary, averaged over `mask`.

    GKD's beta = 1 end (Agarwal et al. 2024, arXiv:2306.13649, eq. for D_JSD(beta)); equals
    TRL's ``generalized_jsd_loss(..., beta=1)`` (tested).
    """
    return kl_divergence(student_logits, teacher_logits, mask)


def sequence_kd_loss(student_logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the teacher's sampled tokens `targets` (B, T), averaged over `mask`
    (SeqKD: Kim & Rush 2016, arXiv:1606.07947)."""
    ce = F.cross_entropy(student_logits.float().flatten(0, 1), targets.flatten(), reduction="none")
    return masked_mean(ce.view(targets.shape), mask)


def project_conflicting(g_reason: torch.Tensor, g_act: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """The combined gradient of two losses by PCGrad's rule (Yu et al. 2020, arXiv:2001.06782, Alg. 1).

    When the two gradients conflict (negative dot product), each loses its component along the
    other (projected onto the other's normal plane, both projections from the original vectors,
    which for two tasks is PCGrad's rule in either order); otherwise they are summed unchanged.
    Why this rule: with equal weights a plain sum lets the larger of L_CoT and L_Act undo the
    other's progress to first order whenever they conflict; after projection neither term's
    step increases the other loss to first order, and where they agree nothing changes.
    Returns (combined flat gradient, whether they conflicted).
    """
    dot = torch.dot(g_reason, g_act)
    if dot >= 0:
        return g_reason + g_act, False
    reason = g_reason - dot / g_act.dot(g_act) * g_act
    act = g_act - dot / g_reason.dot(g_reason) * g_reason
    return reason + act, True


def difficulty_scores(trajectory_steps: list[int], teacher_entropy: list[float]) -> list[float]:
    """Curriculum score per example in [0, 1]: the mean of its two normalised ranks, the length
    of the trajectory it comes from and the teacher's mean next-token entropy over its
    completion (uncertainty). Ranks (ties share their mean rank) make the two scales comparable
    without a weight to tune. Our documented choice: SAD publishes no formula."""
    def ranks(values: list[float]) -> list[float]:
        order = sorted(range(len(values)), key=lambda i: values[i])
        rank = [0.0] * len(values)
        start = 0
        while start < len(order):
            end = start
            while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
                end += 1
            for position in range(start, end + 1):
                rank[order[position]] = (start + end) / 2
            start = end + 1
        top = max(len(values) - 1, 1)
        return [r / top for r in rank]

    return [(a + b) / 2 for a, b in zip(ranks([float(s) for s in trajectory_steps]), ranks(teacher_entropy))]


def competence(step: int, total_steps: int, start: float, ramp_fraction: float) -> float:
    """The fraction of examples (easiest first) in the sampling pool at `step`: the square-root
    competence schedule of Platanios et al. 2019 (arXiv:1903.09848, eq. 7),
    ``min(1, sqrt(t (1 - c0^2) / T + c0^2))`` with T = ramp_fraction * total_steps."""
    ramp = max(1.0, ramp_fraction * total_steps)
    return min(1.0, math.sqrt(step * (1 - start ** 2) / ramp + start ** 2))


# --- data -------------------------------------------------------------------------------------


@dataclass
class TokenTurn:
    """A rollout step as token ids: the student's input and the teacher's answer with its span roles."""

    context: list[int]  # the prompt the agent sent
    answer: list[int]  # the completion and the end-of-turn token
    roles: list[int]  # REASON or ACT per answer token
    trajectory_steps: int  # length of the episode the turn comes from


def encode_turns(tokenizer, episodes, profile: PromptProfile, max_answer_tokens: int) -> tuple[list[TokenTurn], int]:
    """One `TokenTurn` per step of every rollout, and how many were cut to `max_answer_tokens`.

    A completion ends with EOS where it fits. One that does not is the teacher reaching its
    generation budget (it ran on after its action, or its thought was long): the turn keeps its
    first `max_answer_tokens` tokens and no EOS, what the teacher wrote and what a student
    generating with the same budget can write. Dropping such turns instead removed 55% of a
    WebShop teacher's turns, its longest ones (docs/distill.md)."""
    turns, cut = [], 0
    for episode in episodes:
        for example in encode_episode(tokenizer, episode, profile, layout="mdlm"):
            answer = example.ids[example.answer_start:] + [tokenizer.eos_token_id]
            roles = example.roles[example.answer_start:] + [ACT]
            if len(answer) > max_answer_tokens:
                answer, roles = answer[:max_answer_tokens], roles[:max_answer_tokens]
                cut += 1
            turns.append(TokenTurn(example.ids[:example.answer_start][-profile.max_prompt_tokens:], answer, roles,
                              len(episode.steps)))
    return turns, cut


def collate_turns(sequences: list[tuple[list[int], list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Left-padded (B, T) batch of (context, answer, answer roles) (`lmgym.training.lm.collate`):
    input_ids, attention_mask, and the masks of the *predicted* tokens aligned with
    logits[:, :-1] (B, T - 1): answer, reason, act."""
    batch = lm_collate([Example(context + answer, [CONTEXT] * len(context) + roles, len(context))
                        for context, answer, roles in sequences], pad_id)
    predicted = batch["roles"][:, 1:]
    return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"],
            "answer": batch["answer_mask"][:, 1:], "reason": predicted == REASON, "act": predicted == ACT}


def completion_window(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch's masks cut to the last K predicted positions, K the longest completion, and
    ``targets`` (B, K), the tokens predicted there. Left padding ends every row with its
    completion, so those K positions hold every trained token: a model asked for only the last
    K + 1 positions' logits (``logits_to_keep``) gives exactly the rows the losses read."""
    width = int(batch["answer"].sum(dim=1).max())
    return {**batch, **{k: batch[k][:, -width:] for k in ("answer", "reason", "act")},
            "targets": batch["input_ids"][:, -width:]}


def teacher_precision(teacher, bf16: bool) -> torch.autocast:
    """The context of the teacher's forward passes: bfloat16 autocast when `bf16` (``--teacher-bf16``)."""
    return torch.autocast(teacher.device.type, dtype=torch.bfloat16, enabled=bf16)


@torch.no_grad()
def teacher_log_probs(teacher, turns: list[TokenTurn], pad_id: int, batch_size: int = 32, bf16: bool = False) -> list[torch.Tensor]:
    """The frozen teacher's next-token log-distribution at each turn's completion positions,
    one (len(answer), V) tensor per turn. The data are fixed, so kd and sad compute it once
    instead of a teacher forward pass per step (rkl cannot: it scores the student's samples)."""
    values = []
    for begin in range(0, len(turns), batch_size):
        batch = collate_turns([(t.context, t.answer, t.roles) for t in turns[begin:begin + batch_size]], pad_id)
        batch = completion_window({k: v.to(teacher.device) for k, v in batch.items()})
        with teacher_precision(teacher, bf16):
            logits = teacher(batch["input_ids"], attention_mask=batch["attention_mask"],
                             logits_to_keep=batch["answer"].shape[1] + 1).logits[:, :-1].float()
        log_probs = torch.log_softmax(logits, dim=-1)
        values += [row[mask].cpu() for row, mask in zip(log_probs, batch["answer"])]
    return values


def fingerprint(teacher, turns: list[TokenTurn], bf16: bool = False) -> str:
    """sha256 of the teacher's weights, its precision and the turns' tokens: what the cached distributions depend on."""
    digest = hashlib.sha256(b"bf16" if bf16 else b"")
    for name, tensor in sorted(teacher.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    digest.update(json.dumps([(t.context, t.answer) for t in turns]).encode())
    return digest.hexdigest()


def cached_teacher_log_probs(teacher, turns: list[TokenTurn], pad_id: int, folder: str | Path | None,
                             bf16: bool = False) -> list[torch.Tensor]:
    """`teacher_log_probs`, read from `folder` when it holds them for this teacher, precision and
    turns (same fingerprint), else computed and written there atomically; no folder: computed."""
    if folder is None:
        return teacher_log_probs(teacher, turns, pad_id, bf16=bf16)
    path, key = Path(folder) / "log_probs.safetensors", fingerprint(teacher, turns, bf16)
    if path.exists():
        with safetensors.safe_open(str(path), framework="pt") as saved:
            if saved.metadata().get("fingerprint") == key:
                lengths = saved.get_tensor("lengths").tolist()
                return list(torch.split(saved.get_tensor("log_probs"), lengths))
    values = teacher_log_probs(teacher, turns, pad_id, bf16=bf16)
    with atomic_folder(folder) as tmp:
        safetensors.torch.save_file({"log_probs": torch.cat(values), "lengths": torch.tensor([len(v) for v in values])},
                                    str(tmp / path.name), metadata={"fingerprint": key})
    return values


def mean_entropy(log_probs: torch.Tensor) -> float:
    """Mean next-token entropy (nats) of a (T, V) log-distribution: the teacher's uncertainty on a turn."""
    return float(-(log_probs.exp() * log_probs).sum(dim=-1).mean())


def at_completion(cached: list[torch.Tensor], answer_mask: torch.Tensor) -> torch.Tensor:
    """(B, T-1, V) teacher log-probs for a batch: each turn's cached rows at its completion
    positions (`answer_mask`, row-major order: the order they were cached in), zero elsewhere
    (no loss reads those positions)."""
    full = torch.zeros(*answer_mask.shape, cached[0].shape[-1], device=answer_mask.device)
    full[answer_mask] = torch.cat(cached).to(answer_mask.device)
    return full


@torch.no_grad()
def student_samples(student, turns: list[TokenTurn], pad_id: int, eos_id: int, max_new_tokens: int,
                    generator: torch.Generator) -> list[tuple[list[int], list[int], list[int]]]:
    """(context, sampled completion, roles) per turn: the student's own turn at temperature 1
    (its roles unknown, so all ACT: rkl trains every sampled token alike)."""
    batch = collate_turns([(t.context, [], []) for t in turns], pad_id)
    was_training = student.training
    student.eval()
    output = generate(student, batch["input_ids"].to(student.device), batch["attention_mask"].to(student.device),
                      max_new_tokens=max_new_tokens, temperature=1.0, eos_token_id=eos_id, generator=generator)
    student.train(was_training)
    sampled = []
    for row, turn in enumerate(turns):
        tokens = output.tokens[row, :output.lengths[row]].tolist()
        sampled.append((turn.context, tokens, [ACT] * len(tokens)))
    return sampled


# --- the trainer ------------------------------------------------------------------------------


def student_size(cfg: DistillConfig, max_positions: int) -> TinyConfig:
    return TinyConfig(hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, num_heads=cfg.num_heads,
                      num_kv_heads=max(1, cfg.num_heads // 2), intermediate_size=3 * cfg.hidden_size,
                      max_positions=max_positions)


def check(cfg: DistillConfig) -> None:
    folder = zoo.resolve(cfg.teacher) if cfg.teacher else None
    if folder is None or not ((folder / "config.json").is_file() or is_lora_checkpoint(folder)):
        raise InputError(f"--teacher {cfg.teacher!r} is not a model folder, LoRA adapter folder or zoo name")
    if not cfg.data:
        raise InputError("no --data rollout files given")
    for path in cfg.data:
        if not Path(path).is_file():
            raise InputError(f"--data {path}: no such file")
    if cfg.hidden_size % cfg.num_heads or (cfg.hidden_size // cfg.num_heads) % 2:
        raise InputError(f"--hidden-size {cfg.hidden_size} / --num-heads {cfg.num_heads} must be an even head width (rotary)")
    if cfg.method != "sad" and (cfg.spans != "both" or not cfg.projection or not cfg.curriculum):
        # silently ignoring them would mislabel a run
        raise InputError(f"--spans, --no-projection and --no-curriculum are options of --method sad, not {cfg.method}")


class TeacherData(NamedTuple):
    model: torch.nn.Module  # the frozen teacher
    tokenizer: PreTrainedTokenizerBase  # the teacher's, and so the student's
    prompt: dict  # the teacher's react_prompt (its meta): the student is prompted the same way
    max_answer: int
    turns: list[TokenTurn]
    cut: int  # turns cut to max_answer (the teacher reached its budget)
    panels: list[dict]  # what the student learns from: the teacher's training panels and the data's


def load_teacher(cfg: DistillConfig) -> TeacherData:
    """The frozen teacher and the data encoded as its turns (one-line errors for bad input)."""
    teacher, tokenizer, teacher_meta = load_checkpoint(cfg.teacher, device=cfg.device, dtype=torch.float32)
    teacher.requires_grad_(False)  # loaded in eval mode; nothing else holds it, so no copy is needed
    prompt = teacher_meta.get("react_prompt")
    if not prompt:
        raise InputError(f"--teacher {cfg.teacher}: its meta has no react_prompt (train it on rollouts with lmgym.training.lm)")
    max_answer = cfg.max_answer_tokens or int(prompt.get("max_new_tokens") or teacher_meta["max_answer_tokens"])
    records, episodes = load_data(cfg.data)
    if records or not episodes:
        raise InputError("--data must hold rollouts (Episode rows) of the teacher, not records")
    turns, cut = encode_turns(tokenizer, episodes, PromptProfile.from_meta(prompt), max_answer)
    if not turns:
        raise InputError("--data holds no teacher turn (its episodes have no steps)")
    return TeacherData(teacher, tokenizer, prompt, max_answer, turns, cut,
                       [*inherited_panels(cfg.teacher), *train_panels(episodes)])


def write_teacher_cache(cfg: DistillConfig) -> None:
    """Fill `cfg.teacher_cache` once, before students that share it train in parallel."""
    torch.set_num_threads(cfg.threads)
    data = load_teacher(cfg)
    cached_teacher_log_probs(data.model, data.turns, data.tokenizer.pad_token_id, cfg.teacher_cache, cfg.teacher_bf16)


def train(cfg: DistillConfig) -> dict[str, float]:
    """Run (or resume) distillation; returns the last logged metrics."""
    check(cfg)
    torch.set_num_threads(cfg.threads)
    teacher, tokenizer, prompt, max_answer, turns, cut, panels = load_teacher(cfg)
    profile = PromptProfile.from_meta(prompt)
    pad_id, eos_id = tokenizer.pad_token_id, tokenizer.eos_token_id
    if resumed := resume_from(cfg):
        student = load_checkpoint(resumed, device=cfg.device, dtype=torch.float32, trainable=True)[0]
    else:
        size = student_size(cfg, positions_for(profile.max_prompt_tokens, max_answer))
        student = build_model(llama_config(len(tokenizer), size, bidirectional=False, tokenizer=tokenizer), cfg.seed)
        student = student.to(teacher.device)
    student.train()

    # --- the teacher's distributions on the fixed data, and the curriculum (easy to hard) ---
    use_curriculum = cfg.method == "sad" and cfg.curriculum
    cached = (cached_teacher_log_probs(teacher, turns, pad_id, cfg.teacher_cache, cfg.teacher_bf16)
              if cfg.method in ("kd", "sad") else [])
    order = list(range(len(turns)))
    if use_curriculum:
        scores = difficulty_scores([t.trajectory_steps for t in turns], [mean_entropy(c) for c in cached])
        order.sort(key=lambda i: (scores[i], i))
    spans = cfg.spans if cfg.method == "sad" else "both"
    project = cfg.method == "sad" and cfg.projection and spans == "both"
    params = [p for p in student.parameters() if p.requires_grad]
    meta = {"kind": "ar", "mask_token_id": None, "base_model": None, "train_config": asdict(cfg),
            "teacher": str(cfg.teacher), "teacher_parameters": sum(p.numel() for p in teacher.parameters()),
            "parameters": sum(p.numel() for p in student.parameters()), "turns": len(turns),
            "cut_at_budget": cut, "max_prompt_tokens": profile.max_prompt_tokens,
            "max_answer_tokens": max_answer, "react_prompt": prompt, TRAIN_PANELS: panels}
    conflicts = {"steps": 0, "conflicted": 0}  # of this attempt, for train/conflict_rate

    def step(k: int, generator: torch.Generator) -> dict[str, float]:
        level = competence(k, cfg.steps, cfg.curriculum_start, cfg.curriculum_steps) if use_curriculum else 1.0
        pool = max(cfg.batch_size, math.ceil(level * len(order)))
        picked = [order[i] for i in torch.randint(min(pool, len(order)), (cfg.batch_size,), generator=generator).tolist()]
        chosen = [turns[i] for i in picked]
        if cfg.method == "rkl":
            sequences = student_samples(student, chosen, pad_id, eos_id, max_answer, generator)
        else:
            sequences = [(t.context, t.answer, t.roles) for t in chosen]
        batch = completion_window({key: value.to(student.device) for key, value in collate_turns(sequences, pad_id).items()})
        # logits only where a completion token is predicted: over the whole prompt the vocabulary
        # projection and the losses' softmaxes would dominate a tiny model's step
        keep = batch["answer"].shape[1] + 1
        logits = student(batch["input_ids"], attention_mask=batch["attention_mask"], logits_to_keep=keep).logits[:, :-1]  # (B, K, V)
        if cfg.method == "rkl":
            with torch.no_grad(), teacher_precision(teacher, cfg.teacher_bf16):
                teacher_logits = teacher(batch["input_ids"], attention_mask=batch["attention_mask"], logits_to_keep=keep).logits[:, :-1]
        elif cfg.method != "seqkd":
            teacher_logits = at_completion([cached[i] for i in picked], batch["answer"])
        values = {"train/tokens": int(batch["answer"].sum()), "train/competence": level}
        if cfg.method == "seqkd":
            loss = sequence_kd_loss(logits, batch["targets"], batch["answer"])
        elif cfg.method == "kd":
            loss = forward_kl(logits, teacher_logits, batch["answer"])
        elif cfg.method == "rkl":
            loss = reverse_kl(logits, teacher_logits, batch["answer"])
        else:
            loss_reason = forward_kl(logits, teacher_logits, batch["reason"])
            loss_act = forward_kl(logits, teacher_logits, batch["act"])
            values |= {"train/loss_reason": loss_reason.item(), "train/loss_act": loss_act.item()}
            loss = {"both": loss_reason + loss_act, "reason": loss_reason, "act": loss_act}[spans]
        if project:
            g_reason = torch.autograd.grad(loss_reason, params, retain_graph=True, allow_unused=True)
            g_act = torch.autograd.grad(loss_act, params, allow_unused=True)
            flat = [torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(grads, params)])
                    for grads in (g_reason, g_act)]
            combined, conflicted = project_conflicting(*flat)
            conflicts["steps"] += 1
            conflicts["conflicted"] += conflicted
            values["train/conflict_rate"] = conflicts["conflicted"] / conflicts["steps"]
            offset = 0
            for p in params:
                p.grad = combined[offset:offset + p.numel()].view_as(p).clone()
                offset += p.numel()
        else:
            loss.backward()
        return {"train/loss": loss.item(), **values}

    return run_loop(cfg, params, step, partial(save_checkpoint, model=student, tokenizer=tokenizer), meta,
                    name=f"distill {cfg.method}", totals=("train/tokens",))


def main(argv: list[str] | None = None) -> int:
    return cli(DistillConfig, train, argv, "distill", __doc__)


if __name__ == "__main__":
    raise SystemExit(main())
