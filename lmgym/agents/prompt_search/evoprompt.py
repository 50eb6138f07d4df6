"""EvoPrompt (Guo et al. 2024, "Connecting Large Language Models with Evolutionary Algorithms Yields
Powerful Prompt Optimizers", ICLR, arXiv:2309.08532; github.com/beeevita/EvoPrompt): a GA and a
DE over a population of prompts (default size 10), the language model acting as the operators.

Our operators work on prompts as sentence lists (`lmgym.envs.promptedit.edits.split_sentences`)
and the editor (`lmgym.agents.prompt_search.editor`) writes every mutation; what EvoPrompt's
single LLM instruction does in one call is split into a sentence-level crossover and one editor
edit. The editor sees no judge feedback here (EvoPrompt's operators see only prompts).

* GA (the paper's Alg. 2 with its GA template): roulette-wheel selection of two parents by
  score, crossover, then mutation by the LM; the next population is the top-N of parents and
  children (top-k survival).
* DE (its DE template): for member i and two other members b, c as donors, (1) find where b and
  c differ, (2) mutate only those parts, (3) merge them with the current best prompt,
  (4) cross the result with member i; the trial replaces i when it scores at least as well.
"""

from __future__ import annotations

import numpy as np

from lmgym.agents.prompt_search.base import PromptEvaluator, draw_seeds, sentence_crossover
from lmgym.agents.prompt_search.editor import EditorSearchAgent
from lmgym.envs.promptedit.edits import split_sentences
from lmgym.errors import InputError

POPULATION = 10  # EvoPrompt's default population size


class EvolutionarySearch(EditorSearchAgent):
    """Shared by GA and DE: the initial population (the starting prompt and editor mutations of
    it) judged on one search seed; the best member is submitted."""

    def __init__(self, budget: int = 32, population: int = POPULATION, **editor_kwargs):
        super().__init__(budget, **editor_kwargs)
        self.population = int(population)

    def initial_population(self, evaluator: PromptEvaluator, start: str, seed: int) -> list[str]:
        members = [start] + self.propose([start] * (self.population - 1))
        for member in members:
            evaluator.evaluate(member, seed)
        return members


class EvoPromptGA(EvolutionarySearch):
    name = "evoprompt-ga"

    def search(self, evaluator: PromptEvaluator, start: str, rng: np.random.Generator) -> str:
        [seed] = draw_seeds(rng, 1)
        population = self.initial_population(evaluator, start, seed)
        while evaluator.remaining > 0:
            scores = np.array([evaluator.evaluate(p, seed).reward for p in population])
            children = []
            for _ in range(len(population)):
                first, second = roulette(scores, rng, 2)
                children.append(sentence_crossover(population[first], population[second], rng))
            children = self.propose(children)
            for child in children:
                evaluator.evaluate(child, seed)
            pool = list(dict.fromkeys(population + children))  # top-k survival over parents and children
            population = sorted(pool, key=lambda p: -evaluator.evaluate(p, seed).reward)[: self.population]
        return population[0]


def roulette(scores: np.ndarray, rng: np.random.Generator, count: int) -> list[int]:
    """`count` indices drawn with probability proportional to score (uniform when all scores are
    0): roulette-wheel selection, distinct while the population has enough members."""
    weights = np.clip(scores, 0, None) + 1e-12
    return [int(i) for i in rng.choice(len(scores), size=count, replace=count > len(scores), p=weights / weights.sum())]


def donor_difference(first: str, second: str) -> list[str]:
    """The sentences only one of the two donors has (where DE mutates), in order."""
    a, b = split_sentences(first), split_sentences(second)
    return [s for s in a if s not in b] + [s for s in b if s not in a]


class EvoPromptDE(EvolutionarySearch):
    name = "evoprompt-de"

    def __init__(self, budget: int = 32, population: int = POPULATION, **editor_kwargs):
        if int(population) < 3:
            raise InputError(f"evoprompt-de needs a population of at least 3 (a member and two donors), got {population}")
        super().__init__(budget, population, **editor_kwargs)

    def search(self, evaluator: PromptEvaluator, start: str, rng: np.random.Generator) -> str:
        [seed] = draw_seeds(rng, 1)
        population = self.initial_population(evaluator, start, seed)
        while evaluator.remaining > 0:
            for i in range(len(population)):
                score = lambda p: evaluator.evaluate(p, seed).reward
                best = max(population, key=score)
                b, c = (population[j] for j in rng.choice([j for j in range(len(population)) if j != i], 2, replace=False))
                trial = sentence_crossover(self.mutated_merge(best, b, c), population[i], rng)
                if score(trial) >= score(population[i]):
                    population[i] = trial
        return max(population, key=lambda p: evaluator.evaluate(p, seed).reward)

    def mutated_merge(self, best: str, b: str, c: str) -> str:
        """Steps 1-3: mutate the sentences where donors b and c differ (the editor edits the
        prompt made of them alone), and add what results to the best prompt."""
        different = donor_difference(b, c)
        if not different:  # identical donors: nothing to mutate
            return best
        [mutated] = self.propose([" ".join(different)])
        kept = split_sentences(best)
        return " ".join(kept + [s for s in split_sentences(mutated) if s not in kept])
