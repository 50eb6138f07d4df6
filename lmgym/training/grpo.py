"""Multi-turn RL for language-model agents: GRPO, RLOO or GiGPO advantages, PPO-clip updates.

``lmgym train grpo --model react/alfworld-teacher-ar --env lmgym/ALFWorld-Gen-v0 --out runs/grpo``
(one readable file in the CleanRL manner on the shared loop, `lmgym.training.loop`). A policy is
any causal LM lmgym loads (a zoo name, a local Hugging Face folder, ``smollm2``), trained in full
or through LoRA adapters (``--lora-r``). Every iteration:

1. Rollouts. ``--tasks`` tasks of the env's *train* split (``gym.make(env, split="train")``,
   env seeds drawn from (seed, iteration)), each played ``--group`` times: the same env seed
   replays the same task, the agent's sampling stream differs. The policy plays as the `lm`
   agent (`lmgym.agents.lm.LMAgent`, batched: ``--rollout-batch`` episodes in lockstep), so it
   is trained on exactly the prompts it will see at evaluation; each turn keeps its token ids
   and state key (`lmgym.training.agent_rollouts`). ``--sampler hf`` samples from the live
   torch weights; ``--sampler llamacpp`` from llama.cpp after a GGUF export of the current
   weights (`lmgym.models.export.write_gguf`, ``OUT/sampler.gguf``).
2. Advantages, one per turn (`advantages`), by ``--estimator``:

   * ``grpo``: the group-normalised episode return, ``A_i = (R_i - mean(R)) / (std(R) + eps)``
     over the G episodes of a task (DeepSeekMath, Shao et al. 2024, arXiv:2402.03300, Sec.
     4.1.2 "outcome supervision"; TRL's ``GRPOTrainer`` with ``scale_rewards="group"``);
     ``--no-scale-rewards``: without the division (Dr. GRPO, Liu et al. 2025, arXiv:2503.20783).
   * ``rloo``: the leave-one-out baseline, ``A_i = R_i - mean_{j != i} R_j`` (Kool et al. 2019,
     "Buy 4 REINFORCE samples, get a baseline for free!"; Ahmadian et al. 2024, arXiv:2402.14740,
     Eq. 4; TRL's ``RLOOTrainer``).
   * ``gigpo``: Group-in-Group (Feng et al. 2025, arXiv:2505.10978): the episode-level
     advantage above (Eq. 3) plus ``--step-weight`` (omega, Eq. 7) times a step-level one:
     turns of a task's G episodes that acted in the same env state (equal
     ``env.unwrapped.state_key()``, the "anchor states" of Eq. 4: here the env's true state,
     not the observation text verl-agent matches) form a group, and each turn's discounted
     return ``R_t = sum_k gamma^k r_{t+k}`` (Eq. 5) is normalised within its group (Eq. 6).

   ``R_i`` is the episode's discounted return ``sum_t gamma^t r_t`` (``--gamma``, 1: the sum of
   the turn rewards; envs with turn rewards give partial credit, the rest reward the end).
3. ``--ppo-epochs`` optimiser steps on the batch (each a loop step): the PPO clipped surrogate
   on the per-token ratio ``r = pi_theta / pi_old`` (Schulman et al. 2017, arXiv:1707.06347,
   Eq. 7), ``-min(r A, clip(r, 1 - eps, 1 + eps) A)`` (`ppo_clip_loss`), on the tokens the model
   wrote only (prompts, observations and tool output are context), averaged per turn then over
   turns (TRL's ``loss_type="grpo"``; ``--aggregation token``: over all tokens, TRL's ``bnpo``);
   optionally ``+ --kl-coef * KL`` to the frozen starting policy with the k3 estimator
   ``exp(q - p) - (q - p) - 1`` (Schulman 2020, "Approximating KL divergence"; DeepSeekMath
   Eq. 4). pi_old is the policy that sampled, scored by the trainer before the first epoch.
   When the sampler is another engine (llama.cpp), each token's loss is weighted by the
   truncated importance weight ``min(pi_old / pi_sampler, C)`` (``--tis-cap``; Yao et al. 2025,
   "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training", and verl's TIS)
   and the mismatch ``mean |log pi_old - log pi_sampler|`` is logged.

Distributed: under ``accelerate launch`` (or torchrun), rank r plays tasks r, r + W, ... of
each batch and the gradients are summed over ranks before the optimiser step (normalised by
the whole batch's turns and tokens), so every rank keeps identical weights equal to one
process's on the same batch (checked at the end: `assert_ranks_agree`). Rank 0 writes the
checkpoint, which every rank resumes from; rank r > 0 logs its metrics to ``OUT/rank<r>``.
Data parallel (``accelerate launch --multi_gpu``): every rank holds the whole model and the
gradients are all-reduced. FSDP (``accelerate launch --use_fsdp --fsdp_version 2``): the trained
model's parameters, gradients and AdamW state are sharded over the ranks (`shard`: torch's
``fully_shard``, as accelerate's FSDP plugin configures it; gradients reduce-scattered as a sum),
and each rank keeps a full copy of the weights for its rollouts, pi_old, evaluation and the
checkpoint, gathered from the shards at every iteration and save (`gather_full`), as RL
trainers gather FSDP shards for their rollout engine (verl's FSDP-to-vLLM weight sync). Every
rank runs as many forward/backward passes as the busiest one (FSDP's collectives must match).
An FSDP run saves no optimiser state, so it does not resume (start a new ``--out`` from
``--model OUT/checkpoint``).

Outputs in ``--out``: ``checkpoint/`` (loadable as ``LMAgent(model=OUT/checkpoint)``, with the
tasks played in ``train_panels``) and ``metrics.jsonl``: the loop's keys and ``train/reward``
(mean episode return), ``train/success``, ``train/episode_turns``, ``train/kl``,
``train/entropy``, ``train/clip_fraction``, ``train/ratio``, ``train/logprob_mismatch``,
``train/step_groups`` (gigpo: turns per anchor state), ``time/env_steps`` (so far, with its
rate), and every ``--eval-every`` iterations ``eval/success`` and ``eval/return`` on
``--eval-episodes`` seeds of the ``--eval-split`` split (greedy, the same ``--max-turns``).
"""

