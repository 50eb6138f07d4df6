"""Pieces the research trainers share: sequence log-probs, the masked-diffusion ELBO, a frozen
reference model.

* `token_logprobs` / `sequence_logprobs`: log p(x_t | x_<t) of an AR model on chosen tokens, the
  quantity DPO, policy gradients and KL penalties are built from.
* `mdlm_elbo`: a Monte-Carlo estimate of a masked-diffusion model's evidence lower bound on
  chosen tokens (the answer), the likelihood surrogate VRPO puts in DPO's place (LLaDA 1.5:
  Zhu et al. 2025, arXiv:2505.19223). Each sample draws k ~ U{1..n} of the n target tokens,
  masks exactly those, and scores ``(n / k) * sum_masked log p(x_i | x_masked)``: an unbiased
  estimate of the ELBO ``E_t[(1/t) sum_masked log p]`` with the discrete uniform count in place
  of t (the equivalent form with l ~ U{1..L} masked tokens weighted L/l that LLaDA uses to
  evaluate likelihoods: Nie et al. 2025, arXiv:2502.09992, sec. 2.4 and Appendix B). Masks come from explicit seeds, so
  the policy and a reference model can be scored on *the same* masks: VRPO's shared-noise
  variance reduction for the difference of their ELBOs (measured in the tests).
* `frozen_copy`: a reference model that never trains (for KL terms and DPO's reference).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """log p(x_t | x_<t) for t >= 1 (B, T - 1), float32: what an AR model gives each next token."""
    logits = model(input_ids, attention_mask=attention_mask).logits[:, :-1]  # (B, T-1, V)
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


def sequence_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                      target_mask: torch.Tensor) -> torch.Tensor:
    """Sum of log p over the tokens where ``target_mask`` (B, T) is True (B,): log pi(y | x)."""
    return (token_logprobs(model, input_ids, attention_mask) * target_mask[:, 1:].float()).sum(dim=1)


def mask_draws(target_mask: torch.Tensor, seeds: Sequence[int]) -> torch.Tensor:
    """One mask per (seed, row): (S, B, T) bool, each masking k ~ U{1..n_b} of row b's n_b targets.

    A seed fixes the draw for every row, so two models scored with the same seeds see the same
    masked inputs.
    """
    masks = []
    n = target_mask.sum(dim=1)  # (B,)
    for seed in seeds:
        generator = torch.Generator().manual_seed(int(seed))
        k = (torch.rand(n.shape, generator=generator) * n).long() + 1  # (B,) in 1..n
        scores = torch.rand(target_mask.shape, generator=generator).masked_fill(~target_mask.cpu(), 2.0)
        rank = scores.argsort(dim=1).argsort(dim=1)  # (B, T): rank of each position's score
        masks.append((rank < k.unsqueeze(1)) & target_mask.cpu())
    return torch.stack(masks).to(target_mask.device)


def mdlm_elbo(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, target_mask: torch.Tensor,
              mask_id: int, seeds: Sequence[int]) -> torch.Tensor:
    """Monte-Carlo ELBO of the target tokens (B,), averaged over one masked draw per seed.

    Per draw: ``(n / k) * sum_{masked i} log p(x_i | x_t)`` with x_t the input where the k drawn
    targets are [MASK] (every other token, the prompt included, stays clean).
    """
    n = target_mask.sum(dim=1).clamp(min=1).float()  # (B,)
    draws = mask_draws(target_mask, seeds)  # (S, B, T)
    total = torch.zeros(input_ids.shape[0], device=input_ids.device)
    for masked in draws:
        noisy = input_ids.masked_fill(masked, mask_id)
        logits = model(noisy, attention_mask=attention_mask).logits.float()  # (B, T, V)
        logp = torch.log_softmax(logits, dim=-1).gather(-1, input_ids.unsqueeze(-1)).squeeze(-1)  # (B, T)
        k = masked.sum(dim=1).clamp(min=1).float()
        total = total + (n / k) * (logp * masked.float()).sum(dim=1)
    return total / len(draws)


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """An independent copy of `model` in eval mode whose parameters never get gradients."""
    reference = copy.deepcopy(model)
    for parameter in reference.parameters():
        parameter.requires_grad_(False)
    return reference.eval()


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `values` where `mask` is True (0 when nothing is)."""
    mask = mask.float()
    return (values * mask).sum() / mask.sum().clamp(min=1.0)

