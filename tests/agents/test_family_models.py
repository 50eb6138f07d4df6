"""`FAMILY_MODELS`: model names that `LMAgent` resolves per env family (``tiny-ar``, ``smollm2-sft``, ...)."""

import pytest

from lmgym.agents.lm import FAMILY_MODELS, LMAgent, installed_family_model
from lmgym.models import zoo
from lmgym.models.checkpoints import load_checkpoint
from lmgym.models.zoo import ModelNotInstalled


def test_the_one_table_holds_the_tiny_and_ladder_aliases():
    assert {"tiny-ar", "tiny-mdlm", "tiny-rl", "smollm2-sft", "smollm2-rl"} <= set(FAMILY_MODELS)
    assert FAMILY_MODELS["tiny-ar"][0] == "react/{family}-ar"


@pytest.mark.parametrize("family", ["ALFWorld", "HotPotQA"])
def test_smollm2_sft_resolves_to_the_ladder_model_of_the_family(family):
    """The ALFWorld and HotPotQA rungs are installed in the repository's zoo (studies/ladder.py)."""
    name = f"ladder/{family.lower()}-smollm2-sft"
    assert installed_family_model("smollm2-sft", family) == zoo.path(name)
    assert (zoo.path(name) / "adapter_model.safetensors").is_file()
    assert zoo.path(name) != installed_family_model("smollm2-sft", "ALFWorld" if family != "ALFWorld" else "HotPotQA")


def test_smollm2_rl_is_the_grpo_adapter_trained_from_the_family_sft_model():
    """HotPotQA's RL rung is installed (studies/ladder.py --rung smollm2-rl): a LoRA adapter on the
    bundled SmolLM2 whose meta records the GRPO config, its start and the dev choice."""
    from lmgym.models.checkpoints import read_meta

    path = installed_family_model("smollm2-rl", "HotPotQA")
    assert path == zoo.path("ladder/hotpotqa-smollm2-rl") and (path / "adapter_model.safetensors").is_file()
    meta = read_meta(path)
    assert meta["base_model"] == "smollm2" and meta["grpo_config"]["model"].endswith("hotpotqa-smollm2-sft")
    assert meta["ladder"]["rung"] == "smollm2-rl" and "dev_wins" in meta["ladder"]["checkpoint_choice"]
    with pytest.raises(ModelNotInstalled, match="--family alfworld --rung smollm2-rl"):
        installed_family_model("smollm2-rl", "ALFWorld")


def test_the_smollm2_adapter_loads_on_its_named_base_through_torch():
    """``base_model: "smollm2"`` names the bundled model: the hf backend's path loads it too."""
    from peft import PeftModel

    from lmgym.models.checkpoints import read_meta

    model, tokenizer, meta = load_checkpoint(zoo.path("ladder/alfworld-smollm2-sft"))
    assert meta["base_model"] == "smollm2" and isinstance(model, PeftModel)
    assert read_meta("smollm2") == {}  # the name is the bundled model (a GRPO run from it reads its meta)
    assert model.config.vocab_size == len(tokenizer) == 49152


def test_an_alias_in_a_fake_zoo_resolves_and_tiny_models_still_do(tmp_path, monkeypatch):
    monkeypatch.setenv("LMGYM_ZOO", str(tmp_path))
    (tmp_path / "ladder" / "webshop-smollm2-sft").mkdir(parents=True)
    (tmp_path / "react" / "webshop-rl").mkdir(parents=True)
    assert installed_family_model("smollm2-sft", "WebShop") == tmp_path / "ladder" / "webshop-smollm2-sft"
    assert installed_family_model("tiny-rl", "WebShop") == tmp_path / "react" / "webshop-rl"


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
