"""AR generation with the KV cache: batching, sampling, stop strings, fork/extend/merge."""

import torch
from transformers import DynamicCache

from lmgym.models.generation import (LlamaDecode, cut_at_stop, extend, fork_cache, generate, generate_ids, merge_caches,
                                    repeat_cache, slice_cache, stop_checker)


def greedy_without_cache(model, ids, n):
    ids = ids.clone()
    for _ in range(n):
        next_token = model(ids).logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, next_token], dim=1)
    return ids[:, -n:]


@torch.no_grad()
def test_batched_left_padded_greedy_equals_one_by_one_without_cache(causal_model):
    short, long = torch.tensor([[5, 6, 7]]), torch.tensor([[1, 2, 3, 4, 5]])
    batch = torch.tensor([[0, 0, 5, 6, 7], [1, 2, 3, 4, 5]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    new, cache = generate_ids(causal_model, batch, mask, max_new_tokens=6)
    assert new[0].tolist() == greedy_without_cache(causal_model, short, 6)[0].tolist()
    assert new[1].tolist() == greedy_without_cache(causal_model, long, 6)[0].tolist()
    assert cache.get_seq_length() == 5 + 5  # the last token is sampled, not yet encoded


@torch.no_grad()
def test_eos_ends_a_row_and_pads_it(causal_model):
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    free, _ = generate_ids(causal_model, prompt, max_new_tokens=6)
    eos = int(free[0, 1])  # the second token of row 0 becomes "EOS"
    stopped, _ = generate_ids(causal_model, prompt, max_new_tokens=6, eos_token_id=eos)
    first = stopped[0].tolist()
    cut = first.index(eos)
    assert first[: cut + 1] == free[0, : cut + 1].tolist() and set(first[cut:]) == {eos}


@torch.no_grad()
def test_sampling_is_seeded_and_top_p_near_zero_is_greedy(causal_model):
    prompt = torch.tensor([[1, 2, 3]]).expand(4, -1)
    draw = lambda seed: generate_ids(causal_model, prompt, max_new_tokens=8, temperature=1.0,
                                     generator=torch.Generator().manual_seed(seed))[0]
    assert torch.equal(draw(0), draw(0)) and not torch.equal(draw(0), draw(1))
    greedy, _ = generate_ids(causal_model, prompt, max_new_tokens=8)
    nucleus, _ = generate_ids(causal_model, prompt, max_new_tokens=8, temperature=1.0, top_p=1e-6,
                              generator=torch.Generator().manual_seed(0))
    assert torch.equal(greedy, nucleus)


@torch.no_grad()
def test_slices_merged_back_equal_one_forward_pass(causal_model):
    first, second, query = torch.tensor([[1, 2, 3, 4]]), torch.tensor([[5, 6, 7]]), torch.tensor([[8, 9]])
    whole = DynamicCache()
    extend(causal_model, whole, torch.cat([first, second], dim=1))
    merged = merge_caches([slice_cache(whole, 0, 4), slice_cache(whole, 4, 7)])
    assert merged.get_seq_length() == 7
    logits = extend(causal_model, merged, query)
    reference = causal_model(torch.cat([first, second, query], dim=1)).logits[:, -2:]
    torch.testing.assert_close(logits, reference, rtol=1e-4, atol=1e-5)


@torch.no_grad()
def test_position_offset_bakes_the_right_rotary_positions(causal_model):
    # Layer-0 keys depend only on the token and its position, so a message encoded alone with
    # position_offset=4 has the same layer-0 keys as when it follows a 4-token message.
    whole, alone, unshifted = DynamicCache(), DynamicCache(), DynamicCache()
    extend(causal_model, whole, torch.tensor([[1, 2, 3, 4, 5, 6, 7]]))
    extend(causal_model, alone, torch.tensor([[5, 6, 7]]), position_offset=4)
    extend(causal_model, unshifted, torch.tensor([[5, 6, 7]]))
    torch.testing.assert_close(alone.layers[0].keys, whole.layers[0].keys[:, :, 4:])
    assert not torch.allclose(unshifted.layers[0].keys, whole.layers[0].keys[:, :, 4:])


@torch.no_grad()
def test_fork_branches_independently(causal_model):
    cache = DynamicCache()
    extend(causal_model, cache, torch.tensor([[1, 2, 3]]))
    fork = fork_cache(cache)
    extend(causal_model, fork, torch.tensor([[4, 5]]))
    assert cache.get_seq_length() == 3 and fork.get_seq_length() == 5
    new_from_fork, _ = generate_ids(causal_model, torch.tensor([[6]]), cache=fork, max_new_tokens=3)
    expected = greedy_without_cache(causal_model, torch.tensor([[1, 2, 3, 4, 5, 6]]), 3)
    assert new_from_fork.tolist() == expected.tolist()


@torch.no_grad()
def test_repeated_cache_decodes_each_row_as_its_source(causal_model):
    cache = DynamicCache()
    extend(causal_model, cache, torch.tensor([[1, 2, 3], [7, 8, 9]]))
    repeated = repeat_cache(cache, 3)
    assert repeated.layers[0].keys.shape[0] == 6 and cache.layers[0].keys.shape[0] == 2  # the source is untouched
    new, _ = generate_ids(causal_model, torch.tensor([[4]] * 3 + [[4]] * 3), cache=repeated, max_new_tokens=3)
    for row, prefix in enumerate(([1, 2, 3, 4], [7, 8, 9, 4])):
        expected = greedy_without_cache(causal_model, torch.tensor([prefix]), 3)[0].tolist()
        assert [new[3 * row + k].tolist() for k in range(3)] == [expected] * 3


def test_fork_keeps_gradients(causal_model):
    cache = DynamicCache()
    extend(causal_model, cache, torch.tensor([[1, 2, 3]]))
    fork = fork_cache(cache)
    loss = extend(causal_model, fork, torch.tensor([[4]])).sum()
    loss.backward()
    grad = causal_model.model.model.embed_tokens.weight.grad
    assert grad is not None and grad[1].abs().sum() > 0  # flows back into the first agent's tokens
    causal_model.zero_grad(set_to_none=True)


def test_cut_at_stop():
    assert cut_at_stop("a\nObservation: x", ["\nObservation", "zz"]) == "a"
    assert cut_at_stop("abc", ["z"]) == "abc"


@torch.no_grad()
def test_the_static_cache_decoder_computes_what_the_forward_does(causal_model):
    """`LlamaDecode` (the default for a plain Llama) against the model's forward at every step:
    a left-padded batch continuing a cache with padding of its own, greedy and sampled, with
    log-probs, and the cache it leaves behind."""
    from tiny_models import tiny_llama

    from lmgym.training.lora import add_lora

    llama = causal_model.model  # the unwrapped LlamaForCausalLM
    assert LlamaDecode.supports(llama) and not LlamaDecode.supports(causal_model)
    assert not LlamaDecode.supports(add_lora(tiny_llama(False)).get_base_model())  # LoRA layers inside
    prefix, prefix_mask = torch.tensor([[0, 3, 4], [5, 6, 7]]), torch.tensor([[0, 1, 1], [1, 1, 1]])
    batch, mask = torch.tensor([[0, 1, 2], [8, 9, 10]]), torch.tensor([[0, 1, 1], [1, 1, 1]])
    outputs = {}
    for fast in (True, False):
        cache = DynamicCache()
        positions = (prefix_mask.cumsum(1) - 1).clamp(min=0)
        llama(prefix, attention_mask=prefix_mask, cache=cache, use_cache=True, position_ids=positions)
        greedy = generate(llama, batch, mask, cache=cache, cache_mask=prefix_mask, max_new_tokens=10,
                          return_logprobs=True, fast=fast)
        sampled = generate(llama, batch, mask, max_new_tokens=10, temperature=1.0, fast=fast,
                           generator=[torch.Generator().manual_seed(row) for row in range(2)])
        outputs[fast] = greedy, sampled
    (fast_greedy, fast_sampled), (slow_greedy, slow_sampled) = outputs[True], outputs[False]
    assert torch.equal(fast_greedy.tokens, slow_greedy.tokens) and torch.equal(fast_sampled.tokens, slow_sampled.tokens)
    torch.testing.assert_close(fast_greedy.logprobs, slow_greedy.logprobs, rtol=1e-4, atol=1e-5)
    assert torch.equal(fast_greedy.cache_mask, slow_greedy.cache_mask)
    assert fast_greedy.cache.get_seq_length() == slow_greedy.cache.get_seq_length() == 3 + 3 + 9
    for fast_layer, slow_layer in zip(fast_greedy.cache.layers, slow_greedy.cache.layers):
        real = fast_greedy.cache_mask.bool()  # padded slots hold whatever; only real ones are attended
        torch.testing.assert_close(fast_layer.keys.transpose(1, 2)[real], slow_layer.keys.transpose(1, 2)[real],
                                   rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(fast_layer.values.transpose(1, 2)[real], slow_layer.values.transpose(1, 2)[real],
                                   rtol=1e-4, atol=1e-5)


def test_stop_strings_are_found_in_the_last_tokens():
    class Bytes:  # a tokenizer whose tokens are single bytes (the worst case for the tail)
        @staticmethod
        def decode(ids, skip_special_tokens=True):
            return bytes(ids.tolist()).decode("utf-8", errors="replace")

    check = stop_checker(Bytes(), ("\nObs:", "é!"))
    text = "Thought: é é.\nAction: go\nObs:".encode()
    hits = [check(0, torch.tensor(list(text[:end]))) for end in range(1, len(text) + 1)]
    assert hits.index(True) == len(text) - 1  # found at the token that completes it, not before
    assert check(0, torch.tensor(list("xé!".encode()))) and stop_checker(Bytes(), ()) is None
