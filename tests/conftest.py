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


STUDIES = Path(__file__).resolve().parents[1] / "studies"


def _load_study(name: str):
    """``studies/<name>.py`` as a module (once per session). A study is a script, not package
    code: only tests load one by path. Registered in sys.modules first, as dataclasses need."""
    import importlib.util
    import sys

    module_name = f"study_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, STUDIES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    return sys.modules[module_name]


@pytest.fixture(scope="session")
def load_study():
    """``load_study("teachers")``: the study module `studies/teachers.py`."""
    return _load_study

