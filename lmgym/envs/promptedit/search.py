"""Greedy hill-climbing over the edit library: the search baseline for PromptEdit.

From the current prompt, try every admissible library edit, judge each candidate's batch
(one generation per candidate, all with the same `search_seed` so candidates are compared on
paired samples) and keep the best if it beats the current prompt's reward; stop when no edit
improves or after `steps` edits. This is coordinate ascent with a first-order neighbourhood,
the simplest of the discrete prompt-search baselines (cf. GrIPS, Prasad et al. 2023, which
hill-climbs over phrase-level edits with a held-out score).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from lmgym.envs.promptedit.edits import apply_edit
from lmgym.envs.promptedit.env import PromptEditEnv


@dataclass
class ClimbResult:
    prompt: str
    reward: float  # on the search seed
    edits: list[str] = field(default_factory=list)
    evaluations: int = 0  # generator calls spent


def greedy_hill_climb(env: PromptEditEnv, start_prompt: str, steps: int, search_seed: int,
                      progress: Callable[[str], None] | None = None,
                      judge: Callable[[str, int], float] | None = None) -> ClimbResult:
    """Climb from `start_prompt` with at most `steps` library edits (see the module docstring).

    `progress`, when given, receives one line per judged candidate and per step taken (each
    candidate costs a generator call: seconds with the default diffusion generator). `judge`
    (prompt, seed) -> reward replaces ``env.evaluate`` (a budgeted evaluator of
    `lmgym.agents.prompt_search`, which may stop the climb by raising).
    """
    say = progress or (lambda line: None)
    judge = judge or (lambda text, seed: env.evaluate(text, seed)[0].reward)
    prompt = start_prompt
    result = ClimbResult(prompt, judge(prompt, search_seed), evaluations=1)
    for _ in range(steps):
        candidates = []
        commands = env.library.admissible_commands(prompt)  # sorted: ties break the same way every run
        for k, command in enumerate(commands, start=1):
            candidate = apply_edit(prompt, command).prompt
            reward = judge(candidate, search_seed)
            result.evaluations += 1
            candidates.append((reward, command, candidate))
            say(f"  step {len(result.edits) + 1}, candidate {k}/{len(commands)}: reward {reward:.3f}  {command[:70]}")
        if not candidates:
            break
        reward, command, candidate = max(candidates, key=lambda c: c[0])  # first of the best in sorted order
        if reward <= result.reward:
            say(f"  no edit beats reward {result.reward:.3f}: stop")
            break
        say(f"  keep {command[:70]} (reward {result.reward:.3f} -> {reward:.3f})")
        prompt = candidate
        result.prompt, result.reward = candidate, reward
        result.edits.append(command)
    return result
