"""PromptBreeder (Fernando et al. 2023, "Promptbreeder: Self-Referential Self-Improvement via Prompt
Evolution", arXiv:2309.16797): a population of units, each a task prompt with the mutation
prompt that made it, evolved by binary tournaments.

Per tournament (the paper's Sec. 3): draw two units, judge both, and overwrite the loser with a
mutated copy of the winner. Mutation is the paper's direct first-order mutation: the editor
applies the winner's mutation prompt to its task prompt. With probability `hyper_rate` the copy
first gets a new mutation prompt (hyper-mutation). The paper has the LM rewrite mutation prompts;
ours draws a new one from the seed list `MUTATION_INSTRUCTIONS` (the paper's zero-order
hyper-mutation from its initial set), since the editor is trained to apply instructions, not
to write them.
"""

from __future__ import annotations

import numpy as np

from lmgym.agents.prompt_search.base import PromptEvaluator, draw_seeds
from lmgym.agents.prompt_search.editor import EditorSearchAgent
from lmgym.agents.prompt_search.teacher import MUTATION_INSTRUCTIONS

UNITS = 10


class PromptBreeder(EditorSearchAgent):
    name = "promptbreeder"

    def __init__(self, budget: int = 32, units: int = UNITS, hyper_rate: float = 0.5, **editor_kwargs):
        super().__init__(budget, **editor_kwargs)
        self.units, self.hyper_rate = int(units), float(hyper_rate)

    def search(self, evaluator: PromptEvaluator, start: str, rng: np.random.Generator) -> str:
        [seed] = draw_seeds(rng, 1)
        instructions = [MUTATION_INSTRUCTIONS[int(rng.integers(len(MUTATION_INSTRUCTIONS)))] for _ in range(self.units)]
        prompts = self.propose([start] * self.units, instructions=instructions)
        units = list(zip(prompts, instructions))  # (task prompt, mutation prompt)
        fitness = lambda unit: evaluator.evaluate(unit[0], seed).reward
        while evaluator.remaining > 0:
            first, second = (int(i) for i in rng.choice(len(units), 2, replace=False))
            winner, loser = (first, second) if fitness(units[first]) >= fitness(units[second]) else (second, first)
            prompt, instruction = units[winner]
            if rng.random() < self.hyper_rate:
                instruction = MUTATION_INSTRUCTIONS[int(rng.integers(len(MUTATION_INSTRUCTIONS)))]
            [child] = self.propose([prompt], instructions=[instruction])
            units[loser] = (child, instruction)
            fitness(units[loser])
        return max(units, key=fitness)[0]
