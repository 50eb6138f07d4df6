"""Session fixtures: tiny random models shared by the policy tests."""

import pytest
import torch
from tiny_models import NeverPredictsMask, tiny_llama


@pytest.fixture(scope="session")
def bidirectional_model():
    torch.set_num_threads(1)
    return NeverPredictsMask(tiny_llama(bidirectional=True))


@pytest.fixture(scope="session")
def causal_model():
    torch.set_num_threads(1)
    return NeverPredictsMask(tiny_llama(bidirectional=False, seed=1))
