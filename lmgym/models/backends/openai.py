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
Servers cache prompt prefixes on their own (vLLM's automatic prefix caching, llama.cpp's
``cache_prompt``); ``sessions`` only serve to keep a cut history's beginning (below).

The server's context. ``max_context`` is the window an agent cuts its transcript to
(`lmgym.agents.lm` reads it): the ``max_context`` given, else what the server reports on the
first read (llama.cpp's ``GET /props`` ``n_ctx``, vLLM's and SGLang's ``GET /v1/models``
``max_model_len``, or vLLM's ``/tokenize`` answer), else None. A server that reports it
nowhere (llama-cpp-python's) says it when it refuses a prompt: HTTP 400 "This model's maximum
context length is 2048 tokens. However, you requested 2146 tokens (2098 in the messages, 48
in the completion)" (llama.cpp's own server: ``exceed_context_size_error`` with ``n_ctx`` and
``n_prompt_tokens``). The backend learns the window from that answer and, from then on, fits
every prompt before sending it: a chat keeps its system messages and its first user message
(the task), and drops the oldest turns after them, a user and an assistant message at a
time, until the prompt's tokens (counted by the server's tokenizer, the chat template's own
tokens calibrated from the server's count) plus ``max_new_tokens`` fit, with a quarter of the
history's room to spare so that the next turns keep the same beginning, and the server's prefix
cache (a session's next prompt first loses the same turns as its last one); a text prompt
loses its oldest characters. A refused prompt is fitted and sent again (`MAX_FITS` times at
most). A prompt that cannot fit (its system message, first and last turns alone are too long)
raises one `EndpointError` line that names both sizes. ``Completion.extra["dropped_messages"]`` /
``["dropped_chars"]`` say what a fit removed.

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
import re
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
#: Tokens a chat template adds around one message before the server's count calibrates it
#: (SmolLM2's ``<|im_start|>role\n ... <|im_end|>\n``: 5).
MESSAGE_TOKENS = 6
#: A cut leaves the history at most this share of the room it has (as the agent's window does).
KEEP_AFTER_CUT = 0.75
#: Times one prompt is fitted and sent again after the server refuses it as too long.
MAX_FITS = 3
#: How servers word "the prompt does not fit": OpenAI's wording (vLLM, llama-cpp-python) and
#: vLLM's newer one; llama.cpp's server sends numbers (``n_ctx``, ``n_prompt_tokens``) instead.
_WINDOW = re.compile(r"maximum context length is (\d+) tokens")
_PROMPT = re.compile(r"\((\d+) in (?:the messages|your prompt)|request has (\d+) input tokens")


class EndpointError(ConnectionError):
    """The endpoint answered an error, or none; the message is one line."""


class EndpointUnreachable(EndpointError):
    """No answer at all: the connection was refused or reset, or the timeout passed."""


class _NotFound(EndpointError):
    """HTTP 404: the route does not exist on this server."""


class ContextOverflow(EndpointError):
    """The server refused a prompt as longer than its context; what it said of both sizes."""

    def __init__(self, message: str, window: int | None, prompt_tokens: int | None):
        super().__init__(message)
        self.window, self.prompt_tokens = window, prompt_tokens


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
            llama.cpp's ``--n_ctx``), so an agent cuts its transcript to fit; None: the one
            the server reports (see the module docstring), or learns from a refusal.
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
        self._given_context = max_context
        self._reported_context: int | None = None  # what the server said (a route or a refusal)
        self._probed = max_context is not None
        #: tokens the server counts in a chat prompt beyond its messages' own, per message
        self._message_tokens = MESSAGE_TOKENS
        #: per session, the head of its last cut prompt and the messages dropped after it
        self._cuts: dict[Hashable, tuple[list[dict[str, str]], int]] = {}
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
        sessions = list(sessions) if sessions is not None else [None] * len(prompts)
        jobs = list(zip(prompts, seeds, sessions))
        if len(prompts) <= 1 or self.max_concurrency == 1:
            return [self._complete_one(*job, params) for job in jobs]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="lmgym-openai")
        return list(self._pool.map(lambda job: self._complete_one(*job, params), jobs))

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` by the server's tokenizer where it has a route for it (llama.cpp's
        ``/tokenize``, llama-cpp-python's ``/extras/tokenize``, vLLM's and SGLang's
        ``/tokenize``), else ``ceil(len(text) / 4)`` (`CHARS_PER_TOKEN`). Results are memoised."""
        return self._count(text)

    @property
    def max_context(self) -> int | None:
        """The server's context in tokens: the smaller of the one given and the one the server
        reported (asked once, on the first read, when none was given), or None."""
        if not self._probed:
            with self._lock:
                if not self._probed:
                    self._probed = True
                    self._reported_context = self._reported_context or self._probe_context()
        known = [n for n in (self._given_context, self._reported_context) if n]
        return min(known) if known else None

    def end_session(self, session: Hashable) -> None:
        self._cuts.pop(session, None)

    def close(self) -> None:
        self._cuts.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    # ----------------------------------------------------------------- requests

    def _complete_one(self, prompt: Prompt, seed: int | None, session: Hashable | None,
                      params: SamplingParams) -> Completion:
        """Send `prompt`, fitted to the server's context where it is known; a prompt the server
        refuses as too long is fitted again by what the refusal says, and sent again."""
        sent, measured = prompt, None  # measured: (a prompt sent, the tokens the server counted in it)
        last_cut = self._cuts.get(session) if session is not None else None
        for _ in range(MAX_FITS + 1):
            if self.max_context:
                sent = self._fit(prompt, params.max_new_tokens, self.max_context, measured, last_cut)
            try:
                completion = self._send(sent, params, seed)
            except ContextOverflow as overflow:
                self._learn(overflow, sent)
                measured = (sent, overflow.prompt_tokens)
                if not self.max_context:
                    raise EndpointError(f"{overflow} (the server did not say its context: give max_context)") from None
                if self._fit(prompt, params.max_new_tokens, self.max_context, measured, last_cut) == sent:
                    raise EndpointError(f"{overflow} (lmgym cannot cut the prompt further: its system message, "
                                        f"first and last turns alone do not fit; give the server a larger "
                                        f"context or ask for fewer new tokens)") from None
                continue
            if sent is not prompt:
                key = "dropped_chars" if isinstance(prompt, str) else "dropped_messages"
                completion.extra[key] = len(prompt) - len(sent)
                if session is not None and not isinstance(prompt, str):
                    self._cuts[session] = (_head(prompt), len(prompt) - len(sent))
            return completion
        raise EndpointError(f"{self.base_url}: the server refused the prompt as too long {MAX_FITS + 1} times")

    def _learn(self, overflow: ContextOverflow, sent: Prompt) -> None:
        """Keep what a refusal says: the window, and (for a chat) how many tokens the server's
        chat template adds per message beyond the contents."""
        if overflow.window:
            self._reported_context = min(overflow.window, self._reported_context or overflow.window)
        if overflow.prompt_tokens and not isinstance(sent, str):
            extra = overflow.prompt_tokens - self._content_tokens(sent)
            self._message_tokens = max(0, math.ceil(extra / len(sent)))

    def _send(self, prompt: Prompt, params: SamplingParams, seed: int | None) -> Completion:
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

    # ----------------------------------------------------------------- the context

    def _content_tokens(self, messages: Prompt) -> int:
        return sum(self.count_tokens(m.get("content") or "") for m in messages)

    def _prompt_tokens(self, prompt: Prompt, measured: tuple[Prompt, int | None] | None) -> int:
        """The server's count where it gave one for this very prompt, else ours (a chat's
        messages plus the template's tokens per message)."""
        if measured is not None and measured[0] == prompt and measured[1]:
            return measured[1]
        if isinstance(prompt, str):
            return self.count_tokens(prompt)
        return self._content_tokens(prompt) + self._message_tokens * len(prompt)

    def _fit(self, prompt: Prompt, max_new_tokens: int, window: int,
             measured: tuple[Prompt, int | None] | None = None,
             last_cut: tuple[Prompt, int] | None = None) -> Prompt:
        """`prompt` cut from the left so that its tokens plus `max_new_tokens` fit `window`.

        A chat keeps its leading system messages and first user message (the head: the task)
        and its last message; the turns between go oldest first, two messages at a time (so
        user and assistant still alternate). A text loses its oldest characters. A cut goes on
        until the part that can go fills at most `KEEP_AFTER_CUT` of the room it has, as the
        agent's own history window does (`lmgym.agents.prompts.advance_window`): the next
        turns then keep the same beginning, and the server's prefix cache stays valid, instead
        of a cut at every turn. `last_cut` (the head of the session's last prompt, and how many
        messages were dropped after it) is tried first. Returns `prompt` itself when it fits
        or nothing can go."""
        budget = window - max_new_tokens
        if self._prompt_tokens(prompt, measured) <= budget:
            return prompt
        if isinstance(prompt, str):
            text, target = prompt, KEEP_AFTER_CUT * budget
            while len(text) > 1 and (tokens := self._prompt_tokens(text, measured)) > target:
                keep = int(len(text) * max(target, 1) / tokens)
                text = text[-max(1, min(keep, len(text) - 1)):]
            return text
        head = _head(prompt)
        if last_cut is not None and last_cut[0] == head and len(prompt) - last_cut[1] > len(head):
            again = head + list(prompt[len(head) + last_cut[1]:])
            if self._prompt_tokens(again, measured) <= budget:
                return again
        fixed = self._prompt_tokens(head, None)
        target = fixed + KEEP_AFTER_CUT * max(0, budget - fixed)
        kept = list(prompt)
        while len(kept) - len(head) > 2 and self._prompt_tokens(kept, measured) > target:
            del kept[len(head):len(head) + 2]
        return kept if len(kept) != len(prompt) else prompt

    def _probe_context(self) -> int | None:
        """The context the server reports, by the routes that report one; None if none does.
        Each route is asked once and may fail (no route there); no answer at all is None too:
        the first request will say the server is unreachable."""
        for root, route in ((self.server_root, "/props"), (self.base_url, "/models")):
            try:
                answer = self._get(root + route)
            except EndpointError:
                continue
            found = _reported_window(answer)
            if found:
                return found
        return None

    def _get(self, url: str) -> Any:
        request = urllib.request.Request(url, headers=self._headers(), method="GET")
        try:
            with self._opener.open(request, timeout=min(self.timeout_s, 10.0)) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError) as error:
            raise EndpointError(f"{url}: {error}") from None

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

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
        headers = self._headers()
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
                message, detail = _server_message(error)
                if error.code == 404:
                    raise _NotFound(f"{url}: 404 Not Found: {message}") from None
                overflow = _context_overflow(message, detail) if error.code in (400, 413) else None
                if overflow is not None:
                    raise ContextOverflow(f"{url}: HTTP {error.code}: {message}", *overflow) from None
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
            self._reported_context = self._reported_context or _reported_window(answer)  # vLLM's max_model_len
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


def _head(messages: Prompt) -> list[dict[str, str]]:
    """What a cut keeps at the front of a chat: its system messages and first user message."""
    end = 0
    while end < len(messages) and messages[end].get("role") == "system":
        end += 1
    return list(messages[:end + 1])


def _server_message(error: urllib.error.HTTPError) -> tuple[str, dict[str, Any]]:
    """The error message an OpenAI-style server put in its body, on one line, and the error
    object it came in (empty where the body is not one)."""
    try:
        body = error.read()
    except OSError:
        body = b""
    try:
        decoded = json.loads(body)
        detail = decoded.get("error", decoded.get("detail", decoded.get("message", decoded)))
        fields = detail if isinstance(detail, dict) else {}
        if isinstance(detail, dict):
            detail = detail.get("message", detail)
        return _snippet(detail, limit=400), fields
    except (json.JSONDecodeError, AttributeError):
        return _snippet(body) or error.reason or "no message", {}


def _context_overflow(message: str, fields: dict[str, Any]) -> tuple[int | None, int | None] | None:
    """(window, prompt tokens) when an error says the prompt is longer than the context, else
    None: llama.cpp's server sends ``n_ctx`` and ``n_prompt_tokens``, others say it in words."""
    if fields.get("type") == "exceed_context_size_error" or "n_ctx" in fields:
        return _int(fields.get("n_ctx")), _int(fields.get("n_prompt_tokens"))
    window = _WINDOW.search(message)
    if window is None and fields.get("code") != "context_length_exceeded":
        return None
    prompt = _PROMPT.search(message)
    return (int(window.group(1)) if window else None,
            int(prompt.group(1) or prompt.group(2)) if prompt else None)


def _reported_window(answer: Any) -> int | None:
    """The context length in a server's answer: llama.cpp's ``/props`` (``n_ctx``, at the top
    or in ``default_generation_settings``), vLLM's and SGLang's ``/v1/models`` and
    ``/tokenize`` (``max_model_len``)."""
    if not isinstance(answer, dict):
        return None
    for entry in [answer, answer.get("default_generation_settings")] + list(answer.get("data") or []):
        if isinstance(entry, dict):
            for key in ("n_ctx", "max_model_len"):
                if _int(entry.get(key)):
                    return _int(entry.get(key))
    return None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


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
