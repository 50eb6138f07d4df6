"""The search baselines that need no language model: the static prompt, random library edits and
greedy hill-climbing, each over the `PromptEvaluator` contract (`lmgym.agents.prompt_search.base`).
"""

from __future__ import annotations

import numpy as np

from lmgym.agents.prompt_search.base import PromptEvaluator, PromptSearchAgent, draw_seeds, edited
from lmgym.envs.promptedit.search import greedy_hill_climb

#: Edits per random walk before it restarts from the starting prompt (the env's T).
WALK_LENGTH = 8


class StaticPrompt(PromptSearchAgent):
    """The starting prompt, never edited: no generator call."""

    name = "static"

    def search(self, evaluator: PromptEvaluator, start: str, rng: np.random.Generator) -> str:
        return start


class RandomEdits(PromptSearchAgent):
    """Random walks of `WALK_LENGTH` admissible library edits from the starting prompt, every
    prompt judged on one search seed; the best judged prompt is submitted.

    Registered as ``random-edits``; benchmark specs name it ``random`` (``{name: random, kind:
    random-edits}``), since the registry's ``random`` is the generic `RandomAgent`, which takes
    one env step (one generator call) per edit and knows no budget.
    """

    name = "random-edits"

    def search(self, evaluator: PromptEvaluator, start: str, rng: np.random.Generator) -> str:
        [seed] = draw_seeds(rng, 1)
        library = self.env.library
        evaluator.evaluate(start, seed)
        while evaluator.remaining > 0:
            prompt = start
            for _ in range(WALK_LENGTH):
                commands = library.admissible_commands(prompt)
                if not commands:
                    break
                prompt = edited(prompt, commands[int(rng.integers(len(commands)))])
                evaluator.evaluate(prompt, seed)
        return evaluator.best()[0]


class HillClimb(PromptSearchAgent):
    """Greedy hill-climbing over the edit library (`lmgym.envs.promptedit.search`): every
    admissible edit judged on one search seed, the best kept while it improves; it stops at a
    local optimum or when the budget is spent (then the best prompt judged so far)."""

    name = "hill-climb"

    def search(self, evaluator: PromptEvaluator, start: str, rng: np.random.Generator) -> str:
        [seed] = draw_seeds(rng, 1)
        climb = greedy_hill_climb(self.env, start, steps=self.budget, search_seed=seed,
                                  judge=lambda prompt, s: evaluator.evaluate(prompt, s).reward)
        return climb.prompt
