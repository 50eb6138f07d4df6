"""`PromptProfile.from_meta`: the profile a checkpoint records comes back as it was trained."""

from dataclasses import asdict

from lmgym.agents.lm import REACT_CHECKPOINTS
from lmgym.agents.prompts import PromptProfile
from lmgym.policies.checkpoints import read_meta


def test_profile_round_trips_through_the_meta_training_writes():
    profile = PromptProfile(instructions=True, few_shot=2, max_prompt_tokens=256)
    meta = {**asdict(profile), "max_new_tokens": 104}  # the react_prompt of lmgym.training.lm's meta
    assert PromptProfile.from_meta(meta) == profile


def test_an_installed_checkpoint_gives_its_profile():
    meta = read_meta(REACT_CHECKPOINTS / "hotpotqa-ar")["react_prompt"]
    assert PromptProfile.from_meta(meta) == PromptProfile(instructions=False, few_shot=0, show_actions=False,
                                                          max_prompt_tokens=320)