from __future__ import annotations

import copy
import os
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

import gymnasium as gym
import torch

import lmgym  # noqa: F401  (registers the envs)
from lmgym.agents.lm import LMAgent
from lmgym.agents.runner import run_episodes
from lmgym.errors import InputError
from lmgym.io import append_jsonl
from lmgym.models.backends.hf import HFBackend
from lmgym.models.checkpoints import TRAIN_PANELS, inherited_panels, load_checkpoint, read_meta, save_checkpoint
from lmgym.rollouts import Episode
from lmgym.training.agent_rollouts import PlayedEpisode, episode_seed, play_groups, play_groups_on_ray
from lmgym.training.loop import LoopConfig, cli, resume_from, run_loop
from lmgym.training.lora import add_lora, train_adapter
from lmgym.training.objectives import frozen_copy
from lmgym.training.transcripts import train_panels


@dataclass
class GRPOConfig(LoopConfig):
    # the loop's options (lmgym.training.loop.LoopConfig); here a step is one PPO epoch
    out: str = "runs/grpo"
    steps: int = 100
    """optimizer steps: iterations x --ppo-epochs"""
    lr: float = 1e-5
    warmup: int = 0
    lr_floor: float = 1.0
    weight_decay: float = 0.0
    log_every: int = 1
    model: str = "smollm2"
    """the starting policy: a zoo name, a local causal-LM folder or 'smollm2'; also the KL reference"""
    env: str = "lmgym/KeyDoor-v0"
    """env id, played on its train split"""
    estimator: Literal["grpo", "rloo", "gigpo"] = "grpo"
    """advantages: grpo (group-normalised return), rloo (leave-one-out), gigpo (episode + anchor-state step groups)"""
    group: int = 8
    """episodes per task (G)"""
    tasks: int = 4
    """tasks per iteration"""
    gamma: float = 1.0
    """discount of the turn rewards (returns R = sum_t gamma^t r_t; gigpo's step returns)"""
    step_weight: float = 1.0
    """gigpo: omega, the weight of the step-level advantage"""
    scale_rewards: bool = True
    """grpo/gigpo: divide by the group's standard deviation"""
    ppo_epochs: int = 2
    """optimizer steps per batch of rollouts"""
    clip_eps: float = 0.2
    """PPO clip range epsilon"""
    kl_coef: float = 0.0
    """weight of the k3 KL to the starting policy (0: no reference model)"""
    aggregation: Literal["turn", "token"] = "turn"
    """loss mean per turn then over turns (TRL grpo), or over every token (TRL bnpo)"""
    temperature: float = 1.0
    """sampling temperature (the policy's logits are divided by it in the loss too, as TRL does)"""
    max_turns: int | None = None
    """cap on turns per training episode (None: the env's time limit)"""
    max_new_tokens: int | None = None
    """tokens per turn (None: as the agent decides)"""
    rollout_batch: int = 8
    """episodes played at once"""
    micro_batch: int = 4
    """turns per forward/backward pass (gradient accumulation; SmolLM2 LoRA on HotPotQA-Gen: 16 turns
    a pass grew past 23 GB, 4 peaked at 7.8 GB)"""
    sampler: Literal["hf", "llamacpp"] = "hf"
    """rollouts from the live torch weights (hf) or from llama.cpp after a GGUF export"""
    tis_cap: float = 2.0
    """truncated importance sampling cap C on pi_old / pi_sampler (llamacpp sampler)"""
    rollout_workers: int = 0
    """play the rollouts on this many Ray workers (the ray extra; needs --sampler llamacpp: each loads the
    iteration's GGUF); 0: in this process"""
    lora_r: int = 0
    """LoRA rank (0: train every weight)"""
    lora_alpha: int = 16
    """LoRA scale numerator"""
    eval_every: int = 0
    """iterations between evaluations (0: none)"""
    eval_episodes: int = 20
    """evaluation seeds 0..N-1 of --eval-split, greedy, at most --max-turns turns"""
    eval_split: str = "dev"
    """the split evaluated on"""
    device: str | None = None
    """cpu or cuda (default: cuda when present)"""


