"""The editor: the language model that writes prompt edits, for AoD and for the LLM-based baselines.

Every LM operator of the search methods is one call of the same backend: it reads an *edit
context* (the task, the prompt to change, and what the method lets it see: the judge's feedback
for AoD and GEPA's reflective mutation, a mutation instruction for PromptBreeder, past prompts
sorted by score for OPRO, nothing more for EvoPrompt's mutation) and writes one edit in the
env's grammar (``append: <sentence>``, ``replace "<old>" with "<new>"``, ``delete sentence <k>``,
``replace prompt: <text>``; `lmgym.envs.promptedit.edits`). What differs between methods is only
what the context shows, so the baselines and AoD share one editor and differ in one place.

`LMEditor` runs any `lmgym.models.backends` model: a tiny AR editor trained here
(examples/train_aod_editor.py), SmolLM2-135M-Instruct (``model="smollm2"``, chat-prompted with
`EDITOR_INSTRUCTIONS`), a masked-diffusion or LLaDA folder, or an OpenAI-compatible endpoint.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Protocol

from lmgym.agents.prompt_search.base import SEED_BOUND, PromptSearchAgent, edited
from lmgym.models.backends import SamplingParams, make_text_backend

EDITOR_INSTRUCTIONS = (
    "You improve the prompt of a frozen generator that writes JSON records. Reply with exactly one edit "
    'command and nothing else: "append: <sentence>", "replace \\"<old>\\" with \\"<new>\\"", '
    '"delete sentence <k>" or "replace prompt: <text>".')
#: Most past prompts an OPRO context lists (OPRO, Yang et al. 2024, arXiv:2309.03409, Sec. 5.1:
#: the meta-prompt keeps the 20 highest-scoring instructions, sorted ascending by score).
MAX_HISTORY = 20


def edit_context(task: str, prompt: str, *, feedback: str | None = None, instruction: str | None = None,
                 history: Sequence[tuple[float, str]] | None = None) -> str:
    """The text the editor reads. `history` is (score, prompt) pairs, shown ascending by score
    (the best last, next to the prompt to edit), at most `MAX_HISTORY` of the best."""
    lines = [f"Task: {task}"]
    if history:
        best = sorted(history, key=lambda pair: pair[0])[-MAX_HISTORY:]
        lines.append("Past prompts, worst to best:")
        lines += [f"score {score:.3f}: {text}" for score, text in best]
    if instruction:
        lines.append(f"Instruction: {instruction}")
    lines.append(f"Prompt: {prompt}")
    if feedback:
        lines.append(f"Feedback: {' '.join(feedback.split())}")
    lines.append("Edit:")
    return "\n".join(lines)


class Editor(Protocol):
    def write(self, contexts: Sequence[str], seed: int) -> list[str]:
        """One edit command per context; a pure function of (contexts, seed)."""


class LMEditor:
    """An `Editor` over a text backend: samples one line per context.

    Args:
        model: a checkpoint folder (the tiny editor, an MDLM or LLaDA folder), ``"smollm2"``,
            or, with ``base_url``, the endpoint's model name.
        temperature: sampling temperature (the methods need varied edits: 1.0 by default).
        max_new_tokens: longest edit written.
        backend_kwargs: passed to `lmgym.models.backends.make_text_backend`.
    """

    def __init__(self, model: str = "smollm2", temperature: float = 1.0, max_new_tokens: int = 64,
                 **backend_kwargs: Any):
        self.backend = make_text_backend(model=model, **backend_kwargs)
        self.params = SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature, stop=("\n",))

    def render(self, context: str) -> Any:
        from lmgym.models.tokenizer import is_lmgym_tokenizer

        tokenizer = getattr(self.backend, "tokenizer", None)
        trained_here = tokenizer is not None and is_lmgym_tokenizer(tokenizer)  # reads the bare context
        if getattr(self.backend, "chat", False) and not trained_here:
            return [{"role": "system", "content": EDITOR_INSTRUCTIONS}, {"role": "user", "content": context}]
        return context

    def write(self, contexts: Sequence[str], seed: int) -> list[str]:
        completions = self.backend.complete([self.render(c) for c in contexts], self.params,
                                            seeds=[seed + i for i in range(len(contexts))])
        return [c.text.strip().splitlines()[0].strip() if c.text.strip() else "" for c in completions]

    def close(self) -> None:
        self.backend.close()


#: The tiny editor trained here on edit demonstrations (a zoo name: examples/train_aod_editor.py --install).
DEFAULT_EDITOR = "aod_editor"
#: Editors by short name: the tiny editor as trained on demonstrations, and after the policy
#: gradient of `lmgym.training.pg` (examples/train_aod.py --editor-pg ... --install).
EDITORS = {"tiny": DEFAULT_EDITOR, "tiny-pg": "aod_editor_pg"}


@functools.lru_cache(maxsize=4)
def shared_editor(model: str, temperature: float, max_new_tokens: int) -> LMEditor:
    """One editor per (model, settings) in a process: the baselines of a benchmark share it."""
    return LMEditor(model, temperature=temperature, max_new_tokens=max_new_tokens)


class EditorSearchAgent(PromptSearchAgent):
    """A search method whose operators ask the editor for edits (`edit_context` says what it sees).

    Args:
        budget: generator calls.
        editor: the editor model: a name of `EDITORS` (``"tiny"``, the default, or ``"tiny-pg"``),
            ``"smollm2"``, any backend folder (AR, masked-diffusion, LLaDA-style), or an `Editor` object.
        temperature: the editor's sampling temperature.
    """

    def __init__(self, budget: int = 32, editor: str | Editor | None = None, temperature: float = 1.0,
                 max_new_tokens: int = 64):
        super().__init__(budget)
        if editor is not None and not isinstance(editor, str):  # a ready Editor object
            self.editor = editor
        else:
            name = str(editor or DEFAULT_EDITOR)
            self.editor = shared_editor(EDITORS.get(name, name), float(temperature), int(max_new_tokens))

    def propose(self, prompts: Sequence[str], *, feedback: Sequence[str | None] | None = None,
                instructions: Sequence[str | None] | None = None,
                history: Sequence[tuple[float, str]] | None = None) -> list[str]:
        """Each prompt after one editor edit (the prompt itself where the edit is refused)."""
        n = len(prompts)
        feedback, instructions = feedback or [None] * n, instructions or [None] * n
        contexts = [edit_context(self.env.task.description, p, feedback=f, instruction=i, history=history)
                    for p, f, i in zip(prompts, feedback, instructions)]
        commands = self.editor.write(contexts, int(self.rng.integers(SEED_BOUND)))
        return [edited(p, c) or p for p, c in zip(prompts, commands)]
