"""GEPA (Agrawal et al. 2025, "GEPA: Reflective Prompt Evolution Can Outperform Reinforcement
Learning", arXiv:2507.19457; gepa-ai/gepa, ``src/gepa/gepa_utils.py`` and
``src/gepa/proposer/reflective_mutation/``): reflective mutation from the judge's words, Pareto
parent selection, acceptance on strict minibatch improvement.

Per iteration (the paper's Alg. 1 and 2):

1. Parent: for every Pareto seed (GEPA's D_pareto, here `pareto_seeds` batch seeds), the
   candidates with the best reward on it form that seed's front; candidates that every front
   holding them also holds another front member of are dominated and dropped; a parent is drawn
   with probability proportional to the number of fronts it is on.
2. Minibatch: `minibatch` (3, GEPA's default) seeds from the feedback pool (D_feedback,
   `feedback_seeds` seeds, walked in shuffled epochs); the parent is judged on them.
3. Reflection: the editor reads the parent and the judge's feedback on its worst minibatch
   batch and writes an edit.
4. The child is judged on the same minibatch and kept only when its summed reward is strictly
   higher than the parent's; a kept child is judged on every Pareto seed and joins the pool.

The optional merge of two front candidates (``merge=True``) is a sentence-level crossover of two
front members (GEPA's merge combines the components two descendants of a common ancestor
changed; our candidates have one component, the prompt, so the merge works on its sentences),
judged and accepted by the same minibatch rule. The submitted prompt has the best mean reward on
the Pareto seeds.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from lmgym.agents.prompt_search.base import PromptEvaluator, draw_seeds, sentence_crossover
from lmgym.agents.prompt_search.editor import EditorSearchAgent


def pareto_parents(scores: dict[str, list[float]]) -> Counter:
    """Candidate -> number of per-seed fronts it is on, dominated candidates removed.

    `scores` maps each candidate to its rewards on the Pareto seeds (same order for all).
    """
    candidates = list(scores)
    seeds = len(next(iter(scores.values())))
    fronts = []
    for k in range(seeds):
        top = max(scores[c][k] for c in candidates)
        fronts.append({c for c in candidates if scores[c][k] == top})
    on_front = [c for c in candidates if any(c in front for front in fronts)]

    def dominated(candidate: str, others: set[str]) -> bool:
        return all(front & others for front in fronts if candidate in front)

    kept = set(on_front)
    for candidate in on_front:  # drop dominated candidates one at a time (gepa_utils does the same)
        if len(kept) > 1 and dominated(candidate, kept - {candidate}):
            kept.discard(candidate)
    return Counter({c: sum(c in front for front in fronts) for c in candidates if c in kept})


class GEPA(EditorSearchAgent):
    name = "gepa"

    def __init__(self, budget: int = 32, pareto_seeds: int = 3, feedback_seeds: int = 6, minibatch: int = 3,
                 merge: bool = False, **editor_kwargs):
        super().__init__(budget, **editor_kwargs)
        self.pareto_seeds, self.feedback_seeds, self.minibatch, self.merge = (
            int(pareto_seeds), int(feedback_seeds), int(minibatch), bool(merge))

    def search(self, evaluator: PromptEvaluator, start: str, rng: np.random.Generator) -> str:
        seeds = draw_seeds(rng, self.pareto_seeds + self.feedback_seeds)
        pareto, feedback_pool = seeds[: self.pareto_seeds], seeds[self.pareto_seeds:]
        pool = {start: [evaluator.evaluate(start, s).reward for s in pareto]}
        order: list[int] = []
        iteration = 0
        while evaluator.remaining > 0:
            if len(order) < self.minibatch:  # epochs over the feedback pool, shuffled
                order += [int(i) for i in rng.permutation(len(feedback_pool))]
            batch = [feedback_pool[order.pop(0)] for _ in range(self.minibatch)]
            counts = pareto_parents(pool)
            parents = sorted(counts)  # sorted: the draw does not depend on insertion order
            weights = np.array([counts[p] for p in parents], dtype=float)
            parent = parents[int(rng.choice(len(parents), p=weights / weights.sum()))]
            judged = [evaluator.evaluate(parent, s) for s in batch]
            iteration += 1
            if self.merge and len(parents) > 1 and iteration % 2 == 0:
                first, second = (parents[int(i)] for i in rng.choice(len(parents), 2, replace=False))
                child = sentence_crossover(first, second, rng)
            else:
                worst = min(judged, key=lambda e: e.reward)
                [child] = self.propose([parent], feedback=[worst.feedback])
            if child in pool or not accepts(judged, [evaluator.evaluate(child, s) for s in batch]):
                continue
            pool[child] = [evaluator.evaluate(child, s).reward for s in pareto]
        return max(pool, key=lambda p: float(np.mean(pool[p])))


def accepts(parent, child) -> bool:
    """GEPA's acceptance: the child's summed minibatch reward strictly above the parent's."""
    return sum(e.reward for e in child) > sum(e.reward for e in parent)
