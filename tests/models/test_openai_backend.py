"""The OpenAI-compatible backend against a tiny scripted server on loopback.

The server (http.server in a thread) answers each route from a script of canned responses and
records every request, so each test states exactly what the server did and checks what the
backend sent and made of it. The real-server test is test_openai_server.py.
"""

import json
import socket
import threading
import time
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lmgym.entrypoints import load_entry_point
from lmgym.models.backends import BACKENDS, SamplingParams
from lmgym.models.backends import openai as openai_backend
from lmgym.models.backends.openai import EndpointError, EndpointUnreachable, OpenAIBackend


def text_answer(text="Action: go north", finish="stop", logprobs=None, usage=(7, 3)):
    choice = {"index": 0, "text": text, "finish_reason": finish,
              "logprobs": None if logprobs is None else {"token_logprobs": logprobs, "tokens": ["x"] * len(logprobs)}}
    return {"id": "cmpl-1", "object": "text_completion", "model": "tiny", "choices": [choice],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}}


def chat_answer(text="Thought: look.\nAction: look", logprobs=None, cached=None):
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length",
              "logprobs": None if logprobs is None else {"content": [{"token": "t", "logprob": v, "top_logprobs": []}
                                                                     for v in logprobs]}}
    usage = {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {"id": "chat-1", "object": "chat.completion", "model": "tiny", "choices": [choice], "usage": usage}


class ScriptedServer:
    """Answers POST routes from per-route queues of (status, body, headers, delay_s); the last
    entry of a queue repeats. Unscripted routes answer 404. Records (route, body, headers).
    GET routes answer from `get_script` (404 otherwise) and are recorded in `gets`."""

    def __init__(self):
        self.script = defaultdict(deque)
        self.requests = []
        self.in_flight = self.max_in_flight = 0
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    server.requests.append((self.path, body, dict(self.headers)))
                    queue = server.script.get(self.path)
                    entry = (queue.popleft() if len(queue) > 1 else queue[0]) if queue else (404, {"detail": "Not Found"}, {}, 0)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                status, answer, headers, delay = entry
                time.sleep(delay)
                with lock:
                    server.in_flight -= 1
                payload = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    for key, value in {"Content-Type": "application/json", **headers}.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

            def do_GET(self):
                with lock:
                    server.gets.append(self.path)
                    status, answer = server.get_script.get(self.path, (404, {"detail": "Not Found"}))
                payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # a broken script must fail the test
                server.errors.append(client_address)

        self.errors = []
        self.get_script, self.gets = {}, []  # GET routes: path -> (status, body); paths asked
        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def answer(self, route, *entries):
        """Script `route`: each entry a body (HTTP 200) or (status, body[, headers[, delay_s]])."""
        for entry in entries:
            entry = (200, entry) if isinstance(entry, dict) else tuple(entry)
            status, body, headers, delay = entry + ({}, 0)[len(entry) - 2:]
            self.script[route].append((status, body, headers, delay))
        return self

    def routes(self):
        return [route for route, _, _ in self.requests]


@pytest.fixture
def server():
    server = ScriptedServer()
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()
    assert not server.errors, "the scripted server failed while answering"


def backend_for(server, **kwargs):
    return OpenAIBackend(server.url, "tiny", **{"max_retries": 2, "timeout_s": 5, **kwargs})


def test_the_registry_names_this_backend():
    assert load_entry_point(BACKENDS["openai"]) is OpenAIBackend


def test_text_prompt_goes_to_completions_with_the_sampling_parameters(server):
    server.answer("/v1/completions", text_answer("Action: go north", finish="length", logprobs=[-0.5, -1.25, 0.0]))
    params = SamplingParams(max_new_tokens=3, temperature=0.7, top_p=0.9, stop=("\nObservation:",), logprobs=True)
    [out] = backend_for(server).complete(["You are in a room.\n> "], params, seeds=[11])
    assert (out.text, out.prompt_tokens, out.completion_tokens, out.finish_reason) == ("Action: go north", 7, 3, "length")
    assert out.token_logprobs == [-0.5, -1.25, 0.0] and out.seconds > 0
    [(route, body, headers)] = server.requests
    assert route == "/v1/completions"
    assert body == {"model": "tiny", "prompt": "You are in a room.\n> ", "max_tokens": 3, "temperature": 0.7,
                    "top_p": 0.9, "stop": ["\nObservation:"], "seed": 11, "logprobs": 1}
    assert "Authorization" not in headers


def test_chat_prompt_goes_to_chat_completions_and_reads_logprobs_and_cache(server, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-test")
    server.answer("/v1/chat/completions", chat_answer(logprobs=[-0.1, -0.2], cached=16))
    messages = [{"role": "system", "content": "Act."}, {"role": "user", "content": "You see a key."}]
    backend = backend_for(server, api_key_env="MY_KEY")
    [out] = backend.complete([messages], SamplingParams(max_new_tokens=4, logprobs=True))
    assert out.text == "Thought: look.\nAction: look" and out.finish_reason == "length"
    assert (out.prompt_tokens, out.completion_tokens, out.cached_tokens, out.token_logprobs) == (20, 4, 16, [-0.1, -0.2])
    _, body, headers = server.requests[0]
    assert body["messages"] == messages and (body["logprobs"], body["top_logprobs"]) == (True, 0)
    assert "seed" not in body and "stop" not in body
    assert headers["Authorization"] == "Bearer sk-test"
    [plain] = backend.complete([messages])  # logprobs not asked: none requested, none returned
    assert plain.token_logprobs is None and "logprobs" not in server.requests[1][1]


def test_a_batch_is_sent_concurrently_and_returned_in_order(server):
    for i in range(4):  # each answer takes 0.3 s on the server; the scripted order is the arrival order
        server.answer("/v1/completions", (200, text_answer(f"answer {i}"), {}, 0.3))
    backend = backend_for(server, max_concurrency=4)
    outs = backend.complete([f"prompt {i}" for i in range(4)], seeds=[10, None, 12, 13])
    assert server.max_in_flight >= 2  # requests overlapped at the server
    answered = {body["prompt"]: i for i, (_, body, _) in enumerate(server.requests)}
    assert [out.text for out in outs] == [f"answer {answered[f'prompt {i}']}" for i in range(4)]
    # each request carries its own prompt's seed, whatever order they arrived in
    assert {body["prompt"]: body.get("seed") for _, body, _ in server.requests} == {
        "prompt 0": 10, "prompt 1": None, "prompt 2": 12, "prompt 3": 13}
    backend.close()


def test_server_errors_and_rate_limits_are_retried_with_backoff(server, monkeypatch):
    delays = []
    monkeypatch.setattr(openai_backend, "sleep", delays.append)
    server.answer("/v1/completions", (503, {"error": {"message": "loading model"}}),
                  (429, {"error": {"message": "slow down"}}, {"Retry-After": "3"}), text_answer("ok"))
    [out] = backend_for(server).complete(["hi"])
    assert out.text == "ok" and server.routes() == ["/v1/completions"] * 3
    assert 0.375 <= delays[0] <= 0.5 and delays[1] == 3.0  # backoff with jitter, then the server's Retry-After


def test_retries_are_bounded_and_end_in_one_line(server):
    server.answer("/v1/chat/completions", (500, {"error": {"message": "CUDA out of memory"}}))
    with pytest.raises(EndpointError) as caught:
        backend_for(server, max_retries=1).complete([[{"role": "user", "content": "hi"}]])
    message = str(caught.value)
    assert "\n" not in message and "HTTP 500: CUDA out of memory" in message and "after 2 attempts" in message
    assert len(server.requests) == 2


def test_a_client_error_is_not_retried_and_names_the_servers_message(server):
    server.answer("/v1/completions", (400, {"error": {"message": "max_tokens is too large: 9999"}}))
    with pytest.raises(EndpointError, match=r"HTTP 400: max_tokens is too large: 9999$"):
        backend_for(server).complete(["hi"], SamplingParams(max_new_tokens=9999))
    assert len(server.requests) == 1


def test_an_unreachable_server_is_one_line_error():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = OpenAIBackend(f"http://127.0.0.1:{port}", "tiny", max_retries=1)
    assert backend.base_url == f"http://127.0.0.1:{port}/v1"  # the API root gets its /v1
    with pytest.raises(EndpointUnreachable) as caught:
        backend.complete(["hi"])
    message = str(caught.value)
    assert message.startswith(f"http://127.0.0.1:{port}/v1/completions: unreachable (")
    assert "after 2 attempts; is the server running?" in message and "\n" not in message


def test_a_silent_server_times_out(server):
    server.answer("/v1/completions", (200, text_answer(), {}, 2.0))
    with pytest.raises(EndpointUnreachable, match=r"no answer within timeout_s=0.3 s \(after 1 attempt;"):
        backend_for(server, timeout_s=0.3, max_retries=0).complete(["hi"])


def test_text_goes_to_chat_when_the_server_has_no_completions_route(server):
    server.answer("/v1/chat/completions", chat_answer("from chat"))  # /v1/completions: 404
    backend = backend_for(server)
    with pytest.warns(UserWarning, match="has no /completions route"):
        [out] = backend.complete(["plain text"])
    assert out.text == "from chat"
    assert server.requests[1][1]["messages"] == [{"role": "user", "content": "plain text"}]
    backend.complete(["again"])  # remembered: no second probe of /completions
    assert server.routes() == ["/v1/completions", "/v1/chat/completions", "/v1/chat/completions"]


def test_a_wrong_base_url_says_so(server):
    with pytest.raises(EndpointError, match=r"404 Not Found.*is base_url the API root"):
        backend_for(server, text_as_chat=True).complete(["hi"])


def test_count_tokens_uses_the_servers_tokenizer_when_it_has_one(server):
    server.answer("/tokenize", {"count": 5, "tokens": [1, 2, 3, 4, 5], "max_model_len": 2048})  # vLLM's answer
    backend = backend_for(server)
    assert backend.count_tokens("hello there world") == 5
    assert backend.count_tokens("hello there world") == 5  # memoised
    assert server.routes() == ["/tokenize", "/tokenize"]  # the probe, then one real count
    assert server.requests[1][1] == {"model": "tiny", "prompt": "hello there world"}


def test_count_tokens_estimates_without_a_tokenizer_route(server):
    backend = backend_for(server)
    assert backend.count_tokens("x" * 41) == 11  # ceil(41 / 4)
    assert server.routes() == ["/tokenize", "/extras/tokenize", "/tokenize"]  # each probed once, no retries
    assert backend.count_tokens("y" * 8) == 2 and len(server.requests) == 3


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(ValueError, match="base_url must be an http"):
        OpenAIBackend("localhost:8000", "tiny")
    with pytest.raises(ValueError, match="max_retries must be >= 0"):
        OpenAIBackend("http://127.0.0.1:8000/v1", "tiny", max_retries=-1)


def test_an_lm_agent_acts_through_the_backend(server):
    """The agent side of the endpoint: prompts go out as chat, the answer's action is played.
    (A real model through a real server: test_openai_server.py.)"""
    import gymnasium as gym

    from lmgym.agents.lm import LMAgent
    from lmgym.agents.runner import run_episode

    server.answer("/v1/chat/completions", chat_answer("Thought: the key is here.\nAction: take iron key"),
                  chat_answer("Thought: now find the door.\nAction: go east"))
    agent = LMAgent("tiny", backend="openai", base_url=server.url, backend_kwargs={"max_context": 2048},
                    max_new_tokens=32)
    episode = run_episode(gym.make("lmgym/KeyDoor-v0"), agent, seed=0, max_steps=3)
    # the scripted answer repeats "go east"; where that is not admissible it is snapped to the closest
    assert [step.action for step in episode.steps] == ["take iron key", "go east", "go west"]
    assert [json.loads(step.agent_json)["snapped"] for step in episode.steps] == [False, False, True]
    assert episode.steps[0].reasoning == "the key is here." and episode.steps[0].prompt_tokens == 20
    chats = [body for route, body, _ in server.requests if route == "/v1/chat/completions"]
    assert len(chats) == 3 and chats[0]["stop"] == ["\nObservation:"] and chats[0]["model"] == "tiny"
    assert "You see: an iron key" in chats[0]["messages"][-1]["content"]  # the first observation went out


# --- the server's context ---------------------------------------------------------------------

def transcript(turns):
    """A system message, the task, then `turns` assistant/user pairs (KeyDoor-like)."""
    messages = [{"role": "system", "content": "Play the game."}, {"role": "user", "content": "Task: open the door."}]
    for k in range(turns):
        messages += [{"role": "assistant", "content": f"Action: go {k}"}, {"role": "user", "content": f"Room {k}."}]
    return messages


def llama_cpp_python_refusal(window, prompt_tokens, completion=8):
    message = (f"This model's maximum context length is {window} tokens. However, you requested "
               f"{prompt_tokens + completion} tokens ({prompt_tokens} in the messages, {completion} in the "
               f"completion). Please reduce the length of the messages or completion.")
    return 400, {"error": {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}}


@pytest.mark.parametrize("route, answer", [
    ("/props", {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}),  # llama.cpp's server
    ("/v1/models", {"object": "list", "data": [{"id": "tiny", "max_model_len": 4096}]}),  # vLLM, SGLang
])
def test_the_window_is_read_where_the_server_reports_it(server, route, answer):
    server.get_script[route] = (200, answer)
    backend = backend_for(server)
    assert backend.max_context == 4096 and backend.max_context == 4096  # asked once
    assert route in server.gets and len(server.gets) <= 2
    assert backend_for(server, max_context=1024).max_context == 1024  # a given window: no probe needed


def test_a_refusal_teaches_the_window_and_the_history_is_cut_from_the_left(server):
    """llama-cpp-python reports its context nowhere but in the refusal: the backend learns it
    there, drops the oldest turns (keeping the system message and the task) and sends again.
    The session's next prompts keep the same beginning while they fit, then are cut again
    before they are sent."""
    server.answer("/extras/tokenize", {"tokens": [0] * 10})  # every message counts 10 tokens
    server.answer("/v1/chat/completions", llama_cpp_python_refusal(100, 130), chat_answer("Action: go north"))
    backend = backend_for(server)
    assert backend.max_context is None  # /props and /v1/models: 404
    params = SamplingParams(max_new_tokens=8)

    def chats():
        return [body["messages"] for route, body, _ in server.requests if route == "/v1/chat/completions"]

    def sent_after(messages):
        [out] = backend.complete([messages], params, sessions=["episode"])
        return chats()[-1], out

    sent, out = sent_after(transcript(4))
    assert out.text == "Action: go north" and backend.max_context == 100
    assert chats()[0] == transcript(4) and len(chats()) == 2  # refused, then fitted:
    # 130 tokens in 10 messages of 10: the template adds 3 a message (13 each). The head (system,
    # task) takes 26 of the 92 left beside the completion; the turns are cut, two messages at a
    # time, to at most 3/4 of the other 66, so 2 messages stay
    assert sent == transcript(4)[:2] + transcript(4)[-2:] and out.extra["dropped_messages"] == 6
    assert sent_after(transcript(5))[0] == transcript(5)[:2] + transcript(5)[-4:]  # the same beginning
    assert sent_after(transcript(6))[0] == transcript(6)[:2] + transcript(6)[-2:]  # cut again, before sending
    backend.end_session("episode")
    assert backend.complete([transcript(5)], params)[0].extra["dropped_messages"] == 8  # no session: a new cut


def test_llama_cpps_own_refusal_and_text_prompts_are_fitted_too(server):
    refusal = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                         "type": "exceed_context_size_error", "n_prompt_tokens": 300, "n_ctx": 128}}
    server.answer("/v1/completions", (400, refusal), text_answer("ok"))
    backend = backend_for(server)  # no tokenizer route: 4 characters a token
    [out] = backend.complete(["x" * 1200], SamplingParams(max_new_tokens=28))
    sent = server.requests[-1][1]["prompt"]
    assert out.text == "ok" and backend.max_context == 128 and sent == "x" * len(sent)
    assert 0.7 * 4 * 100 <= len(sent) <= 0.75 * 4 * 100  # 3/4 of the 100 tokens beside the completion
    assert out.extra["dropped_chars"] == 1200 - len(sent)


def test_a_prompt_that_cannot_fit_is_one_line(server):
    server.answer("/v1/chat/completions", llama_cpp_python_refusal(50, 400))
    with pytest.raises(EndpointError) as caught:
        backend_for(server).complete([transcript(0)], SamplingParams(max_new_tokens=8))
    message = str(caught.value)
    assert "\n" not in message and "maximum context length is 50 tokens" in message and "cannot cut" in message
    assert server.routes().count("/v1/chat/completions") == 1  # nothing left to drop: not sent again
