"""The PromptEdit generator study keeps its cells and resumes (its quick run: tests/test_studies.py)."""

import pytest

from lmgym.data import data_root

pytestmark = pytest.mark.skipif(
    data_root() is None or not all((data_root() / name).exists() for name in ("self_instruct", "super_natural_instructions")),
    reason="needs LMGYM_DATA/self_instruct and super_natural_instructions")


def test_generator_benchmark_gives_rates_with_wilson_intervals_and_resumes(tmp_path, load_study):
    bench = load_study("promptedit_generator")
    # a stored free-form prompt stands in for SmolLM2's, which takes minutes to write on a CPU
    prompt = "Write a SuperNI task instance as a JSON object with a definition, an input and an output."
    (tmp_path / "smollm2_prompts.json").write_text(f'{{"SuperNI": {{"request": "-", "prompt": "{prompt}"}}}}')
    generators = {"rules": "rules"}
    results = bench.run(samples=32, tasks=("SuperNI",), generators=generators, out=tmp_path)
    rows = {row["prompt"]: row for row in results["rows"]}
    assert set(rows) == set(bench.PROMPT_KINDS) and results["smollm2_prompts"] == {"SuperNI": prompt}
    for row in rows.values():
        assert row["samples"] == 32 and 0 <= row["tsr"] <= row["schema_valid"] <= row["json_valid"] <= 32
        low, high = row["tsr_interval"]
        assert low <= row["tsr_rate"] <= high and 0 < high - low < 0.5
    # the batches of "specified" cycle through train phrasings, of "held_out" through held-out ones
    assert len(rows["specified"]["prompts"]) == 2 and rows["specified"]["prompts"][0].endswith(
        "Answer with only the JSON object, no other text.")
    assert rows["held_out"]["prompts"][0].endswith("Respond solely with a valid JSON object.")
    # the rule-based teacher follows every phrasing: hints and format lift schema validity
    assert rows["held_out"]["schema_valid"] > rows["starting"]["schema_valid"]
    assert rows["specified"]["schema_valid"] > rows["starting"]["schema_valid"]
    cells = (tmp_path / "cells.jsonl").read_text().splitlines()
    assert bench.run(samples=32, tasks=("SuperNI",), generators=generators, out=tmp_path)["rows"] == results["rows"]
    assert (tmp_path / "cells.jsonl").read_text().splitlines() == cells  # resumed: nothing measured twice
    markdown = (tmp_path / "results.md").read_text()
    assert "| rules schema-valid | rules TSR |" in markdown and markdown.count("| SuperNI |") == 4