# --- advantages -------------------------------------------------------------------------------


def grpo_advantages(returns: torch.Tensor, scale: bool = True, eps: float = 1e-4) -> torch.Tensor:
    """(groups, G) returns -> GRPO advantages ``(R - mean) / (std + eps)`` per group (unbiased
    std and eps as TRL's GRPOTrainer; a group of one has advantage 0)."""
    centred = returns - returns.mean(dim=1, keepdim=True)
    if not scale:
        return centred
    std = returns.std(dim=1, keepdim=True) if returns.shape[1] > 1 else torch.zeros_like(centred)
    return centred / (std + eps)


def rloo_advantages(returns: torch.Tensor) -> torch.Tensor:
    """(groups, G) returns -> ``R_i - mean_{j != i} R_j`` (0 for a group of one)."""
    g = returns.shape[1]
    if g == 1:
        return torch.zeros_like(returns)
    return returns - (returns.sum(dim=1, keepdim=True) - returns) / (g - 1)


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """``R_t = r_t + gamma R_{t+1}`` for every turn t (GiGPO Eq. 5)."""
    out, running = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def step_groups(keys: Sequence[Hashable]) -> list[int]:
    """Group index per turn: turns with equal keys (task, state key) share one, in first-seen order."""
    index: dict[Hashable, int] = {}
    return [index.setdefault(key, len(index)) for key in keys]


