"""One protocol for "a model that writes text", whatever runs it.

A `TextBackend` takes a batch of prompts and returns one `Completion` per prompt: the text,
how many prompt and completion tokens it cost, the seconds it took and, where the backend can
give them, the log-probability of each completion token. Agents (`lmgym.agents.lm`), prompt
optimisers and teams are written against this protocol only, so the same agent runs on

* ``"hf"``: a Hugging Face causal LM from a local folder (`lmgym.policies.backends.hf`), with
  the KV cache of each session kept across turns so a growing transcript is not re-encoded;
* ``"diffusion"``: a masked-diffusion LM from a local folder (`lmgym.policies.backends.diffusion`,
  the LM core's `generate` / `fast_generate`);
* ``"openai"``: any OpenAI-compatible HTTP endpoint (vLLM, SGLang, llama.cpp's server, hosted
  APIs; `lmgym.policies.backends.openai`).

A prompt is either plain text (sent as is: what the tiny models trained here read) or a list of
chat messages ``[{"role": "system"|"user"|"assistant", "content": ...}]``, which a backend
renders with the model's chat template (or sends as chat, for an endpoint). ``session`` names
the conversation a prompt continues (an episode): backends that cache keep one cache per
session and drop it on `end_session`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

#: Chat turns, as the OpenAI API and Hugging Face chat templates take them.
Messages = list[dict[str, str]]
Prompt = Union[str, Messages]


@dataclass(frozen=True)
class SamplingParams:
    """How to decode. Temperature 0 is greedy; ``stop`` strings end a completion (not included)."""

    max_new_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    #: Return the log-probability of each completion token (where the backend can).
    logprobs: bool = False


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    #: log p of each completion token under the model (None where not asked or not available).
    token_logprobs: list[float] | None = None
    #: "stop" (EOS or a stop string) or "length" (max_new_tokens reached).
    finish_reason: str = "stop"
    #: Prompt tokens served from a session's KV cache instead of being encoded again.
    cached_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class TextBackend(ABC):
    """Prompts in; texts, token counts and seconds out."""

    name: str = "backend"
    #: Whether prompts given as chat messages are rendered with a chat template.
    chat: bool = False

    @abstractmethod
    def complete(self, prompts: Sequence[Prompt], params: SamplingParams = SamplingParams(), *,
                 seed: int | None = None, sessions: Sequence[Hashable] | None = None) -> list[Completion]:
        """One `Completion` per prompt, in order. ``seed`` makes sampling repeatable;
        ``sessions[i]`` is the conversation prompt i continues (None: no caching)."""

    @abstractmethod
    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in this backend's tokenizer (an estimate where it has none)."""

    def end_session(self, session: Hashable) -> None:
        """Forget what was cached for `session` (an episode ended)."""

    def close(self) -> None:
        """Release models, connections and caches."""


#: Backends by name: "module:Class" entry points, imported only when used.
BACKENDS: dict[str, str] = {
    "hf": "lmgym.policies.backends.hf:HFBackend",
    "diffusion": "lmgym.policies.backends.diffusion:DiffusionBackend",
    "openai": "lmgym.policies.backends.openai:OpenAIBackend",
}
