"""Transcripts as training data: roles per token, windows, and prompts identical to LMAgent's."""

import gymnasium as gym
import pytest

import lmgym  # noqa: F401
from lmgym.agents import ExpertAgent, run_episode
from lmgym.agents.lm import LMAgent
from lmgym.models.backends import Completion, TextBackend
from lmgym.models.tokenizer import train_bpe_tokenizer
from lmgym.react import PromptProfile
from lmgym.training.lm import collate
from lmgym.training.transcripts import ACT, CONTEXT, OBS, REASON, encode_episode


@pytest.fixture(scope="module")
def episode():
    return run_episode(gym.make("lmgym/KeyDoor-Large-v0"), ExpertAgent(), seed=3)


@pytest.fixture(scope="module")
def tokenizer(episode):
    texts = [episode.task] + [t for s in episode.steps for t in (s.observation, s.completion)]
    return train_bpe_tokenizer(texts * 3, vocab_size=400)


def text_of(tokenizer, ids, roles, role):
    return tokenizer.decode([i for i, r in zip(ids, roles) if r == role])


def test_every_token_has_the_role_of_what_it_says(tokenizer, episode):
    [example] = encode_episode(tokenizer, episode, PromptProfile(max_prompt_tokens=100_000), "ar")
    observations = text_of(tokenizer, example.ids, example.roles, OBS)
    reasoning = text_of(tokenizer, example.ids, example.roles, REASON)
    actions = text_of(tokenizer, example.ids, example.roles, ACT)
    for step in episode.steps:
        assert step.observation.strip() in observations and step.reasoning in reasoning and step.action in actions
        assert step.action not in reasoning.replace(step.reasoning, "") or step.action in step.reasoning
    assert actions.count("<|eos|>") == episode.length  # the end of each turn is trained: the model learns to stop
    assert example.roles[0] == CONTEXT  # [BOS]
    batch = collate([example], pad_id=tokenizer.pad_token_id)
    assert not batch["loss_mask"][batch["roles"] == OBS].any() and batch["loss_mask"][batch["roles"] == ACT].all()


class Replay(TextBackend):
    """Writes the episode's own completions back, and keeps the prompts it was sent."""

    chat = True

    def __init__(self, tokenizer, completions):
        self.tokenizer, self.completions, self.prompts = tokenizer, list(completions), []

    def complete(self, prompts, params=None, *, seeds=None, sessions=None):
        self.prompts += prompts
        return [Completion(self.completions.pop(0), 0, 0, 0.0) for _ in prompts]

    def count_tokens(self, text):
        return len(self.tokenizer.encode(text, add_special_tokens=False))


@pytest.mark.parametrize("budget", [100_000, 160])
def test_training_examples_are_what_the_agent_sends(tokenizer, episode, budget):
    replay = Replay(tokenizer, [s.completion for s in episode.steps])
    agent = LMAgent(backend=replay, few_shot=0, instructions=False, show_actions=False, max_prompt_tokens=budget)
    run_episode(gym.make("lmgym/KeyDoor-Large-v0"), agent, seed=3)
    sent = [tokenizer.encode(tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True),
                             add_special_tokens=False) for p in replay.prompts]
    profile = PromptProfile(max_prompt_tokens=budget)
    mdlm = encode_episode(tokenizer, episode, profile, "mdlm")
    assert [e.ids[:e.answer_start] for e in mdlm] == sent  # the diffusion context is the prompt, token for token
    ar = encode_episode(tokenizer, episode, profile, "ar")
    assert all(any(e.ids[:len(p)] == p for e in ar) for p in sent)  # every prompt begins an AR window
    if budget < 1000:
        assert len(ar) > 1 and max(len(e.ids) for e in ar) < 2 * budget


def test_smollm2_chat_template_gets_the_same_roles(episode):
    from transformers import AutoTokenizer

    from lmgym.models.networks import smollm2_folder

    smol = AutoTokenizer.from_pretrained(str(smollm2_folder()), local_files_only=True)
    [example] = encode_episode(smol, episode, PromptProfile(instructions=True, max_prompt_tokens=100_000), "ar")
    actions = text_of(smol, example.ids, example.roles, ACT)
    assert all(s.action in actions for s in episode.steps) and actions.count("<|im_end|>") == episode.length
    assert "Commands: go north" in text_of(smol, example.ids, example.roles, CONTEXT)
