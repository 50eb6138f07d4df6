"""Tiny model folders for the agent tests (the policy tests' helpers, trained in seconds)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policies"))
from policies_tiny_models import save_tiny_checkpoint  # noqa: E402


@pytest.fixture(scope="session")
def tiny_ar_folder(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("agent_tiny_ar"), bidirectional=False)


@pytest.fixture(scope="session")
def tiny_mdlm_folder(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("agent_tiny_mdlm"), bidirectional=True)
