"""Shared trainer pieces: AR log-probs, the masked-diffusion ELBO with shared mask seeds, references."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from tiny_models import MASK_ID, tiny_llama  # noqa: E402

from lmgym.training.objectives import frozen_copy, mask_draws, mdlm_elbo, sequence_logprobs, token_logprobs  # noqa: E402


def test_sequence_logprobs_sum_the_chosen_next_token_logprobs():
    model = tiny_llama(bidirectional=False, seed=1)
    ids = torch.tensor([[1, 5, 7, 9, 11], [2, 4, 6, 8, 10]])
    target = torch.tensor([[0, 0, 1, 1, 1], [0, 0, 0, 1, 1]], dtype=torch.bool)
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits.float(), -1)
        expected = [sum(logp[b, t - 1, ids[b, t]] for t in range(5) if target[b, t]) for b in range(2)]
        assert torch.allclose(sequence_logprobs(model, ids, None, target), torch.stack(expected), atol=1e-5)
        assert token_logprobs(model, ids).shape == (2, 4)


def test_mask_draws_mask_between_one_and_all_targets_and_are_seeded():
    target = torch.zeros((3, 12), dtype=torch.bool)
    target[:, 4:] = True
    target[2, 4:8] = False
    draws = mask_draws(target, seeds=range(200))
    counts = draws.sum(dim=2)  # (S, B)
    assert (draws & ~target).sum() == 0 and counts.min() >= 1
    assert counts[:, 0].max() == 8 and counts[:, 2].max() == 4  # k reaches n
    assert torch.equal(mask_draws(target, seeds=[5, 6]), draws[5:7])


def test_the_elbo_bounds_the_log_likelihood_of_a_one_token_answer():
    # with one target token, every draw masks it: the ELBO is exactly log p(x | rest)
    model = tiny_llama(bidirectional=True, seed=2)
    ids = torch.tensor([[1, 5, 7, 9]])
    target = torch.tensor([[0, 0, 0, 1]], dtype=torch.bool)
    with torch.no_grad():
        elbo = mdlm_elbo(model, ids, None, target, MASK_ID, seeds=[0, 1, 2])
        noisy = ids.clone()
        noisy[0, 3] = MASK_ID
        exact = torch.log_softmax(model(noisy).logits.float(), -1)[0, 3, 9]
    assert torch.allclose(elbo, exact.unsqueeze(0), atol=1e-5)


def test_shared_mask_seeds_reduce_the_variance_of_an_elbo_difference():
    # VRPO's variance reduction: a policy near its reference, scored on the same masks, gives a
    # far less noisy ELBO difference than on independent masks
    torch.manual_seed(0)
    reference = tiny_llama(bidirectional=True, seed=3)
    policy = frozen_copy(reference)
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.add_(0.02 * torch.randn_like(parameter))
    ids = torch.randint(1, 30, (4, 24))
    target = torch.zeros_like(ids, dtype=torch.bool)
    target[:, 8:] = True
    with torch.no_grad():
        shared = [(mdlm_elbo(policy, ids, None, target, MASK_ID, [s]) - mdlm_elbo(reference, ids, None, target, MASK_ID, [s]))
                  for s in range(40)]
        independent = [(mdlm_elbo(policy, ids, None, target, MASK_ID, [s])
                        - mdlm_elbo(reference, ids, None, target, MASK_ID, [10_000 + s])) for s in range(40)]
    var_shared = torch.stack(shared).var(dim=0).mean()
    var_independent = torch.stack(independent).var(dim=0).mean()
    assert var_shared < 0.1 * var_independent, (var_shared, var_independent)


def test_a_frozen_copy_is_independent_and_never_trains():
    model = tiny_llama(bidirectional=False)
    reference = frozen_copy(model)
    assert not any(p.requires_grad for p in reference.parameters()) and not reference.training
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    assert not torch.equal(next(model.parameters()), next(reference.parameters()))
