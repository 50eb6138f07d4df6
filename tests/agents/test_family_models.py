"""`FAMILY_MODELS`: model names that `LMAgent` resolves per env family (``tiny-ar``, ``smollm2-sft``, ...)."""

import pytest

from lmgym.agents.lm import FAMILY_MODELS, TINY_MODELS, LMAgent, installed_family_model, installed_tiny_model
from lmgym.models import zoo
from lmgym.models.zoo import ModelNotInstalled


def test_the_tiny_aliases_are_a_view_of_the_one_table():
    assert TINY_MODELS == {"tiny-ar": "ar", "tiny-mdlm": "mdlm", "tiny-rl": "rl"}
    assert set(TINY_MODELS) < set(FAMILY_MODELS) and "smollm2-sft" in FAMILY_MODELS


def test_smollm2_sft_resolves_to_the_ladder_model_of_the_family():
    """The ALFWorld rung is installed in the repository's zoo (studies/ladder.py)."""
    assert installed_family_model("smollm2-sft", "ALFWorld") == zoo.path("ladder/alfworld-smollm2-sft")
    assert (zoo.path("ladder/alfworld-smollm2-sft") / "adapter_model.safetensors").is_file()


def test_an_alias_in_a_fake_zoo_resolves_and_tiny_models_still_do(tmp_path, monkeypatch):
    monkeypatch.setenv("LMGYM_ZOO", str(tmp_path))
    (tmp_path / "ladder" / "webshop-smollm2-sft").mkdir(parents=True)
    (tmp_path / "react" / "webshop-rl").mkdir(parents=True)
    assert installed_family_model("smollm2-sft", "WebShop") == tmp_path / "ladder" / "webshop-smollm2-sft"
    assert installed_tiny_model("WebShop", "rl") == tmp_path / "react" / "webshop-rl"


def test_a_family_without_the_model_is_refused_in_one_line_naming_its_command(tmp_path, monkeypatch):
    monkeypatch.setenv("LMGYM_ZOO", str(tmp_path))
    with pytest.raises(ModelNotInstalled) as raised:
        installed_family_model("smollm2-sft", "HotPotQA")
    message = str(raised.value)
    assert "\n" not in message and "'ladder/hotpotqa-smollm2-sft'" in message
    assert message.endswith("build it with: python studies/ladder.py --family hotpotqa --rung smollm2-sft")
    agent = LMAgent(model="smollm2-sft")  # resolved per episode: nothing loads before an env is known
    with pytest.raises(ModelNotInstalled, match="studies/ladder.py --family hotpotqa"):
        agent.reset(seed=0, env_id="lmgym/HotPotQA-Gen-v0")
