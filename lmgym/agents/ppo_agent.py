"""A trained MaskablePPO policy (from `lmgym.training.ppo`) acting as an lmgym `Agent`.

The agent rebuilds the wrappers' arrays from ``(observation, info)`` with the same
`TokenEncoder` settings the policy was trained with (``encoder.json``, written by the trainer
next to ``model.zip`` and looked up in the model's folder or the one above, where checkpoints
live), so the benchmark runner can use it on the plain text env like any other agent.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from lmgym.agents.base import Agent, Decision
from lmgym.envs.sb3_wrappers import TokenEncoder, action_mask, warn_if_cut

ENCODER_FILE = "encoder.json"


def load_encoder(model_path: str | Path) -> TokenEncoder:
    """The `TokenEncoder` saved beside a model (its folder, or the parent of checkpoints/)."""
    model_path = Path(model_path)
    for folder in (model_path.parent, model_path.parent.parent):
        if (folder / ENCODER_FILE).exists():
            return TokenEncoder(**json.loads((folder / ENCODER_FILE).read_text()))
    raise FileNotFoundError(f"no {ENCODER_FILE} beside {model_path} (written by `lmgym train ppo`)")


class PPOAgent(Agent):
    """Plays the admissible action a MaskablePPO policy picks.

    Args:
        path: the saved model (``model.zip`` or a checkpoint).
        deterministic: take the policy's most likely action instead of sampling. Sampling
            (the default: the policy was trained stochastic, and a reactive policy that always
            takes the same exit can loop forever) draws from the agent's own generator, seeded
            by `reset`, so a benchmark row is still a function of the seed.
    """

    name = "ppo"

    def __init__(self, path: str, deterministic: bool = False):
        from sb3_contrib import MaskablePPO  # torch stays out of `import lmgym.agents`

        self.path = str(path)
        self.deterministic = deterministic
        self.encoder = load_encoder(path)
        self.model = MaskablePPO.load(self.path, device="cpu")
        self.reset(seed=None)

    def decide(self, observation: str, info: dict[str, Any]) -> Decision:
        start = time.perf_counter()
        actions = info.get("admissible_actions") or []
        if not actions:
            return Decision("", reasoning="No admissible actions are listed.", seconds=time.perf_counter() - start)
        warn_if_cut(self, actions, self.encoder.max_actions, f"PPOAgent {self.path} in {self.env_id}")
        probs = self.action_probabilities(observation, info)  # (max_actions,), zero where masked
        index = int(np.argmax(probs)) if self.deterministic else int(self.rng.choice(len(probs), p=probs))
        return Decision(actions[index], reasoning=f"The policy gives this action probability {probs[index]:.2f}.",
                        seconds=time.perf_counter() - start)

    def action_probabilities(self, observation: str, info: dict[str, Any]) -> np.ndarray:
        """The masked policy's distribution over the admissible-action slots (float64, sums to 1)."""
        import torch

        obs_tensor, _ = self.model.policy.obs_to_tensor(self.encoder.encode(observation, info))
        with torch.no_grad():
            dist = self.model.policy.get_distribution(obs_tensor, action_masks=action_mask(info, self.encoder.max_actions))
        probs = dist.distribution.probs[0].double().numpy()
        return probs / probs.sum()
