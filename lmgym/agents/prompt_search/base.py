"""The contract every prompt-search method runs on: evaluate(prompt, seed) under a budget of
generator calls, and the agent that runs a method inside a benchmark episode.

A method is one short loop ``search(evaluator, start, rng) -> prompt`` (the shape of GEPA's
optimiser, gepa-ai/gepa ``src/gepa/core/engine.py``: propose, evaluate, accept, repeat until the
budget is spent). `PromptEvaluator.evaluate` is its only way to learn anything about a prompt:
one call generates one batch with the env's frozen generator and judges it (reward, metrics and
the judge's feedback text). Calls are counted exactly: a (prompt, seed) pair already judged is
answered from memory for free (the generator is a pure function of its arguments, see
docs/promptedit.md), and the call after the last one the budget allows raises `BudgetSpent`,
which ends the search. Every method therefore spends at most ``budget`` generator calls, and a
test checks the count against the generator's own.

`PromptSearchAgent` runs a method in a `lmgym.envs.promptedit.env.PromptEditEnv` episode: at
its first step it searches (search seeds drawn from the agent's own stream, never the env's),
then submits the best prompt found as ``replace prompt: <prompt>``; the env judges it on a batch
seed from the env's stream, the held-out evaluation the benchmark row reports. A spec runs these
agents with ``max_steps: 1`` (studies/specs/aod.yaml). A method that ends on the starting
prompt submits an unchanged prompt, which the env refuses; its row then reports the judgment of
the starting prompt at reset, also a batch of the env's stream.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lmgym.agents.base import Agent, Decision
from lmgym.envs.promptedit.edits import apply_edit, split_sentences
from lmgym.errors import InputError

#: Batch seeds of a search are drawn below this bound from the agent's stream.
SEED_BOUND = 2**31 - 1
#: Requests answered from memory in a row after which a search is stuck (its operators keep
#: proposing prompts already judged) and ends, as when its budget is spent.
MAX_REPEATS = 32


class BudgetSpent(Exception):
    """The search asked for a generator call beyond its budget (or is stuck on judged prompts)."""


@dataclass(frozen=True)
class Evaluation:
    """One judged batch: what a method learns from a generator call."""

    prompt: str
    seed: int
    reward: float
    feedback: str
    metrics: dict[str, float]
    samples: tuple[str, ...] = ()  # the first records of the batch, as the env's observation shows them


@dataclass
class PromptEvaluator:
    """``evaluate(prompt, seed)``: one generator call per new (prompt, seed), at most `budget`.

    `curve` records, after every call, ``(calls, best mean reward of any prompt so far)``, the
    mean over the seeds each prompt was judged on: the reward-against-generator-calls curve.
    """

    env: Any  # a PromptEditEnv (env.unwrapped): its `evaluate(prompt, seed)` and judge
    budget: int
    calls: int = 0
    curve: list[tuple[int, float]] = field(default_factory=list)
    cycle_seconds: list[float] = field(default_factory=list)
    repeats: int = 0  # requests in a row answered from memory
    _memo: dict[tuple[str, int], Evaluation] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.budget < 0:
            raise InputError(f"budget must be >= 0 generator calls, got {self.budget}")

    @property
    def remaining(self) -> int:
        return self.budget - self.calls

    def evaluate(self, prompt: str, seed: int) -> Evaluation:
        key = (prompt, int(seed))
        if key in self._memo:
            self.repeats += 1
            if self.repeats > MAX_REPEATS:
                raise BudgetSpent(f"no new prompt in {MAX_REPEATS} requests: the search is stuck")
            return self._memo[key]
        self.repeats = 0
        if self.calls >= self.budget:
            raise BudgetSpent(f"{self.budget} generator calls spent")
        start = time.perf_counter()
        verdict, texts = self.env.evaluate(prompt, int(seed))
        self.cycle_seconds.append(time.perf_counter() - start)
        self.calls += 1
        result = Evaluation(prompt, int(seed), float(verdict.reward), verdict.feedback, dict(verdict.metrics),
                            tuple(texts[: self.env.num_samples]))
        self._memo[key] = result
        self.curve.append((self.calls, self.best()[1]))
        return result

    def scores(self, prompt: str) -> dict[int, float]:
        """Seed -> reward of every batch of `prompt` judged so far."""
        return {seed: e.reward for (p, seed), e in self._memo.items() if p == prompt}

    def mean_reward(self, prompt: str) -> float:
        rewards = list(self.scores(prompt).values())
        return float(np.mean(rewards)) if rewards else float("-inf")

    def best(self) -> tuple[str, float]:
        """The judged prompt with the highest mean reward (first judged among ties)."""
        prompts = list(dict.fromkeys(p for p, _ in self._memo))
        if not prompts:
            return "", float("-inf")
        best = max(prompts, key=self.mean_reward)
        return best, self.mean_reward(best)


def draw_seeds(rng: np.random.Generator, count: int) -> list[int]:
    """`count` distinct batch seeds from the agent's stream."""
    seeds: list[int] = []
    while len(seeds) < count:
        seed = int(rng.integers(SEED_BOUND))
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def edited(prompt: str, command: str) -> str | None:
    """`prompt` after the edit `command`, or None when the env's grammar refuses it."""
    result = apply_edit(prompt, command)
    return result.prompt if result.valid else None


