"""Session fixtures: tiny random models shared by the policy tests."""

import pytest
import torch
from policies_tiny_models import NeverPredictsMask, tiny_llama


@pytest.fixture(scope="session")
def bidirectional_model():
    torch.set_num_threads(1)
    return NeverPredictsMask(tiny_llama(bidirectional=True))


@pytest.fixture(scope="session")
def causal_model():
    torch.set_num_threads(1)
    return NeverPredictsMask(tiny_llama(bidirectional=False, seed=1))


@pytest.fixture(scope="session")
def tiny_ar_folder(tmp_path_factory):
    """A checkpoint folder (tokenizer with the chat template, a random 2-layer causal Llama)."""
    from policies_tiny_models import save_tiny_checkpoint

    return save_tiny_checkpoint(tmp_path_factory.mktemp("tiny_ar"), bidirectional=False)


@pytest.fixture(scope="session")
def tiny_mdlm_folder(tmp_path_factory):
    """The same as a masked-diffusion checkpoint (bidirectional, meta kind "mdlm")."""
    from policies_tiny_models import save_tiny_checkpoint

    return save_tiny_checkpoint(tmp_path_factory.mktemp("tiny_mdlm"), bidirectional=True)
