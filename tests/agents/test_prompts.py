"""`PromptProfile.from_meta`: the profile a checkpoint records comes back as it was trained."""

import json
from dataclasses import asdict

from lmgym.models import zoo
from lmgym.models.checkpoints import read_meta
from lmgym.models.networks import model_folder
from lmgym.react import PromptProfile


def test_profile_round_trips_through_the_meta_training_writes():
    profile = PromptProfile(instructions=True, few_shot=2, max_prompt_tokens=256)
    meta = {**asdict(profile), "max_new_tokens": 104}  # the react_prompt of lmgym.training.lm's meta
    assert PromptProfile.from_meta(meta) == profile


def test_an_installed_checkpoint_gives_its_profile():
    meta = read_meta("react/hotpotqa-ar")["react_prompt"]
    assert PromptProfile.from_meta(meta) == PromptProfile(instructions=False, few_shot=0, show_actions=False,
                                                          max_prompt_tokens=320)


def test_every_installed_checkpoint_has_positions_for_its_whole_prompt():
    """The backends cut a prompt to the config's max_position_embeddings: a checkpoint trained
    on longer prompts (`webshop-teacher-1k-ar`, 1,024 tokens) would be played on fewer."""
    prompts = {zoo.path(name): read_meta(name).get("react_prompt") for name in zoo.names()
               if (zoo.path(name) / "lmgym.json").is_file()}
    prompts = {folder: prompt for folder, prompt in prompts.items() if prompt and prompt.get("max_prompt_tokens")}
    assert any(f.name == "webshop-teacher-1k-ar" for f in prompts)
    for folder, prompt in prompts.items():
        if (folder / "adapter_config.json").is_file():  # a LoRA adapter plays with its base model's positions
            folder = model_folder(read_meta(folder)["base_model"])
        positions = json.loads((folder / "config.json").read_text())["max_position_embeddings"]
        assert positions >= prompt["max_prompt_tokens"] + prompt["max_new_tokens"], folder.name
