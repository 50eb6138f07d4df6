"""The vectorised LLaDA sampler against a plain, loop-by-loop re-implementation of the reference.

`reference_generate` is written from the description of LLaDA's sampler (Nie et al. 2025,
arXiv:2502.09992, Appendix B; ML-GSAI/LLaDA generate.py), one sequence at a time, with Python
lists and loops, and guidance as two separate forward passes, so it shares no code with
`lmgym.models.diffusion`.
"""

import pytest
import torch
import torch.nn.functional as F
from tiny_models import MASK_ID

from lmgym.models.diffusion import Priority, fast_generate, generate, num_transfer_tokens


@torch.no_grad()
def reference_generate(model, prompt, attention, steps, gen_length, block_length,
                       temperature=0.0, cfg_scale=0.0, remasking="low_confidence"):
    """One sequence: `prompt` a list of ids, `attention` a list of 0/1 or None."""
    x = list(prompt) + [MASK_ID] * gen_length
    is_prompt = [token != MASK_ID for token in x]
    mask = None if attention is None else torch.tensor([list(attention) + [1] * gen_length])
    blocks = gen_length // block_length
    steps_per_block = steps // blocks
    for block in range(blocks):
        block_start = len(prompt) + block * block_length
        block_end = block_start + block_length
        masked_in_block = sum(x[i] == MASK_ID for i in range(block_start, block_end))
        counts = []
        for step in range(steps_per_block):
            counts.append(masked_in_block // steps_per_block + (1 if step < masked_in_block % steps_per_block else 0))
        for step in range(steps_per_block):
            logits = model(torch.tensor([x]), attention_mask=mask).logits[0]
            if cfg_scale > 0:
                unconditional = [MASK_ID if is_prompt[i] else x[i] for i in range(len(x))]
                un_logits = model(torch.tensor([unconditional]), attention_mask=mask).logits[0]
                logits = un_logits + (cfg_scale + 1) * (logits - un_logits)
            if temperature > 0:
                noise = torch.rand(1, *logits.shape, dtype=torch.float64)[0]
                scores = logits.double().exp() / (-torch.log(noise)) ** temperature
            else:
                scores = logits
            random_confidence = torch.rand(1, len(x))[0] if remasking == "random" else None
            candidates = []
            for i in range(len(x)):
                if x[i] != MASK_ID or i >= block_end:
                    continue
                token = int(scores[i].argmax())
                if remasking == "low_confidence":
                    confidence = float(F.softmax(logits[i].double(), dim=-1)[token])
                else:
                    confidence = float(random_confidence[i])
                candidates.append((-confidence, i, token))
            for _, i, token in sorted(candidates)[: counts[step]]:
                x[i] = token
    return x


def random_prompts(batch, length, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, MASK_ID, (batch, length), generator=generator)


@pytest.mark.parametrize("gen_length,block_length,steps", [(16, 16, 16), (16, 16, 8), (16, 8, 8), (16, 4, 8), (12, 4, 6)])
def test_greedy_matches_reference_for_several_block_lengths(bidirectional_model, gen_length, block_length, steps):
    prompts = random_prompts(3, 5, seed=gen_length + block_length + steps)
    ours = generate(bidirectional_model, prompts, steps=steps, gen_length=gen_length,
                    block_length=block_length, mask_id=MASK_ID)
    for row, prompt in enumerate(prompts.tolist()):
        expected = reference_generate(bidirectional_model, prompt, None, steps, gen_length, block_length)
        assert ours[row].tolist() == expected


def test_cfg_matches_reference(bidirectional_model):
    prompts = random_prompts(2, 6, seed=1)
    ours = generate(bidirectional_model, prompts, steps=8, gen_length=8, block_length=4, cfg_scale=1.5, mask_id=MASK_ID)
    for row, prompt in enumerate(prompts.tolist()):
        assert ours[row].tolist() == reference_generate(bidirectional_model, prompt, None, 8, 8, 4, cfg_scale=1.5)


def test_left_padded_batch_matches_reference_per_sequence(bidirectional_model):
    prompts = random_prompts(3, 7, seed=2)
    attention = torch.ones_like(prompts)
    attention[1, :3] = 0  # left padding
    attention[2, :5] = 0
    prompts = prompts.masked_fill(attention == 0, 0)  # pad id 0
    ours = generate(bidirectional_model, prompts, attention, steps=8, gen_length=8, block_length=4, cfg_scale=0.5, mask_id=MASK_ID)
    for row in range(3):
        expected = reference_generate(bidirectional_model, prompts[row].tolist(), attention[row].tolist(), 8, 8, 4, cfg_scale=0.5)
        assert ours[row].tolist() == expected


@pytest.mark.parametrize("remasking,temperature", [("low_confidence", 0.7), ("random", 0.0), ("random", 1.0)])
def test_sampling_matches_reference_with_the_same_seed(bidirectional_model, remasking, temperature):
    prompt = random_prompts(1, 5, seed=3)
    torch.manual_seed(123)
    ours = generate(bidirectional_model, prompt, steps=8, gen_length=8, block_length=4,
                    temperature=temperature, remasking=remasking, mask_id=MASK_ID)
    torch.manual_seed(123)
    expected = reference_generate(bidirectional_model, prompt[0].tolist(), None, 8, 8, 4,
                                  temperature=temperature, remasking=remasking)
    assert ours[0].tolist() == expected


def test_temperature_samples_differ_across_seeds_and_repeat_with_a_generator(bidirectional_model):
    prompt = random_prompts(1, 5, seed=4).expand(4, -1)
    draws = [generate(bidirectional_model, prompt, steps=8, gen_length=8, block_length=8, temperature=1.0,
                      mask_id=MASK_ID, generator=torch.Generator().manual_seed(seed)) for seed in (0, 0, 1)]
    assert torch.equal(draws[0], draws[1])
    assert not torch.equal(draws[0], draws[2])
    assert len({tuple(row) for row in draws[0].tolist()}) > 1  # rows of one batch differ


def test_num_transfer_tokens_is_linear():
    mask = torch.zeros(2, 10, dtype=torch.bool)
    mask[0, :10] = True
    mask[1, :7] = True
    schedule = num_transfer_tokens(mask, 4)
    assert schedule.tolist() == [[3, 3, 2, 2], [2, 2, 2, 1]]


def test_invalid_layout_is_a_clear_error(bidirectional_model):
    prompt = random_prompts(1, 3, seed=0)
    with pytest.raises(ValueError, match="multiple of block_length"):
        generate(bidirectional_model, prompt, steps=4, gen_length=10, block_length=4, mask_id=MASK_ID)
    with pytest.raises(ValueError, match="remasking"):
        generate(bidirectional_model, prompt, steps=4, gen_length=4, block_length=4, mask_id=MASK_ID, remasking="best")


# --- fast decoding ---------------------------------------------------------------------------


def test_fast_without_threshold_or_cache_is_the_reference_sampler(bidirectional_model):
    prompts = random_prompts(2, 5, seed=5)
    expected = generate(bidirectional_model, prompts, steps=8, gen_length=16, block_length=8, mask_id=MASK_ID)
    fast = fast_generate(bidirectional_model, prompts, steps=8, gen_length=16, block_length=8, mask_id=MASK_ID,
                         threshold=None, cache="none")
    assert torch.equal(fast.sequences, expected)
    assert fast.forward_passes == 8


def test_prefix_cache_is_exact_for_a_causal_model(causal_model):
    # With causal attention the prefix keys do not depend on the masked suffix, so the cache
    # changes nothing; with bidirectional attention it is Fast-dLLM's approximation.
    prompts = random_prompts(2, 5, seed=6)
    attention = torch.ones_like(prompts)
    attention[1, :2] = 0
    expected = generate(causal_model, prompts, attention, steps=16, gen_length=16, block_length=4, mask_id=MASK_ID)
    fast = fast_generate(causal_model, prompts, attention, steps=16, gen_length=16, block_length=4, mask_id=MASK_ID,
                         threshold=None, cache="prefix")
    assert torch.equal(fast.sequences, expected)


def test_dual_cache_is_the_prefix_cache_when_there_is_no_suffix(bidirectional_model):
    # One block: nothing follows it, so the DualCache keeps exactly the prefix cache's keys.
    prompts = random_prompts(2, 5, seed=9)
    attention = torch.ones_like(prompts)
    attention[0, :1] = 0
    kwargs = dict(steps=16, gen_length=16, block_length=16, mask_id=MASK_ID, threshold=None)
    prefix = fast_generate(bidirectional_model, prompts, attention, cache="prefix", **kwargs)
    dual = fast_generate(bidirectional_model, prompts, attention, cache="dual", **kwargs)
    assert torch.equal(prefix.sequences, dual.sequences)


def test_dual_cache_feeds_only_the_block_after_its_first_step(bidirectional_model):
    fed = []

    def counting_model(x, **kwargs):
        fed.append(x.shape[1])
        return bidirectional_model(x, **kwargs)

    prompts = random_prompts(2, 5, seed=10)
    out = fast_generate(counting_model, prompts, steps=16, gen_length=16, block_length=4, mask_id=MASK_ID,
                        threshold=None, cache="dual")
    assert fed == [5 + 16, 4, 4, 4] * 4  # per block: the whole canvas once, then the block alone
    assert not (out.sequences == MASK_ID).any()
    with pytest.raises(ValueError, match="cache must be one of"):
        fast_generate(bidirectional_model, prompts, gen_length=16, block_length=4, steps=16, mask_id=MASK_ID, cache="full")


def test_stopping_at_eos_keeps_the_text_before_it(bidirectional_model):
    prompts = random_prompts(2, 5, seed=12)
    kwargs = dict(steps=16, gen_length=16, block_length=4, mask_id=MASK_ID, threshold=None, cache="none")
    full = fast_generate(bidirectional_model, prompts, **kwargs)
    answers = full.sequences[:, 5:]
    eos = int(answers[0, 1])  # a token both rows commit early in block 0 or 1 plays EOS
    assert (answers[:, :8] == eos).any(dim=1).all()
    early = fast_generate(bidirectional_model, prompts, eos_id=eos, **kwargs)
    assert early.forward_passes < full.forward_passes
    for row in range(2):
        cut = int((answers[row] == eos).nonzero()[0])  # the first EOS: the text ends there
        assert torch.equal(early.sequences[row, 5:5 + cut + 1], answers[row, :cut + 1])
    decoded = 4 * (early.forward_passes // 4)  # 4 steps per block: the blocks decoded before the stop
    assert (early.sequences[:, 5 + decoded:] == eos).all() and (early.commit_step[:, decoded:] == 0).all()


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_fast_sampling_draws_from_the_tempered_model_distribution(temperature):
    fixed = torch.tensor([2.0, 1.0, 0.0, -1.0, -30.0])  # 5 tokens; the last (id 4) plays [MASK]

    def model(x, **kwargs):
        return type("Output", (), {"logits": fixed.expand(x.shape[0], x.shape[1], -1)})()

    prompts = torch.zeros((20_000, 1), dtype=torch.long)
    out = fast_generate(model, prompts, steps=1, gen_length=1, block_length=1, mask_id=4, temperature=temperature,
                        cache="none", generator=torch.Generator().manual_seed(0))
    frequencies = torch.bincount(out.sequences[:, 1], minlength=5).double() / 20_000
    expected = torch.softmax(fixed.double() / temperature, dim=0)
    assert torch.allclose(frequencies, expected, atol=0.01)


def test_threshold_bounds_the_number_of_forward_passes(bidirectional_model):
    prompts = random_prompts(2, 5, seed=7)
    kwargs = dict(steps=16, gen_length=16, block_length=8, mask_id=MASK_ID)
    one_per_step = fast_generate(bidirectional_model, prompts, threshold=1.01, **kwargs)  # top-1 only
    all_at_once = fast_generate(bidirectional_model, prompts, threshold=0.0, **kwargs)
    assert one_per_step.forward_passes == 16
    assert all_at_once.forward_passes == 2  # one per block
    for out in (one_per_step, all_at_once):
        assert (out.commit_step >= 1).all()  # every answer position was decoded
    middle = fast_generate(bidirectional_model, prompts, threshold=0.3, **kwargs)
    assert 2 <= middle.forward_passes <= 16


def test_priority_prefills_delimiters_and_decodes_the_span_first(bidirectional_model):
    prompts = random_prompts(2, 5, seed=8)
    priority = Priority.for_span(2, 16, start=8, end=16, bias=10.0, open_ids=[1], close_ids=[2])
    seen = []
    out = fast_generate(bidirectional_model, prompts, steps=16, gen_length=16, block_length=16, mask_id=MASK_ID,
                        threshold=1.01, priority=priority, on_step=lambda x, passes: seen.append(passes))
    answer = out.sequences[:, 5:]
    assert (answer[:, 8] == 1).all() and (answer[:, 15] == 2).all()
    assert (out.commit_step[:, [8, 15]] == 0).all()  # pre-filled, never decoded
    inside, outside = out.commit_step[:, 9:15], out.commit_step[:, :8]
    assert inside.max() < outside.min()  # the biased span is finished before the rest starts
    assert seen == list(range(1, out.forward_passes + 1))