def normalised_in_groups(values: torch.Tensor, groups: Sequence[int], scale: bool, eps: float = 1e-6) -> torch.Tensor:
    """Each value minus its group's mean, divided by the group's std + eps (unbiased; a group of
    one: std 1, so its value is 0): verl-agent's step-level normalisation."""
    out = torch.zeros_like(values)
    members: dict[int, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        members[g].append(i)
    for rows in members.values():
        chunk = values[rows]
        std = chunk.std() if len(rows) > 1 else torch.tensor(1.0)
        out[rows] = (chunk - chunk.mean()) / (std + eps) if scale else chunk - chunk.mean()
    return out


def group_returns(played: list[PlayedEpisode], group: int, gamma: float = 1.0) -> torch.Tensor:
    """(tasks, group): each episode's discounted return; `played` in (task, sample) order."""
    return torch.tensor([discounted_returns(p.rewards, gamma)[0] if p.rewards else 0.0 for p in played],
                        dtype=torch.float64).view(-1, group)


def flat_groups(returns: torch.Tensor) -> int:
    """The groups (rows of `group_returns`) whose episodes all earned the same return: every
    episode-level advantage of theirs is 0, so they teach GRPO and RLOO nothing (GiGPO's step
    groups may still differ)."""
    return int((returns.max(dim=1).values == returns.min(dim=1).values).sum())


def advantages(played: list[PlayedEpisode], group: int, estimator: str, *, gamma: float = 1.0,
               step_weight: float = 1.0, scale: bool = True) -> list[list[float]]:
    """One advantage per turn of each episode; `played` in (task, sample) order, `group` per task."""
    returns = group_returns(played, group, gamma)
    if estimator == "rloo":
        episode = rloo_advantages(returns)
    elif estimator in ("grpo", "gigpo"):
        episode = grpo_advantages(returns, scale)
    else:
        raise InputError(f"estimator must be grpo, rloo or gigpo, got {estimator!r}")
    per_turn = [[float(episode.flatten()[i])] * len(p.turns) for i, p in enumerate(played)]
    if estimator != "gigpo":
        return per_turn
    keys, step_returns, where = [], [], []
    for i, p in enumerate(played):
        for t, (turn, value) in enumerate(zip(p.turns, discounted_returns(p.rewards, gamma))):
            if not turn.state_key:
                raise InputError(f"gigpo groups turns by env.unwrapped.state_key(); {p.episode.env_id} has none")
            keys.append((p.task_index, turn.state_key))
            step_returns.append(value)
            where.append((i, t))
    step = normalised_in_groups(torch.tensor(step_returns, dtype=torch.float64), step_groups(keys), scale)
    for (i, t), value in zip(where, step.tolist()):
        per_turn[i][t] += step_weight * value
    return per_turn


# --- the loss ---------------------------------------------------------------------------------


def ppo_clip_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                  clip_eps: float, *, ref_logprobs: torch.Tensor | None = None, kl_coef: float = 0.0,
                  is_weights: torch.Tensor | None = None, aggregation: str = "turn",
                  n_sequences: float | None = None, n_tokens: float | None = None) -> tuple[torch.Tensor, dict]:
    """PPO-clip on per-token ratios (B, T), advantages (B,) or (B, T), `mask` 1 on written tokens.

    Per token: ``-min(r A, clip(r, 1-eps, 1+eps) A)`` times the importance weight `is_weights`
    (TIS, detached), plus ``kl_coef * k3(ref, logprobs)``. ``aggregation="turn"``: each row's
    mean over its tokens, summed over rows and divided by `n_sequences` (default B);
    ``"token"``: summed over tokens and divided by `n_tokens` (default the mask's sum). Given
    the whole batch's counts, micro-batches' losses add up to the batch's (gradient accumulation,
    and the sum over ranks). Returns (loss, sums): per-token sums of ``kl`` and ``clipped``.
    """
    mask = mask.float()
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    ratio = torch.exp(logprobs - old_logprobs)
    clipped_ratio = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
    per_token = -torch.min(ratio * advantages, clipped_ratio * advantages)
    if is_weights is not None:
        per_token = per_token * is_weights.detach()
    sums = {"clipped": (((ratio < 1 - clip_eps) & (advantages < 0)) | ((ratio > 1 + clip_eps) & (advantages > 0))).float().mul(mask).sum().item(),
            "ratio": (ratio.detach() * mask).sum().item(), "kl": 0.0}
    if ref_logprobs is not None and kl_coef:
        delta = ref_logprobs - logprobs
        kl = torch.exp(delta) - delta - 1
        per_token = per_token + kl_coef * kl
        sums["kl"] = (kl.detach() * mask).sum().item()
    if aggregation == "turn":
        per_row = (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        loss = per_row.sum() / (n_sequences if n_sequences is not None else per_row.shape[0])
    elif aggregation == "token":
        loss = (per_token * mask).sum() / (n_tokens if n_tokens is not None else mask.sum().clamp(min=1.0))
    else:
        raise InputError(f"aggregation must be turn or token, got {aggregation!r}")
    return loss, sums


def completion_logprobs(model, input_ids: torch.Tensor, attention: torch.Tensor, temperature: float, keep: int
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi(x_t | x_<t) of each row's last `keep` tokens under logits / temperature, and the
    entropy of each of those next-token distributions: both (B, keep). The vocabulary projection
    runs on those positions only (``logits_to_keep``): on a 49k-token vocabulary the full (B, T, V)
    logits of a 16-turn micro-batch took most of 24 GiB."""
    logits = model(input_ids, attention_mask=attention, logits_to_keep=keep + 1).logits[:, :-1].float() / temperature
    logp = torch.log_softmax(logits, dim=-1)  # (B, keep, V)
    taken = logp.gather(-1, input_ids[:, -keep:].unsqueeze(-1)).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(dim=-1)
    return taken, entropy


@dataclass
class Sample:
    """One turn to train on: its ids, where the written ids start, its advantage, and the old
    and sampler log-probs of the written ids."""

    ids: list[int]
    start: int
    advantage: float
    old: torch.Tensor | None = None
    sampler: list[float] | None = None


def collate(samples: Sequence[Sample], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Left-padded ids (B, T), attention (B, T), and the mask (B, K) of the written tokens among
    each row's last K tokens, K the longest completion: left padding ends every row with its
    completion, so only those positions need logits (`completion_logprobs`; RoPE scores depend on
    relative positions, so the padding shifts nothing)."""
    width = max(len(s.ids) for s in samples)
    keep = max(len(s.ids) - s.start for s in samples)
    ids = torch.full((len(samples), width), pad, dtype=torch.long)
    attention = torch.zeros_like(ids)
    written = torch.zeros((len(samples), keep), dtype=torch.bool)
    for row, sample in enumerate(samples):
        ids[row, width - len(sample.ids):] = torch.tensor(sample.ids)
        attention[row, width - len(sample.ids):] = 1
        written[row, keep - (len(sample.ids) - sample.start):] = True
    return ids, attention, written


def padded(rows: Sequence[Sequence[float] | torch.Tensor], written: torch.Tensor) -> torch.Tensor:
    """Per-sample values of the written tokens placed where `written` is True (0 elsewhere)."""
    out = torch.zeros(written.shape, dtype=torch.float32)
    for row, values in enumerate(rows):
        out[row, written[row]] = torch.as_tensor(values, dtype=torch.float32)
    return out


# --- distributed ------------------------------------------------------------------------------


def process_group() -> tuple[int, int, str | None]:
    """(rank, world size, device): under ``accelerate launch``/torchrun (``WORLD_SIZE`` > 1) the
    process group is started through accelerate's `accelerate.PartialState`: NCCL and this rank's GPU
    where there are GPUs, else gloo on the CPU; one process: (0, 1, None)."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1, None
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available())
    return state.process_index, state.num_processes, str(state.device)


def assert_ranks_agree(params: Sequence[torch.nn.Parameter], world: int) -> None:
    """Raise unless every rank holds bit-identical parameters (a digest of their bytes, gathered)."""
    if world == 1:
        return
    import hashlib

    digest = hashlib.sha256()
    for p in params:
        digest.update(p.detach().float().cpu().numpy().tobytes())
    mine = torch.tensor([int.from_bytes(digest.digest()[:7], "big")], dtype=torch.int64)
    every = [torch.zeros_like(mine) for _ in range(world)]
    torch.distributed.all_gather(every, mine)
    if len({int(t) for t in every}) != 1:
        raise RuntimeError("the ranks' parameters differ after training")


def all_reduce_sum(values: list[float], world: int) -> list[float]:
    if world == 1:
        return values
    tensor = torch.tensor(values, dtype=torch.float64)
    torch.distributed.all_reduce(tensor)
    return tensor.tolist()


def fsdp_requested() -> bool:
    """Launched with ``accelerate launch --use_fsdp`` (or a config with ``distributed_type: FSDP``),
    which sets ``ACCELERATE_USE_FSDP`` and the ``FSDP_*`` options in every rank's environment."""
    return os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"


def shard(model: torch.nn.Module, world: int, device: torch.device) -> int:
    """FSDP2: shard `model` in place over the `world` ranks with torch's ``fully_shard``, as
    accelerate's ``FullyShardedDataParallelPlugin`` reads the launch's ``FSDP_*`` options: its
    wrap policy (``--fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP``: one group per decoder layer,
    accelerate's own policy function), ``reshard_after_forward`` and CPU offload; the root
    module is the last group (tied embeddings stay in it). Gradients are reduce-scattered as a
    sum (divide factor 1, SUM collectives), like the data-parallel all-reduce: each rank's loss
    is normalised by the whole batch. Not ``Accelerator.prepare``: accelerate 1.15 never turns a CPU (gloo) run
    into FSDP (``AcceleratorState`` switches only GPU-like distributed types), and its FSDP2
    ``prepare`` wants the optimiser, which the shared loop builds. Returns the number of groups."""
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.fsdp_utils import fsdp2_prepare_auto_wrap_policy
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    # checked before the plugin is built: FSDP1's plugin raises on a machine without GPUs
    if os.environ.get("FSDP_VERSION", "1") != "2":
        raise InputError("FSDP here is FSDP2 (torch's fully_shard): launch with --fsdp_version 2 "
                         "(fsdp_version: 2 in the accelerate config)")
    plugin = FullyShardedDataParallelPlugin()
    plugin.set_auto_wrap_policy(model)
    wrap = fsdp2_prepare_auto_wrap_policy(plugin, model)
    options = {"mesh": init_device_mesh(device.type, (world,)), "reshard_after_forward": plugin.reshard_after_forward,
               "offload_policy": plugin.cpu_offload}
    for module in reversed(list(model.modules())[1:]):  # children before their parents
        if wrap is not None and wrap(module):
            fully_shard(module, **options)
    fully_shard(model, **options)
    groups = [module for module in model.modules() if isinstance(module, FSDPModule)]
    for module in groups:
        module.set_gradient_divide_factor(1.0)
        module.set_force_sum_reduction_for_comms(True)  # a plain SUM: gloo has no PREMUL_SUM
    return len(groups)


def gather_full(sharded: torch.nn.Module, full: torch.nn.Module) -> None:
    """Copy the FSDP-sharded module's parameters, all-gathered, into its unsharded twin (a
    collective: every rank calls it at the same point)."""
    twins = dict(full.named_parameters())
    with torch.no_grad():
        for name, p in sharded.named_parameters():
            twins[name].copy_(p.full_tensor())


# --- the trainer ------------------------------------------------------------------------------


def train(cfg: GRPOConfig) -> dict[str, float]:
    """Run (or resume) RL on the env; returns the last logged metrics."""
    if cfg.steps % cfg.ppo_epochs or cfg.save_every % cfg.ppo_epochs:
        raise InputError(f"--steps and --save-every must be multiples of --ppo-epochs ({cfg.ppo_epochs}): "
                         "a batch's epochs run between two checkpoints")
    if cfg.group < 2:
        raise InputError("--group must be at least 2: the advantages compare a task's episodes")
    if cfg.rollout_workers and cfg.sampler != "llamacpp":
        raise InputError("--rollout-workers needs --sampler llamacpp: workers load the iteration's GGUF export, "
                         "not the live torch weights")
    if cfg.env not in gym.registry:
        raise InputError(f"unknown env {cfg.env!r} (lmgym list shows the ids)")
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    rank, world, rank_device = process_group()
    fsdp = world > 1 and fsdp_requested()
    # rank 0 saves OUT/checkpoint; every rank resumes from it; rank r > 0 logs to OUT/rank<r>
    folder = "checkpoint" if rank == 0 else "../checkpoint"
    if rank:
        cfg = GRPOConfig(**{**asdict(cfg), "out": str(Path(cfg.out) / f"rank{rank}")})
    device = cfg.device or rank_device

    # --- the policy, its reference, and the backend that samples from the live weights ---
    resumed = resume_from(cfg, folder)
    if resumed and fsdp:
        raise InputError(f"an FSDP run does not resume (its checkpoint holds no optimizer state): start a new --out "
                         f"from --model {resumed.resolve()}, or pass --no-resume")
    try:
        sampler = HFBackend(cfg.model, device=device, dtype=torch.float32, cache_sessions=True)
    except (FileNotFoundError, OSError) as error:
        raise InputError(f"cannot load model {cfg.model!r}: {error}") from None
    adapter_start = hasattr(sampler.model, "peft_config")  # a LoRA checkpoint, e.g. a ladder SFT model
    if adapter_start and cfg.lora_r:
        raise InputError(f"{cfg.model} is a LoRA adapter: the run trains that adapter, so leave out --lora-r")
    if resumed:
        model, _, _ = load_checkpoint(resumed, device=str(sampler.device), dtype=torch.float32, trainable=True)
    elif adapter_start:  # the sampler loaded it for inference: its adapter becomes the trained weights
        model = train_adapter(sampler.model)
    else:
        model = add_lora(sampler.model, r=cfg.lora_r, alpha=cfg.lora_alpha) if cfg.lora_r else sampler.model
    reference = frozen_copy(sampler.model if not resumed else HFBackend(cfg.model, device=device, dtype=torch.float32).model) \
        if cfg.kl_coef else None
    sampler.model = model.eval()  # generation reads the weights the optimiser updates
    policy = model  # the whole weights: rollouts, pi_old, evaluation, the checkpoint
    distributed = {"strategy": "fsdp" if fsdp else "ddp" if world > 1 else "none", "processes": world}
    if fsdp:  # the optimiser updates shards; the sampler reads their gather (`gather_full`)
        policy = copy.deepcopy(model)
        sampler.model = policy
        distributed["fsdp_groups"] = shard(model, world, sampler.device)
    tokenizer = sampler.tokenizer
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    params = [p for p in model.parameters() if p.requires_grad]
    meta = {**read_meta(cfg.model), "grpo_config": asdict(cfg), "kind": "ar"}
    # an adapter's base: the starting model under --lora-r, the start's own base when it is an adapter
    meta["base_model"] = str(cfg.model) if cfg.lora_r else meta.get("base_model") if adapter_start else None
    meta["distributed"] = distributed
    # what the weights saw before this run: a resumed run's record, else the starting model's
    earlier_panels = list(read_meta(resumed).get(TRAIN_PANELS) or []) if resumed else inherited_panels(cfg.model)
    meta[TRAIN_PANELS] = earlier_panels
    tasks_played: list[Episode] = []  # the first episode of each group, cut to its first step (its task id)

    env_kwargs = {"split": "train"}
    envs = [gym.make(cfg.env, **env_kwargs) for _ in range(cfg.rollout_batch)]
    agent_kwargs = {"temperature": cfg.temperature, "batch_size": cfg.rollout_batch,
                    "max_new_tokens": cfg.max_new_tokens}
    batch: dict[str, object] = {}

    def export_gguf() -> Path:
        from lmgym.models.export import write_gguf

        Path(cfg.out).mkdir(parents=True, exist_ok=True)
        return write_gguf(policy, tokenizer, Path(cfg.out) / "sampler.gguf", dtype="f32")  # this iteration's weights

    def rollout_backend():
        if cfg.sampler == "hf":
            return sampler
        from lmgym.models.backends.llamacpp import LlamaCppBackend

        return LlamaCppBackend(export_gguf(), max_sequences=cfg.rollout_batch)

    def collect(iteration: int, generator: torch.Generator) -> dict[str, float]:
        """Step 1-2: play the iteration's groups, compute advantages and pi_old."""
        task_seeds = torch.randint(2**31 - 1, (cfg.tasks,), generator=generator).tolist()
        mine = list(range(rank, cfg.tasks, world))
        agent_seeds = [[episode_seed(cfg.seed, iteration, t, g) for g in range(cfg.group)] for t in mine]
        if cfg.rollout_workers:
            played = play_groups_on_ray(cfg.rollout_workers, {"backend": "llamacpp", "model": str(export_gguf()),
                                                              "max_sequences": cfg.rollout_batch},
                                        cfg.model, cfg.env, [task_seeds[t] for t in mine], cfg.group, agent_seeds,
                                        cfg.max_turns, agent_kwargs)
        else:
            agent = LMAgent(cfg.model, backend=rollout_backend(), logprobs=True, **agent_kwargs)
            played = play_groups(agent, envs, cfg.env, [task_seeds[t] for t in mine], cfg.group, agent_seeds,
                                 cfg.max_turns)
        per_turn = advantages(played, cfg.group, cfg.estimator, gamma=cfg.gamma, step_weight=cfg.step_weight,
                              scale=cfg.scale_rewards)
        samples = [Sample(turn.prompt_ids + turn.completion_ids, len(turn.prompt_ids), a,
                          # the sampler's log-probs are of the untempered model (lmgym.models.generation)
                          sampler=turn.sampler_logprobs if cfg.temperature == 1.0 else None)
                   for p, values in zip(played, per_turn) for turn, a in zip(p.turns, values) if turn.completion_ids]
        mismatch, compared = 0.0, 0
        with torch.no_grad():
            for chunk in range(0, len(samples), cfg.micro_batch):
                part = samples[chunk:chunk + cfg.micro_batch]
                ids, attention, written = collate(part, pad)
                logp, _ = completion_logprobs(policy, ids.to(sampler.device), attention.to(sampler.device), cfg.temperature,
                                              written.shape[1])
                for row, sample in enumerate(part):
                    sample.old = logp[row][written[row].to(logp.device)].cpu()
                    if sample.sampler is not None and len(sample.sampler) == len(sample.old):
                        mismatch += float((sample.old - torch.tensor(sample.sampler)).abs().sum())
                        compared += len(sample.old)
                    else:
                        sample.sampler = None
        for p in played[::cfg.group]:  # the tasks trained on (lmgym.benchmarks.panels refuses them for evaluation)
            tasks_played.append(replace(p.episode, steps=p.episode.steps[:1]))
        batch.update(samples=samples, played=played)
        returns = group_returns(played, cfg.group, cfg.gamma)
        sums = all_reduce_sum([len(samples), sum(len(s.old) for s in samples), mismatch, compared,
                               sum(p.episode.return_ for p in played), sum(p.episode.won for p in played),
                               len(played), sum(len(p.turns) for p in played),
                               len({(p.task_index, t.state_key) for p in played for t in p.turns}),
                               flat_groups(returns), len(returns)], world)
        batch["n_sequences"], batch["n_tokens"] = sums[0], sums[1]
        row = {"train/reward": sums[4] / sums[6], "train/success": sums[5] / sums[6],
               "train/episode_turns": sums[7] / sums[6], "time/env_steps": sums[7],
               "train/flat_groups": sums[9] / max(sums[10], 1)}
        if sums[3]:
            row["train/logprob_mismatch"] = sums[2] / sums[3]
        if cfg.estimator == "gigpo":
            row["train/step_groups"] = sums[7] / max(sums[8], 1)
        return row

    def evaluate() -> dict[str, float]:
        """Greedy episodes on seeds 0..N-1 of the evaluation split, through the same agent."""
        agent = LMAgent(cfg.model, backend=sampler, **{**agent_kwargs, "temperature": 0.0})
        eval_envs = [gym.make(cfg.env, split=cfg.eval_split) for _ in range(cfg.rollout_batch)]
        episodes = [e for _, e in run_episodes(eval_envs, agent, list(range(cfg.eval_episodes)), env_id=cfg.env,
                                               max_steps=cfg.max_turns)]
        sampler.close()
        return {"eval/success": sum(e.won for e in episodes) / len(episodes),
                "eval/return": sum(e.return_ for e in episodes) / len(episodes)}

    def step(k: int, generator: torch.Generator) -> dict[str, float]:
        iteration, epoch = divmod(k, cfg.ppo_epochs)
        row = {"time/env_steps": 0.0}
        if epoch == 0:
            if fsdp:
                gather_full(model, policy)
            if cfg.eval_every and cfg.eval_episodes and iteration % cfg.eval_every == 0:
                row.update(evaluate())
            row.update(collect(iteration, generator))
            meta[TRAIN_PANELS] = earlier_panels + train_panels(tasks_played)
        samples: list[Sample] = batch["samples"]  # type: ignore[assignment]
        totals = defaultdict(float)
        loss_value = 0.0
        passes = torch.tensor(-(-len(samples) // cfg.micro_batch))
        if fsdp:  # FSDP's all-gathers and reduce-scatters must match: as many passes as the busiest rank
            torch.distributed.all_reduce(passes, op=torch.distributed.ReduceOp.MAX)
        for chunk in range(int(passes)):
            part = samples[chunk * cfg.micro_batch:(chunk + 1) * cfg.micro_batch]
            if not part:  # an idle FSDP pass: a zero loss through the sharded model
                ids = torch.full((1, 2), pad, device=sampler.device)
                (completion_logprobs(model, ids, torch.ones_like(ids), cfg.temperature, 1)[0].sum() * 0).backward()
                continue
            ids, attention, written = collate(part, pad)
            ids, attention = ids.to(sampler.device), attention.to(sampler.device)
            logp, entropy = completion_logprobs(model, ids, attention, cfg.temperature, written.shape[1])
            written = written.to(logp.device)
            old = padded([s.old for s in part], written.cpu()).to(logp.device)
            weights = None
            # TIS: min(pi_old / pi_sampler, C), 1 where unknown; not for the hf sampler, which is pi_old
            # itself (its log-probs differ only by batch rounding: the mismatch is logged, not weighted)
            if cfg.sampler != "hf" and any(s.sampler is not None for s in part):
                sampled = padded([s.sampler if s.sampler is not None else s.old for s in part], written.cpu()).to(logp.device)
                weights = torch.exp(old - sampled).clamp(max=cfg.tis_cap)
            ref = None
            if reference is not None:
                with torch.no_grad():
                    ref, _ = completion_logprobs(reference, ids, attention, cfg.temperature, written.shape[1])
            loss, sums = ppo_clip_loss(logp, old, torch.tensor([s.advantage for s in part], device=logp.device),
                                       written, cfg.clip_eps, ref_logprobs=ref, kl_coef=cfg.kl_coef, is_weights=weights,
                                       aggregation=cfg.aggregation, n_sequences=batch["n_sequences"],
                                       n_tokens=batch["n_tokens"])
            loss.backward()
            loss_value += loss.item()
            for key, value in sums.items():
                totals[key] += value
            totals["entropy"] += float((entropy.detach() * written).sum())
        if world > 1 and not fsdp:  # DDP's all-reduce, as a sum: each rank's loss is normalised by the whole batch
            for p in params:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                torch.distributed.all_reduce(p.grad)
        reduced = all_reduce_sum([loss_value, totals["clipped"], totals["ratio"], totals["kl"], totals["entropy"]], world)
        n_tokens = max(batch["n_tokens"], 1)
        row.update({"train/loss": reduced[0], "train/clip_fraction": reduced[1] / n_tokens,
                    "train/ratio": reduced[2] / n_tokens, "train/kl": reduced[3] / n_tokens,
                    "train/entropy": reduced[4] / n_tokens, "train/tokens": batch["n_tokens"]})
        return row

    def save(path: Path, meta: dict, optimizer: torch.optim.Optimizer) -> None:
        if fsdp:  # every rank gathers; the optimizer's state stays sharded and unsaved
            gather_full(model, policy)
            optimizer = None
        if rank == 0:
            save_checkpoint(path, policy, tokenizer, meta, optimizer=optimizer)

    row = run_loop(cfg, params, step, save, meta, folder=folder, name="grpo", totals=("time/env_steps", "train/tokens"))
    assert_ranks_agree([p for p in policy.parameters() if p.requires_grad], world)
    if row and cfg.eval_every and cfg.eval_episodes:  # the trained policy's evaluation closes the curve
        final = {"train/step": cfg.steps, **evaluate()}
        append_jsonl(Path(cfg.out) / "metrics.jsonl", final)
        row.update(final)
    return row


def main(argv: list[str] | None = None) -> int:
    return cli(GRPOConfig, train, argv, "grpo", __doc__)


if __name__ == "__main__":
    raise SystemExit(main())
