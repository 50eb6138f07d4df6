"""SB3 networks that read `lmgym.envs.sb3_wrappers.TokenIds` observations.

The policy scores each admissible-action slot by what the action says, in the manner of DRRN
(He et al. 2016, "Deep Reinforcement Learning with a Natural Language Action Space", ACL):
the state (task + observation) and each action text are embedded separately and a small
network scores every (state, action) pair. A plain MLP head over the slot positions would
have to learn that slot 3 means "take apple" in one state and "go to sink" in the next.

* `TextFeaturesExtractor`: every text row is the masked mean of its token embeddings (order-
  free, enough for short command grammars, and fast on one CPU core), each token marked by
  whether the task contains it; features are ``[state (H), score_1 .. score_N]``.
* `SlotScoringPolicy`: sb3-contrib's maskable multi-input actor-critic whose action head reads
  the N scores as logits (masking then removes inadmissible slots); the value head is an MLP
  over all the features.
"""

from __future__ import annotations

from functools import partial

import torch
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from lmgym.envs.sb3_wrappers import PAD_ID


def masked_mean(embedded: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Mean of `embedded` (..., T, D) over the non-padding positions of `ids` (..., T)."""
    keep = (ids != PAD_ID).unsqueeze(-1).to(embedded.dtype)  # (..., T, 1)
    return (embedded * keep).sum(-2) / keep.sum(-2).clamp(min=1.0)  # (..., D)


def task_word_flags(ids: torch.Tensor, task: torch.Tensor) -> torch.Tensor:
    """1 where a token of `ids` (B, ..., T) also occurs in the task row `task` (B, Tt), else 0."""
    flat = ids.reshape(ids.shape[0], -1)  # (B, M)
    present = (flat.unsqueeze(-1) == task.unsqueeze(1)) & (task != PAD_ID).unsqueeze(1)  # (B, M, Tt)
    return (present.any(-1) & (flat != PAD_ID)).long().reshape(ids.shape)  # (B, ..., T)


class TextFeaturesExtractor(BaseFeaturesExtractor):
    """Features ``[state, score_1, ..., score_N]`` of size ``hidden + N``.

    Three measured needs (docs/notes/benchmarks.md, ALFWorld) shape it beyond plain DRRN:

    * Which words of an action are words of the task. ``take spraybottle 3 from cabinet 5``
      is good only when the task names the spraybottle; learning that from embedding products
      alone needs every object seen rewarded. Each token's embedding gets a learned
      ``in task`` / ``not in task`` vector added (the flags are computed here from the ids the
      observation already holds), and each slot gets its count of task words.
    * Which verb: the first token of each action is embedded on its own as well (a mean of
      words loses "take" among four others).
    * What the other actions say: the state includes the element-wise max of the slot vectors,
      so a reactive policy sees that it holds the object (a ``move X to ...`` is listed) even
      when the observation ("You arrive at toilet 1. ...") no longer says so.

    Args:
        observation_space: the `TokenIds` Dict space (keys ``task``, ``observation``,
            ``actions``; ``actions`` has shape ``(N, L)``).
        embed_dim: token embedding width.
        hidden: width of the state and action vectors and of the pair scorer.
    """

    def __init__(self, observation_space: spaces.Dict, embed_dim: int = 32, hidden: int = 64):
        self.num_actions = observation_space["actions"].shape[0]
        super().__init__(observation_space, features_dim=hidden + self.num_actions)
        vocab_size = int(observation_space["observation"].high.max()) + 1
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD_ID)
        self.in_task = nn.Embedding(2, embed_dim)  # added to a token's embedding: is it a task word?
        self.action = nn.Sequential(nn.Linear(2 * embed_dim + 1, hidden), nn.Tanh())
        self.state = nn.Sequential(nn.Linear(2 * embed_dim + hidden, hidden), nn.Tanh())
        # Scores a pair from [state, action, state * action]: the product lets one layer match
        # words of the task ("apple") with words of an action ("take apple 1 from ...").
        self.scorer = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        # SB3's preprocessing turns Box observations into floats; ids are exact below 2**24.
        task = observations["task"].long()  # (B, T)
        text = observations["observation"].long()  # (B, T)
        actions = observations["actions"].long()  # (B, N, L)
        action_flags = task_word_flags(actions, task)  # (B, N, L)
        action_words = self.embed(actions) + self.in_task(action_flags)  # (B, N, L, D)
        task_words = action_flags.sum(-1, keepdim=True).float() / actions.shape[-1]  # (B, N, 1)
        slots = self.action(torch.cat([masked_mean(action_words, actions), self.embed(actions[..., 0]), task_words],
                                      dim=-1))  # (B, N, H)
        listed = (actions[..., 0] != PAD_ID).unsqueeze(-1)  # (B, N, 1)
        others = slots.masked_fill(~listed, -1.0).max(dim=1).values  # (B, H); tanh >= -1, so padding never wins
        text_words = self.embed(text) + self.in_task(task_word_flags(text, task))  # (B, T, D)
        state = torch.cat([masked_mean(self.embed(task), task), masked_mean(text_words, text), others], dim=-1)
        state = self.state(state)  # (B, H)
        paired = state.unsqueeze(1).expand_as(slots)  # (B, N, H)
        scores = self.scorer(torch.cat([paired, slots, paired * slots], dim=-1)).squeeze(-1)  # (B, N)
        return torch.cat([state, scores], dim=-1)  # (B, H + N)


class SlotScores(nn.Module):
    """The action head: the last `num_actions` features are the logits."""

    def __init__(self, num_actions: int):
        super().__init__()
        self.num_actions = num_actions

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        return latent[..., -self.num_actions:]  # (B, N)


class SlotScoringPolicy(MaskableMultiInputActorCriticPolicy):
    """MaskablePPO policy over `TokenIds` observations with per-slot action scores.

    The actor path adds no layers (``net_arch["pi"] == []``) so the extractor's scores reach
    the action distribution unchanged; ``net_arch["vf"]`` sizes the value MLP.
    """

    def __init__(self, observation_space, action_space, lr_schedule, *, value_hidden: int = 64, **kwargs):
        kwargs.setdefault("features_extractor_class", TextFeaturesExtractor)
        kwargs["net_arch"] = {"pi": [], "vf": [value_hidden]}
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = SlotScores(int(self.action_space.n))
        # Near-uniform initial policy, as SB3 does for its own action head (gain 0.01).
        self.features_extractor.scorer[-1].apply(partial(self.init_weights, gain=0.01))
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)
