"""Any OpenAI-compatible HTTP endpoint as a `TextBackend`: vLLM, SGLang, llama.cpp, hosted APIs.

Chat prompts (a list of messages) go to ``POST {base_url}/chat/completions``; text prompts go to
``POST {base_url}/completions``, the raw-text endpoint the tiny models trained here need. A
server without ``/completions`` (it answers 404: many hosted chat-only APIs) gets each text
prompt as one user message from then on, and says so once in a warning; the server's chat
template then wraps the text, so the model reads something slightly different.

What the response reports is what the `Completion` carries: the text, the token counts of its
``usage`` (a server that sends none is counted with `count_tokens`), ``finish_reason``, the
prompt tokens its prefix cache served (``usage.prompt_tokens_details.cached_tokens``, where the
server reports it: vLLM with ``--enable-prompt-tokens-details``) and, with
``SamplingParams.logprobs``, the log-probability of each completion token (``logprobs.content``
of a chat answer; ``logprobs.token_logprobs`` of a text one).

``complete`` sends the prompts of a batch concurrently, ``max_concurrency`` requests at a time
(a thread pool), in the order given; results come back in that order. Servers batch concurrent
requests themselves (vLLM's and SGLang's continuous batching; llama.cpp's server decodes up to
its ``--n_parallel`` slots at once, and queues the rest). ``seeds[i]`` is sent as request i's
``seed``, so a completion depends on its prompt and seed only, never on the batch it came in
(where the server honours ``seed``: vLLM, SGLang and llama.cpp do; hosted APIs at best try).
``sessions`` is accepted and ignored: servers cache prompt prefixes on their own (vLLM's
automatic prefix caching, llama.cpp's ``cache_prompt``).

Failures: a refused connection, a timeout, HTTP 408, 409, 429 or any 5xx is retried up to
``max_retries`` times with exponential backoff (0.5 s doubling to at most 8 s, with jitter, or
the server's ``Retry-After`` when it sends one up to 8 s): the OpenAI Python SDK's policy
(openai-python ``_base_client.py`` ``_should_retry`` and ``_constants.py``). Any other error
answer, or running out of retries, raises `EndpointError` with one line naming the URL and the
reason (the server's own message where it sends one); nothing is retried silently forever.

Only the standard library (urllib) speaks HTTP, so the backend adds no dependency.
"""

from __future__ import annotations

import json
import math
import os
import random
import threading
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from time import perf_counter, sleep
from typing import Any

from lmgym.models.backends import Completion, Prompt, SamplingParams, TextBackend

#: HTTP statuses worth retrying (openai-python ``_should_retry``): timeout, conflict, rate
#: limit, and every server error.
RETRY_STATUSES = frozenset({408, 409, 429})
INITIAL_RETRY_DELAY_S = 0.5
MAX_RETRY_DELAY_S = 8.0
#: Characters per token of English text for the estimate when the server has no tokenizer
#: endpoint (OpenAI's rule of thumb: "one token is roughly 4 characters of English text").
CHARS_PER_TOKEN = 4.0


class EndpointError(ConnectionError):
    """The endpoint answered an error, or none; the message is one line."""


class EndpointUnreachable(EndpointError):
    """No answer at all: the connection was refused or reset, or the timeout passed."""


class _NotFound(EndpointError):
    """HTTP 404: the route does not exist on this server."""


