"""OPRO (Yang et al. 2024, "Large Language Models as Optimizers", ICLR, arXiv:2309.03409): the
optimiser LM reads a meta-prompt of past prompts with their scores, sorted ascending (at most
the 20 best, Sec. 5.1), and writes new prompts; each step proposes `per_step` of them (the paper
uses 8), all judged and added to the history.

Here the editor reads that history (`edit_context(history=...)`) and writes an edit of the best
prompt so far; it sees no judge feedback, only scores.
"""

from __future__ import annotations

import numpy as np

from lmgym.agents.prompt_search.base import PromptEvaluator, draw_seeds
from lmgym.agents.prompt_search.editor import EditorSearchAgent


class OPRO(EditorSearchAgent):
    name = "opro"

    def __init__(self, budget: int = 32, per_step: int = 4, **editor_kwargs):
        super().__init__(budget, **editor_kwargs)
        self.per_step = int(per_step)

    def search(self, evaluator: PromptEvaluator, start: str, rng: np.random.Generator) -> str:
        [seed] = draw_seeds(rng, 1)
        history = {start: evaluator.evaluate(start, seed).reward}
        while evaluator.remaining > 0:
            best = max(history, key=history.get)
            scored = [(score, prompt) for prompt, score in history.items()]
            for prompt in self.propose([best] * self.per_step, history=scored):
                history[prompt] = evaluator.evaluate(prompt, seed).reward
        return max(history, key=history.get)
