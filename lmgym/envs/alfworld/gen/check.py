"""The checks every generated game must pass: the expert wins, and both engines agree.

* `expert_check`: lmgym's native ALFWorld engine plays the game's walkthrough from reset; every
  command must be admissible, the game must be won at the last command and not before, within
  ALFWorld-v0's step limit. Then the project's ALFWorld expert (`lmgym.envs.alfworld.expert`,
  the one behind ``info["expert_action"]``) must win from reset within the limit too.
  Milliseconds per game.
* `engines_check`: the native and the official engine (TextWorld's PddlEnv + ALFWorld's
  Demangler, `lmgym.envs.alfworld.textworld_engine`) play the same commands side by side
  (`lmgym.envs.alfworld.differential.walk`): the walkthrough, then optional seeded random walks
  with invalid commands mixed in; feedback, admissible commands and ``won`` must be equal at
  every step, and the official engine must also see the walkthrough win. Seconds per game (the
  official engine grounds the problem with Fast Downward), so CI samples and the benchmark
  runs whole batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lmgym.envs.alfworld.engine import NativeEngine
from lmgym.envs.alfworld.expert import Expert
from lmgym.envs.alfworld.gen.generator import Household
from lmgym.envs.registry import ENVS

#: The registered step limit; walkthroughs and the expert must win within it.
STEP_LIMIT = ENVS["lmgym/ALFWorld-Gen-v0"].max_episode_steps


class GameCheckError(AssertionError):
    """A generated game failed a check (the message names the seed and the step)."""


def expert_check(household: Household, *, step_limit: int = STEP_LIMIT) -> int:
    """Play the walkthrough, then the expert, in the native engine; return the walkthrough's
    length or raise `GameCheckError`."""
    walkthrough = household.game["walkthrough"]
    if len(walkthrough) > step_limit:
        raise GameCheckError(f"seed {household.seed}: walkthrough of {len(walkthrough)} steps > limit {step_limit}")
    engine = NativeEngine(household.game)
    step = engine.reset()
    if step.won:
        raise GameCheckError(f"seed {household.seed}: won at reset")
    for index, command in enumerate(walkthrough, start=1):
        if command not in step.admissible_commands:
            raise GameCheckError(f"seed {household.seed}: step {index} {command!r} is not admissible")
        step = engine.step(command)
        if step.won != (index == len(walkthrough)):
            raise GameCheckError(f"seed {household.seed}: won={step.won} after step {index} {command!r}")
    engine = NativeEngine(household.game)
    engine.reset()
    expert = Expert(engine)
    for _ in range(step_limit):
        step = engine.step(expert.act()[0])
        if step.won:
            return len(walkthrough)
    raise GameCheckError(f"seed {household.seed}: the ALFWorld expert did not win within {step_limit} steps")


@dataclass
class EnginesReport:
    steps: int = 0  # compared steps, resets included
    mismatches: list = field(default_factory=list)  # differential.Mismatch
    native_seconds: float = 0.0
    official_seconds: float = 0.0


def engines_check(household: Household, *, random_walks: int = 0, walk_steps: int = 20) -> EnginesReport:
    """Play the walkthrough and `random_walks` seeded random walks in both engines and compare.

    Raises `GameCheckError` if the expert check fails or at the first disagreement (``won`` is
    compared at every step, so the official engine wins with the walkthrough exactly when the
    native one does).
    """
    from lmgym.envs.alfworld.differential import walk
    from lmgym.envs.alfworld.textworld_engine import TextWorldEngine

    expert_check(household)  # the native engine wins with it; equal `won` at each step below
    official = TextWorldEngine(household.game)  # does the official engine too
    report = EnginesReport()
    runs = [walk(household.game, list(household.game["walkthrough"]), official=official)]
    runs += [walk(household.game, seed=household.seed * 1000 + k, max_steps=walk_steps, official=official)
             for k in range(random_walks)]
    for run in runs:
        report.steps += len(run.commands) + 1
        report.mismatches += run.mismatches
        report.native_seconds += run.native_seconds
        report.official_seconds += run.official_seconds
    if report.mismatches:
        m = report.mismatches[0]
        raise GameCheckError(f"seed {household.seed}: engines differ at step {m.step} {m.command!r} on {m.field}:\n"
                             f"  native   {m.native!r}\n  official {m.official!r}")
    return report