class OpenAIBackend(TextBackend):
    """An OpenAI-compatible server, speaking HTTP through urllib.

    Args:
        base_url: the API root, as the OpenAI SDK takes it (``http://127.0.0.1:8000/v1``); a URL
            with no path gets ``/v1`` appended.
        model: the model name the server expects (vLLM: the ``--served-model-name`` or path).
        api_key_env: environment variable holding the API key, sent as ``Authorization: Bearer``
            when set (local servers need none). The key itself is never stored in a rollout.
        timeout_s: seconds to wait for one response (a completion of max_new_tokens included).
        max_retries: retries after the first attempt of a request (0: none).
        max_concurrency: requests of one batch in flight at once.
        text_as_chat: send text prompts as a single user message (True), to ``/completions``
            (False), or to ``/completions`` until the server answers 404 there (None).
        max_context: the server's context length in tokens (vLLM's ``--max-model-len``,
            llama.cpp's ``--n_ctx``), so an agent cuts its transcript to fit; None: unknown.
    """

    name = "openai"
    chat = True

    def __init__(self, base_url: str = "http://127.0.0.1:8000/v1", model: str = "default", *,
                 api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 120.0, max_retries: int = 2,
                 max_concurrency: int = 8, text_as_chat: bool | None = None,
                 max_context: int | None = None) -> None:
        if max_retries < 0 or max_concurrency < 1 or timeout_s <= 0:
            raise ValueError("max_retries must be >= 0, max_concurrency >= 1 and timeout_s > 0")
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {base_url!r}")
        self.base_url = base_url.rstrip("/") + ("/v1" if parsed.path in ("", "/") else "")
        #: scheme://host:port, where servers put their non-OpenAI routes (/tokenize, /health)
        self.server_root = f"{parsed.scheme}://{parsed.netloc}"
        # a proxy (http_proxy=...) can never reach this machine's loopback: bypass it there
        loopback = parsed.hostname in ("localhost", "::1") or (parsed.hostname or "").startswith("127.")
        self._opener = urllib.request.build_opener(*([urllib.request.ProxyHandler({})] if loopback else []))
        self.model = model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_concurrency = max_concurrency
        self.text_as_chat = text_as_chat
        self.max_context = max_context
        self._jitter = random.Random()  # timing only: results never depend on it
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._tokenize_route: tuple[str, str] | None = None  # found on first use; ("", "") = none
        self._count = lru_cache(maxsize=4096)(self._count_uncached)

    # ----------------------------------------------------------------- the protocol

    def complete(self, prompts: Sequence[Prompt], params: SamplingParams = SamplingParams(), *,
                 seeds: Sequence[int | None] | None = None,
                 sessions: Sequence[Hashable | None] | None = None) -> list[Completion]:
        seeds = list(seeds) if seeds is not None else [None] * len(prompts)
        if len(seeds) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
        if len(prompts) <= 1 or self.max_concurrency == 1:
            return [self._complete_one(prompt, params, seed) for prompt, seed in zip(prompts, seeds)]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="lmgym-openai")
        return list(self._pool.map(lambda pair: self._complete_one(pair[0], params, pair[1]), zip(prompts, seeds)))

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` by the server's tokenizer where it has a route for it (llama.cpp's
        ``/tokenize``, llama-cpp-python's ``/extras/tokenize``, vLLM's and SGLang's
        ``/tokenize``), else ``ceil(len(text) / 4)`` (`CHARS_PER_TOKEN`). Results are memoised."""
        return self._count(text)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    # ----------------------------------------------------------------- requests

    def _complete_one(self, prompt: Prompt, params: SamplingParams, seed: int | None) -> Completion:
        as_chat = not isinstance(prompt, str) or self.text_as_chat is True
        messages = prompt if not isinstance(prompt, str) else [{"role": "user", "content": prompt}]
        body: dict[str, Any] = {"model": self.model, "max_tokens": params.max_new_tokens,
                                "temperature": params.temperature, "top_p": params.top_p}
        if params.stop:
            body["stop"] = list(params.stop)
        if seed is not None:
            body["seed"] = int(seed)
        start = perf_counter()
        if not as_chat:
            try:
                logprobs = {"logprobs": 1} if params.logprobs else {}  # the legacy API's top-n count
                answer = self._post("/completions", {**body, "prompt": prompt, **logprobs})
            except _NotFound:
                warnings.warn(f"{self.base_url} has no /completions route: text prompts are sent to "
                              f"/chat/completions as one user message", stacklevel=2)
                self.text_as_chat, as_chat = True, True
        if as_chat:
            # top_logprobs 0: the sampled tokens' log-probs only (llama-cpp-python returns none without it)
            logprobs = {"logprobs": True, "top_logprobs": 0} if params.logprobs else {}
            try:
                answer = self._post("/chat/completions", {**body, "messages": messages, **logprobs})
            except _NotFound as missing:
                raise EndpointError(f"{missing} (is base_url the API root, ending in /v1?)") from None
        seconds = perf_counter() - start
        return self._parse(answer, prompt, as_chat, params.logprobs, seconds)

    def _parse(self, answer: dict[str, Any], prompt: Prompt, as_chat: bool, want_logprobs: bool,
               seconds: float) -> Completion:
        try:
            choice = answer["choices"][0]
            text = (choice["message"].get("content") or "") if as_chat else choice["text"]
        except (KeyError, IndexError, TypeError, AttributeError):
            raise EndpointError(f"{self.base_url}: the answer has no choices[0] text: {_snippet(answer)}") from None
        usage = answer.get("usage") or {}
        prompt_tokens = usage.get("prompt_tokens")
        if prompt_tokens is None:
            prompt_tokens = self.count_tokens(prompt if isinstance(prompt, str) else
                                              "\n".join(m.get("content", "") for m in prompt))
        completion_tokens = usage.get("completion_tokens")
        if completion_tokens is None:
            completion_tokens = self.count_tokens(text)
        token_logprobs = None
        if want_logprobs and choice.get("logprobs"):
            if as_chat:
                token_logprobs = [float(entry["logprob"]) for entry in choice["logprobs"].get("content") or []]
            else:
                token_logprobs = [float(value) for value in choice["logprobs"].get("token_logprobs") or []]
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        finish = choice.get("finish_reason") or "stop"
        return Completion(text=text, prompt_tokens=int(prompt_tokens), completion_tokens=int(completion_tokens),
                          seconds=seconds, token_logprobs=token_logprobs,
                          finish_reason="length" if finish == "length" else "stop", cached_tokens=int(cached),
                          extra={"model": answer.get("model"), "server_finish_reason": finish})

    def _post(self, route: str, body: dict[str, Any], *, root: str | None = None,
              retries: int | None = None) -> dict[str, Any]:
        """POST JSON to ``{base_url}{route}`` (or ``{root}{route}``); the decoded JSON answer.

        Retries (``max_retries`` unless ``retries`` is given) what the module docstring lists;
        a 404 raises `_NotFound` (the caller may try another route), no answer after the last
        try `EndpointUnreachable`, anything else `EndpointError`.
        """
        retries = self.max_retries if retries is None else retries
        url = (root or self.base_url) + route
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode()
        for attempt in range(retries + 1):
            retry_after, unreachable = None, False
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method="POST")
                with self._opener.open(request, timeout=self.timeout_s) as response:
                    payload = response.read()
                try:
                    return json.loads(payload)
                except json.JSONDecodeError:
                    raise EndpointError(f"{url}: the answer is not JSON: {_snippet(payload)}") from None
            except urllib.error.HTTPError as error:
                message = _server_message(error)
                if error.code == 404:
                    raise _NotFound(f"{url}: 404 Not Found: {message}") from None
                if error.code not in RETRY_STATUSES and error.code < 500:
                    raise EndpointError(f"{url}: HTTP {error.code}: {message}") from None
                reason = f"HTTP {error.code}: {message}"
                retry_after = _retry_after_s(error.headers.get("Retry-After"))
            except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
                cause = getattr(error, "reason", error)
                unreachable = True
                if isinstance(cause, TimeoutError):
                    reason = f"no answer within timeout_s={self.timeout_s:g} s"
                else:
                    reason = f"unreachable ({cause})"
            if attempt < retries:
                delay = min(MAX_RETRY_DELAY_S, INITIAL_RETRY_DELAY_S * 2 ** attempt)
                delay = retry_after if retry_after is not None else delay * (1 - 0.25 * self._jitter.random())
                sleep(delay)
        tries = f"{retries + 1} attempt" + ("s" if retries else "")
        if unreachable:
            raise EndpointUnreachable(f"{url}: {reason} (after {tries}; is the server running?)")
        raise EndpointError(f"{url}: {reason} (after {tries})")

    # ----------------------------------------------------------------- tokenizer

    def _count_uncached(self, text: str) -> int:
        if self._tokenize_route is None:
            self._tokenize_route = self._find_tokenize_route()
        route, field = self._tokenize_route
        if route:
            answer = self._post(route, {"model": self.model, field: text}, root=self.server_root)
            if "count" in answer:
                return int(answer["count"])
            return len(answer.get("tokens", []))
        return math.ceil(len(text) / CHARS_PER_TOKEN)

    def _find_tokenize_route(self) -> tuple[str, str]:
        """The first tokenizer route the server answers: (route, name of the text field).

        Each probe is tried once (a route that errors is not there); no answer at all is
        raised, not mistaken for "no tokenizer"."""
        candidates = [("/tokenize", "prompt"),  # vLLM, SGLang
                      ("/extras/tokenize", "input"),  # llama-cpp-python
                      ("/tokenize", "content")]  # llama.cpp's own server
        for route, field in candidates:
            try:
                answer = self._post(route, {"model": self.model, field: "a"}, root=self.server_root, retries=0)
            except EndpointUnreachable:
                raise
            except EndpointError:
                continue
            if isinstance(answer, dict) and ("tokens" in answer or "count" in answer):
                return route, field
        return "", ""


def _server_message(error: urllib.error.HTTPError) -> str:
    """The error message an OpenAI-style server put in its body, on one line."""
    try:
        body = error.read()
    except OSError:
        body = b""
    try:
        decoded = json.loads(body)
        detail = decoded.get("error", decoded.get("detail", decoded.get("message", decoded)))
        if isinstance(detail, dict):
            detail = detail.get("message", detail)
        return _snippet(detail)
    except (json.JSONDecodeError, AttributeError):
        return _snippet(body) or error.reason or "no message"


def _snippet(value: Any, limit: int = 200) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value if isinstance(value, str) \
        else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _retry_after_s(header: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (seconds form), capped at `MAX_RETRY_DELAY_S`."""
    try:
        return min(MAX_RETRY_DELAY_S, max(0.0, float(header))) if header else None
    except ValueError:
        return None
