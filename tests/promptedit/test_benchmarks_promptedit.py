"""The PromptEdit benchmark scripts run, on tiny budgets, and give the tables they promise."""

import pytest

from lmgym.data import data_root
from lmgym.envs.promptedit.judge import METRIC_KEYS

pytestmark = pytest.mark.skipif(
    data_root() is None or not all((data_root() / name).exists() for name in ("self_instruct", "super_natural_instructions")),
    reason="needs LMGYM_DATA/self_instruct and super_natural_instructions")


def test_baselines_table_has_every_metric_and_the_hill_climber_beats_the_static_prompt(load_study):
    baselines = load_study("promptedit_baselines")
    # SuperNI: a task the default generator writes valid records for once the prompt names every field
    result = baselines.run_task("SuperNI", episodes=1, steps=2, batch_size=8, eval_seeds=range(10_000, 10_002))
    table = result["baselines"]
    assert set(table) == {"static", "random", "greedy"}
    for row in table.values():
        assert set(METRIC_KEYS) | {"reward", "generator_calls"} <= set(row)
    assert table["static"]["generator_calls"] == 0 and table["greedy"]["generator_calls"] > 2
    assert table["greedy"]["reward"] > table["static"]["reward"]
    assert result["seconds_per_cycle"]["generate"] > 0 and result["seconds_per_cycle"]["judge"] > 0
    assert "| greedy |" in baselines.markdown({"tasks": {"SuperNI": result}})


def test_judge_benchmark_measures_a_64_record_pass(load_study):
    judge = load_study("promptedit_judge")
    row = judge.measure_task("SelfInstruct", rounds=1)
    assert row["judge_new_s"] > 0 and row["judge_cached_s"] > 0 and row["floor_s"] > 0
    assert row["seconds_per_cycle_batch64"] == pytest.approx(row["generate_s"] + row["judge_new_s"])


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


def test_aod_table_tabulates_a_spec_and_pairs_each_task_with_its_ar_twin(tmp_path, load_study):
    from lmgym.benchmarks.spec import load_spec

    aod_table = load_study("aod_table")
    rules = "lmgym.envs.promptedit.generators:RuleBasedGenerator"
    # the twin runs the same stand-in generator, so the ablation's paired differences must be 0
    (tmp_path / "spec.yaml").write_text(f"""
id: aod-tiny
episodes: 2
max_steps: 1
envs:
  - {{id: lmgym/PromptEdit-SuperNI-v0, kwargs: {{batch_size: 4, generator: "{rules}"}}, label: SuperNI}}
  - {{id: lmgym/PromptEdit-SuperNI-v0, kwargs: {{batch_size: 4, generator: "{rules}"}}, label: SuperNI-AR,
     agents: [hill-climb, static-ar]}}
agents:
  - static
  - {{name: static-ar, kind: static}}
  - {{name: hill-climb, kwargs: {{budget: 3}}}}
""")
    aod_table.run_benchmark(load_spec(tmp_path / "spec.yaml"), tmp_path / "out", backend="inprocess", quiet=True,
                            plots=False)
    records = aod_table.episode_records(tmp_path / "out")
    cells = {(r["env"], r["agent"]) for r in records}
    assert cells == {("SuperNI", "static"), ("SuperNI", "static-ar"), ("SuperNI", "hill-climb"),
                     ("SuperNI-AR", "hill-climb"), ("SuperNI-AR", "static-ar")} and len(records) == 10
    cells = aod_table.table(records)
    assert cells["SuperNI"]["static"]["generator_calls"][0] == 0 and cells["SuperNI"]["hill-climb"]["n"] == 2
    # on the twin, "static-ar" stands for "static" (a policy trained against the AR generator)
    ablation = aod_table.generator_ablation(records)
    assert [(r["agent"], r["ar_agent"], r["n"], r["difference"]) for r in ablation] == [
        ("hill-climb", "hill-climb", 2, 0.0), ("static", "static-ar", 2, 0.0)]
    assert "**AR-generator ablation**" in aod_table.markdown(cells, aod_table.paired(records), ["static", "hill-climb"],
                                                             ablation)
