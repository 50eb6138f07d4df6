"""``LMAgent(model="tiny-rl")``: the family's best RL model, resolved per family as ``tiny-ar`` is."""

import pytest

from lmgym.agents.lm import FAMILY_MODELS, LMAgent, installed_family_model
from lmgym.models import zoo
from lmgym.models.zoo import ModelNotInstalled

FAMILIES = {"ALFWorld": "lmgym/ALFWorld-Gen-v0", "HotPotQA": "lmgym/HotPotQA-Gen-v0", "WebShop": "lmgym/WebShop-Gen-v0"}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_tiny_rl_is_the_zoo_rl_model_of_the_family_or_says_how_to_build_it(family):
    assert FAMILY_MODELS["tiny-rl"][0] == "react/{family}-rl"
    name = f"react/{family.lower()}-rl"
    if zoo.is_installed(name):
        assert installed_family_model("tiny-rl", family) == zoo.path(name)
    else:
        with pytest.raises(ModelNotInstalled, match="studies/rl.py"):
            installed_family_model("tiny-rl", family)


def test_tiny_rl_plays_each_family_with_its_own_model():
    installed = {f: e for f, e in FAMILIES.items() if zoo.is_installed(f"react/{f.lower()}-rl")}
    if not installed:
        pytest.skip("no react/<family>-rl model installed (studies/rl.py --install)")
    agent = LMAgent(model="tiny-rl")
    for family, env_id in installed.items():
        agent.reset(seed=0, env_id=env_id)
        assert str(zoo.path(f"react/{family.lower()}-rl")) in agent._models
