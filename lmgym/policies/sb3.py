"""The SB3 features extractor that reads `lmgym.envs.sb3_wrappers.TokenIds` observations.

A bag-of-embeddings encoder: every text row (task, observation, each admissible-action slot) is
the masked mean of its token embeddings, passed through a small MLP. The state vector and the
per-slot action vectors are concatenated, so the policy head of MaskablePPO can score slot
``i`` by what action ``i`` says, not only by its position in the sorted list.

Mean pooling (order-free) is enough for the short command grammars of the text games and keeps
a PPO update at a few milliseconds on one CPU core.
"""

from __future__ import annotations

import torch
from gymnasium import spaces
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from lmgym.envs.sb3_wrappers import PAD_ID


def masked_mean(embedded: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Mean of `embedded` (..., T, D) over the non-padding positions of `ids` (..., T)."""
    keep = (ids != PAD_ID).unsqueeze(-1).to(embedded.dtype)  # (..., T, 1)
    return (embedded * keep).sum(-2) / keep.sum(-2).clamp(min=1.0)  # (..., D)


class TextFeaturesExtractor(BaseFeaturesExtractor):
    """Features ``[state, action_1, ..., action_N]`` of size ``hidden * (1 + N)``.

    Args:
        observation_space: the `TokenIds` Dict space (keys ``task``, ``observation``,
            ``actions``; ``actions`` has shape ``(N, L)``).
        embed_dim: token embedding width.
        hidden: width of the state vector and of each action vector.
    """

    def __init__(self, observation_space: spaces.Dict, embed_dim: int = 32, hidden: int = 64):
        num_actions = observation_space["actions"].shape[0]
        super().__init__(observation_space, features_dim=hidden * (1 + num_actions))
        vocab_size = int(observation_space["observation"].high.max()) + 1
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD_ID)
        self.state = nn.Sequential(nn.Linear(2 * embed_dim, hidden), nn.Tanh())
        self.action = nn.Sequential(nn.Linear(embed_dim, hidden), nn.Tanh())

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        # SB3's preprocessing turns Box observations into floats; ids are exact below 2**24.
        task = observations["task"].long()  # (B, T)
        text = observations["observation"].long()  # (B, T)
        actions = observations["actions"].long()  # (B, N, L)
        state = torch.cat([masked_mean(self.embed(task), task), masked_mean(self.embed(text), text)], dim=-1)
        state = self.state(state)  # (B, H)
        slots = self.action(masked_mean(self.embed(actions), actions))  # (B, N, H)
        return torch.cat([state, slots.flatten(1)], dim=-1)  # (B, H * (1 + N))
