import os
from pathlib import Path

import pytest

# Tests read the real data through LMGYM_DATA; default to the shared folder beside the checkout.
_shared = Path(__file__).resolve().parents[1].parent / "shared" / "data"
if "LMGYM_DATA" not in os.environ and _shared.is_dir():
    os.environ["LMGYM_DATA"] = str(_shared)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


def _tiny_models():
    """tests/models/tiny_models.py, the helpers that build tiny model folders."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
    import tiny_models

    return tiny_models


@pytest.fixture(scope="session")
def tiny_ar_folder(tmp_path_factory):
    """A checkpoint folder (a tokenizer made here, with the chat template; a 2-layer causal Llama
    trained for seconds on ReAct-style records), shared by the policy and agent tests."""
    return _tiny_models().save_tiny_checkpoint(tmp_path_factory.mktemp("tiny_ar"), bidirectional=False)


@pytest.fixture(scope="session")
def tiny_mdlm_folder(tmp_path_factory):
    """The same as a masked-diffusion checkpoint (bidirectional, meta kind "mdlm")."""
    return _tiny_models().save_tiny_checkpoint(tmp_path_factory.mktemp("tiny_mdlm"), bidirectional=True)


@pytest.fixture(scope="session")
def teacher_hotpotqa_file(tmp_path_factory):
    """Six won episodes of the grounded HotPotQA teacher on HotPotQA-Gen-Easy training seeds."""
    from lmgym.agents.registry import make_agent
    from lmgym.agents.runner import record_rollouts

    path = tmp_path_factory.mktemp("preact_data") / "teacher.jsonl"
    record_rollouts("lmgym/HotPotQA-Gen-Easy-v0", make_agent("teacher"), [1_000_000 + k for k in range(6)], path,
                    won_only=True)
    return path


@pytest.fixture(scope="session")
def tiny_preact_folder(tmp_path_factory, teacher_hotpotqa_file):
    """A P-ReAct checkpoint: a 2-layer, 32-wide diffusion model after 2 steps of Agentic SFT."""
    from lmgym.training.agentic_sft import AgenticSFTConfig, train

    out = tmp_path_factory.mktemp("preact_sft")
    train(AgenticSFTConfig(data=(str(teacher_hotpotqa_file),), out=str(out), vocab_size=320, hidden_size=32,
                           num_layers=2, num_heads=2, reason_tokens=128, call_tokens=40, steps=2, batch_size=4,
                           warmup=1, quiet=True))
    return out / "checkpoint"
