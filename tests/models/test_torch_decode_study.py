"""studies/torch_decode.py runs end to end in its quick form (speed itself is the study's
figure, never a test's: here only that every figure is measured and the two decode paths agree)."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")
STUDY = Path(__file__).resolve().parents[2] / "studies" / "torch_decode.py"


def test_the_torch_decode_study_measures_every_figure():
    spec = importlib.util.spec_from_file_location("study_torch_decode", STUDY)
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    results = study.run(quick=True)
    for name in ("before", "after"):
        assert 0 < results["profile"][name]["torch_operator_share"] < 1
    assert 0 < results["profile"]["llama.cpp"]["llama_decode_share"] <= 1
    engines = {"tiny_b1": ("before", "after", "llama.cpp"), "tiny_b8": ("before", "after")}
    for row, names in engines.items():
        assert all(results["decode"][row][name]["tokens_per_s"] > 0 for name in names), results["decode"][row]
        assert results["decode"][row]["after_over_before"] > 0
    assert results["turn"]["same_text"]  # the static-cache decoder writes what the forward writes
    assert results["turn"]["after"]["completion_tokens"] > 0 and results["diffusion"]["answer_tokens_per_s"] > 0
    assert results["goal"]["tiny_b1_best_tokens_per_s"] > 0 and "compile" not in results  # compile: full runs only
    assert results["export"]["write_gguf_seconds"] > 0 and results["export"]["bytes"] > 1_000_000