def sentence_crossover(first: str, second: str, rng: np.random.Generator) -> str:
    """Uniform crossover of two prompts at sentence level: the first sentence (the task prompt)
    of `first`, then every sentence both share, and each sentence only one of them has with
    probability 1/2, in the order they appear (first's, then second's)."""
    a, b = split_sentences(first), split_sentences(second)
    head, rest = a[:1], list(dict.fromkeys(a[1:] + [s for s in b if s not in a[:1]]))
    shared = set(a) & set(b)
    kept = [s for s in rest if s in shared or rng.random() < 0.5]
    return " ".join(head + kept)


class PromptSearchAgent(Agent):
    """Runs `search` on the episode's env within `budget` generator calls, then submits the best.

    Subclasses implement ``search(evaluator, start, rng) -> prompt``; the agent records the
    calls spent, the reward-against-calls curve and the seconds of a generate + judge cycle in
    the step's ``Decision.extra`` (the benchmark transcript's ``agent_json``).
    """

    name = "prompt-search"

    def __init__(self, budget: int = 32):
        if int(budget) < 0:
            raise InputError(f"budget must be >= 0 generator calls, got {budget}")
        self.budget = int(budget)
        self.env = None
        self.submitted: str | None = None
        self.reset(seed=None)

    def reset(self, *, seed: int | None = None, env_id: str | None = None) -> None:
        super().reset(seed=seed, env_id=env_id)
        self.submitted = None

    def use_env(self, slot: int, env: Any) -> None:
        unwrapped = env.unwrapped
        if not hasattr(unwrapped, "evaluate") or not hasattr(unwrapped, "library"):
            raise InputError(f"{type(self).__name__} searches prompts of a PromptEdit env, not {type(unwrapped).__name__}")
        self.env = unwrapped

    def search(self, evaluator: PromptEvaluator, start: str, rng: np.random.Generator) -> str:
        raise NotImplementedError

    def run_search(self, start: str) -> tuple[str, PromptEvaluator]:
        """The method's prompt from `start` and the evaluator that counted its calls."""
        if self.env is None:
            raise InputError(f"{type(self).__name__} needs the env (the runner hands it over with use_env)")
        evaluator = PromptEvaluator(self.env, self.budget)
        try:
            prompt = self.search(evaluator, start, self.rng)
        except BudgetSpent:
            prompt = evaluator.best()[0] or start
        return prompt, evaluator

    def decide(self, observation: str, info: dict[str, Any]) -> Decision:
        start_time = time.perf_counter()
        if self.submitted is None:
            self.submitted, evaluator = self.run_search(info["prompt"])
            extra = {"generator_calls": evaluator.calls, "budget": self.budget, "curve": evaluator.curve,
                     "seconds_per_cycle": float(np.mean(evaluator.cycle_seconds)) if evaluator.cycle_seconds else None,
                     "search_reward": evaluator.mean_reward(self.submitted) if evaluator.calls else None}
        else:  # the search is done: later steps (a spec without max_steps: 1) resubmit it
            extra = {"generator_calls": 0, "budget": self.budget}
        return Decision(f"replace prompt: {self.submitted}", reasoning=f"{self.name}: submit the best prompt found.",
                        seconds=time.perf_counter() - start_time, extra=extra)
