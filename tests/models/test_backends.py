"""Text backends: the HF backend's session KV cache, batching, seeds, log-probs and stops."""

import pytest
import torch

from lmgym.models.backends import SamplingParams, is_diffusion_folder, make_text_backend
from lmgym.models.backends.hf import HFBackend

GREEDY = SamplingParams(max_new_tokens=12)


def conversation(turns: int):
    messages = [{"role": "user", "content": "Task: find the key.\nObservation: You are in the hall.\n"}]
    for k in range(turns):
        messages += [{"role": "assistant", "content": f"Thought: step {k}.\nAction: go east"},
                     {"role": "user", "content": f"Observation: room {k}. You see a key.\n"}]
    return messages


@pytest.fixture(scope="module")
def cached(tiny_ar_folder):
    return HFBackend(tiny_ar_folder, threads=1)


@pytest.fixture(scope="module")
def uncached(tiny_ar_folder):
    return HFBackend(tiny_ar_folder, threads=1, cache_sessions=False)


def test_names_pick_the_backend(tiny_ar_folder, tiny_mdlm_folder):
    assert not is_diffusion_folder(tiny_ar_folder) and is_diffusion_folder(tiny_mdlm_folder)
    assert isinstance(make_text_backend(model=str(tiny_ar_folder)), HFBackend)
    with pytest.raises(ValueError, match="text backend"):
        make_text_backend("nosuchbackend")


def test_a_session_reuses_its_cache_and_decodes_the_same_tokens(cached, uncached):
    messages, previous = conversation(0), None
    for turn in range(4):
        [with_cache] = cached.complete([messages], GREEDY, sessions=["episode"])
        [fresh] = uncached.complete([messages], GREEDY, sessions=["episode"])
        assert with_cache.text == fresh.text and with_cache.prompt_tokens == fresh.prompt_tokens
        assert fresh.cached_tokens == 0
        if previous is not None:  # the last prompt and all but the re-tokenised end of its answer
            assert with_cache.cached_tokens >= previous.prompt_tokens
        previous = with_cache
        messages = messages + [{"role": "assistant", "content": with_cache.text},
                               {"role": "user", "content": f"Observation: room {turn}.\n"}]
    cached.end_session("episode")
    [again] = cached.complete([conversation(3)], GREEDY, sessions=["episode"])
    assert again.cached_tokens == 0


def test_a_batch_with_different_cached_prefixes_equals_one_by_one(cached, uncached):
    cached.complete([conversation(1)], GREEDY, sessions=["a"])  # "a" has a long cache, "b" none
    prompts = [conversation(2), conversation(0)]
    batch = cached.complete(prompts, GREEDY, sessions=["a", "b"])
    assert batch[0].cached_tokens > 0 and batch[1].cached_tokens == 0
    single = [uncached.complete([p], GREEDY)[0] for p in prompts]
    assert [c.text for c in batch] == [c.text for c in single]
    # and the caches the batch left behind continue correctly
    follow = cached.complete([conversation(2)], GREEDY, sessions=["b"])[0]
    assert follow.text == single[0].text and follow.cached_tokens > 0


def test_a_prompt_longer_than_the_context_loses_its_oldest_tokens(uncached):
    long = conversation(6)
    assert len(uncached.encode(long)) + GREEDY.max_new_tokens > uncached.max_context
    [out] = uncached.complete([long], GREEDY)
    assert out.prompt_tokens == uncached.max_context - GREEDY.max_new_tokens


def test_sampling_is_seeded_per_prompt_whatever_shares_the_batch(uncached):
    params = SamplingParams(max_new_tokens=10, temperature=1.0)
    alone = uncached.complete([conversation(1)], params, seeds=[7])[0].text
    shared = uncached.complete([conversation(2), conversation(1)], params, seeds=[3, 7])[1].text
    assert alone == shared
    others = {uncached.complete([conversation(1)], params, seeds=[s])[0].text for s in range(6)}
    assert len(others) > 1  # the seed matters


def test_logprobs_are_the_models_own(uncached):
    [out] = uncached.complete([conversation(1)], SamplingParams(max_new_tokens=6, logprobs=True))
    ids = uncached.encode(conversation(1))
    new = uncached.tokenizer.encode(out.text, add_special_tokens=False)[:len(out.token_logprobs)]
    with torch.no_grad():
        logits = uncached.model(torch.tensor([ids + new])).logits[0, len(ids) - 1:-1]
    expected = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(new).unsqueeze(-1)).squeeze(-1)
    assert len(out.token_logprobs) == out.completion_tokens
    assert torch.allclose(torch.tensor(out.token_logprobs[:len(new)]), expected, atol=1e-4)


def test_the_tiny_model_writes_its_training_format(uncached):
    [out] = uncached.complete([conversation(0)], SamplingParams(max_new_tokens=32))
    assert out.text.startswith("Thought:") and "Action: take key" in out.text and out.finish_reason == "stop"


def test_stop_strings_cut_the_text_and_end_the_completion(uncached):
    free = uncached.complete([conversation(0)], SamplingParams(max_new_tokens=32))[0]
    stopped = uncached.complete([conversation(0)], SamplingParams(max_new_tokens=32, stop=("\nAction",)))[0]
    assert "Action" in free.text and "Action" not in stopped.text and free.text.startswith(stopped.text)
    assert stopped.finish_reason == "stop" and stopped.completion_tokens < free.completion_tokens
