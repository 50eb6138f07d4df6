"""Agents of Diffusion (AoD): the prompt-optimisation loop that reads the judge's words.

Each cycle the optimiser reads the prompt and the judge's feedback on its last batch, edits the
prompt, the frozen generator writes a new batch and the judge answers (`PromptEditEnv`). Here
the loop runs over the budgeted `PromptEvaluator` contract, like every baseline
(`lmgym.agents.prompt_search`): walks of `WALK_LENGTH` edits (the env's episode length T) from
the starting prompt, every batch on one search seed, restarted until the budget of generator
calls is spent; the best judged prompt is submitted. Two optimisers:

* `AoDPolicy` (``aod-ppo``): a MaskablePPO policy over the edit library, trained on training
  seeds by ``lmgym train ppo lmgym/PromptEdit-<Task>-v0`` (`lmgym.training.ppo`; the recipe is
  examples/train_aod.py). Its observation is the env's text (prompt, feedback, samples) as
  token ids read by a text encoder (`lmgym.components.sb3`). `AoDScalar` (``aod-scalar``) is the
  same policy trained and run with ``show_feedback=False``: the judge's words are removed, so it
  learns from the scalar reward alone.
* `AoDEditor` (``aod-editor``): the editor LM (`lmgym.agents.prompt_search.editor`) writes the
  edit from the feedback; zero-shot (the tiny editor as trained on demonstrations) or after the
  group-baseline policy gradient of `lmgym.training.pg` (``editor=<its checkpoint>``).

The AoD paper's RL algorithm and edit space are not public; these are documented choices
(docs/aod.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lmgym.agents.prompt_search.base import (SEED_BOUND, Evaluation, PromptEvaluator, PromptSearchAgent, draw_seeds,
                                             edited)
from lmgym.agents.prompt_search.editor import EditorSearchAgent, edit_context
from lmgym.agents.prompt_search.simple import WALK_LENGTH
from lmgym.envs.promptedit.env import render_observation
from lmgym.errors import InputError
from lmgym.models import zoo

#: Zoo folder of the policies trained by examples/train_aod.py --install, one per task and variant.
POLICY_ZOO = "aod"


class AoDLoop(PromptSearchAgent):
    """Walks of `WALK_LENGTH` edits, each written by `next_edit` from the last judgment."""

    def next_edit(self, current: Evaluation) -> str:
        raise NotImplementedError

    def search(self, evaluator: PromptEvaluator, start: str, rng: np.random.Generator) -> str:
        [seed] = draw_seeds(rng, 1)
        while evaluator.remaining > 0:
            current = evaluator.evaluate(start, seed)
            for _ in range(WALK_LENGTH):
                prompt = edited(current.prompt, self.next_edit(current))
                if prompt is None:  # a refused edit ends the walk (no generator call)
                    break
                current = evaluator.evaluate(prompt, seed)
        return evaluator.best()[0]


class AoDEditor(AoDLoop, EditorSearchAgent):
    """The editor writes each edit from the prompt and the judge's feedback."""

    name = "aod-editor"

    def next_edit(self, current: Evaluation) -> str:
        context = edit_context(self.env.task.description, current.prompt, feedback=current.feedback)
        [command] = self.editor.write([context], int(self.rng.integers(SEED_BOUND)))
        return command


class AoDPolicy(AoDLoop):
    """A MaskablePPO policy over the edit library picks each edit.

    Args:
        budget: generator calls.
        path: the policy's ``model.zip``, or the name of an installed policy folder in
            the zoo's `POLICY_ZOO` folder (e.g. ``ppo-ar-{task}``, trained against the AR generator);
            ``{task}`` is replaced by the env's task name (default: ``ppo-{task}``, or
            ``scalar-{task}`` for `AoDScalar`).
        deterministic: take the most likely edit instead of sampling.
    """

    name = "aod-ppo"
    show_feedback = True

    def __init__(self, budget: int = 32, path: str | None = None, deterministic: bool = False):
        super().__init__(budget)
        variant = "ppo" if self.show_feedback else "scalar"
        path = path or variant + "-{task}"
        installed_name = len(Path(path).parts) == 1 and not path.endswith(".zip")  # a folder name, not a path
        self.path_template = str(zoo.root() / POLICY_ZOO / path / "model.zip") if installed_name else path
        self.deterministic = deterministic
        self.policies: dict[str, object] = {}

    def policy(self):
        from lmgym.agents.ppo_agent import PPOAgent

        task = self.env.task_name
        if task not in self.policies:
            path = self.path_template.format(task=task)
            if not Path(path).exists():
                raise InputError(f"{self.name}: no policy at {path} (train it: python examples/train_aod.py --task {task})")
            self.policies[task] = PPOAgent(path, deterministic=self.deterministic)
        agent = self.policies[task]
        agent.rng = self.rng  # its sampling draws from this episode's stream
        return agent

    def next_edit(self, current: Evaluation) -> str:
        env = self.env
        feedback = current.feedback if self.show_feedback else None
        observation = render_observation(env.goal, current.prompt, feedback, list(current.samples))
        info = {"task": env.goal, "admissible_actions": env.library.admissible_commands(current.prompt)}
        if not info["admissible_actions"]:
            return ""
        return self.policy().decide(observation, info).action


class AoDScalar(AoDPolicy):
    """`AoDPolicy` without the judge's words: trained and run with ``show_feedback=False``."""

    name = "aod-scalar"
    show_feedback = False
