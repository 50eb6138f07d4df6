"""Every study (``studies/<name>.py``) imports without running, and its ``run(quick=True)`` returns
the figures it promises, at a budget of seconds.

A study is a research script, not package code: it is loaded by path here (the `load_study`
fixture), never from ``lmgym``. Studies that read real data skip without ``LMGYM_DATA``, saying
which folder they need. What is checked is the shape and the sense of each result (counts,
shares in [0, 1], intervals around their rate, claims that hold by construction), not timings.
"""

import ast
import importlib.util
import json
from pathlib import Path

import pytest

from lmgym.data import data_root

STUDIES = Path(__file__).resolve().parents[1] / "studies"
#: Studies with tests of their own elsewhere (added by another change: their files bring them).
TESTED_ELSEWHERE = {"lm_speed", "torch_decode"}


def needs_data(*folders: str):
    root = data_root()
    missing = [f for f in folders if root is None or not (root / f).is_dir()]
    return pytest.mark.skipif(bool(missing), reason=f"needs LMGYM_DATA/{', LMGYM_DATA/'.join(missing)}")


def needs_modules(*names: str):
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs the optional modules {', '.join(missing)}")


def _names() -> list[str]:
    return sorted(p.stem for p in STUDIES.glob("*.py"))


# -- every study: a run(quick) and nothing executed on import ---------------------------------------
def executed_on_import(path: Path) -> list[str]:
    """Module-level statements of `path` that do work when it is imported: loops, with-blocks,
    bare calls, argument parsing (definitions, imports, constants and the ``__main__`` guard do none)."""
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.For, ast.While, ast.With, ast.Try)):
            found.append(f"line {node.lineno}: {type(node).__name__}")
        elif isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant):
            found.append(f"line {node.lineno}: {ast.unparse(node)[:60]}")
        elif isinstance(node, ast.If) and "__main__" not in ast.unparse(node.test):
            found.append(f"line {node.lineno}: if {ast.unparse(node.test)[:60]}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and "parse_args" in ast.unparse(node):
            found.append(f"line {node.lineno}: {ast.unparse(node)[:60]}")
    return found


def test_the_import_check_catches_a_script_body(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import argparse\nparser = argparse.ArgumentParser()\nargs = parser.parse_args()\n"
                      "for x in range(3):\n    print(x)\nprint('done')\n")
    assert [line.split(":")[0] for line in executed_on_import(script)] == ["line 3", "line 4", "line 6"]


@pytest.mark.parametrize("name", _names())
def test_a_study_has_run_and_a_main_guard_and_runs_nothing_on_import(name, load_study):
    path = STUDIES / f"{name}.py"
    assert not executed_on_import(path), f"{path.name} runs code on import: {executed_on_import(path)}"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body), f"{name}: no __main__ guard"
    run = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run"), None)
    assert run is not None and run.args.args[0].arg == "quick", f"{name}: no run(quick, ...)"
    assert isinstance(run.args.defaults[0], ast.Constant) and run.args.defaults[0].value is False, \
        f"{name}: run's quick must default to False (the full study)"
    assert callable(load_study(name).run)


def test_every_study_has_a_quick_test():
    tested = {name.removeprefix("test_") for name in globals() if name.startswith("test_")} | TESTED_ELSEWHERE
    assert set(_names()) <= tested, f"studies without a run(quick=True) test: {sorted(set(_names()) - tested)}"


# -- each study's quick run ------------------------------------------------------------------------
def within(rate: float, interval) -> bool:
    return 0.0 <= interval[0] <= rate <= interval[1] <= 1.0


@needs_data("alfworld")
@needs_modules("textworld")
def test_alfworld_engines(load_study):
    result = load_study("alfworld_engines").run(quick=True)
    for engine in ("native", "official"):
        assert result[engine]["games"] == 1 and result[engine]["steps"] == 10 and result[engine]["step_s"] > 0
    assert result["ratio_steps_per_s"] == pytest.approx(result["native"]["steps_per_s"] / result["official"]["steps_per_s"])
    for clock in ("cold", "warm"):  # cold puts each game's first load (the native compile) on the clock
        key = f"steps_per_s_{clock}"
        assert result[f"ratio_{key}"] == pytest.approx(result["native"][key] / result["official"][key])
    for engine in ("native", "official"):
        assert result[engine]["steps_per_s_cold"] < result[engine]["steps_per_s_warm"] < result[engine]["steps_per_s"]
    assert result["native"]["warm_load_s"] < result["native"]["load_s"]  # compiled once, then cached
    memory = result["memory"]
    assert memory["episodes"] == 200 and memory["games"] == 10 and len(memory["rss_mib"]) >= 2
    assert memory["growth_mib"] == pytest.approx(memory["rss_mib"][-1] - memory["rss_mib"][0], abs=0.11)


@needs_modules("alfworld", "fast_downward")
def test_alfworld_gen(load_study):
    result = load_study("alfworld_gen").run(quick=True)
    assert result["mode"] == "quick" and result["generation"]["games_per_second"] > 0
    expert = result["expert"]
    assert expert["games"] == expert["expert_wins"] == 10 and not expert["failures"]  # every generated game is solvable
    engines = result["engines_small_rooms"]
    assert engines["games"] == engines["agree"] == 1 and not engines["failures"] and engines["compared_steps"] > 0


@needs_data("multiwoz", "self_instruct", "super_natural_instructions", "truthfulqa")
def test_aod_editor_check(load_study):
    study = load_study("aod_editor_check")
    result = study.run(quick=True)
    tasks = {key.split("/")[0] for key in result}
    assert len(tasks) == 4 and {key.split("/")[1] for key in result} == set(study.KINDS)
    for row in result.values():
        assert row["n"] == 1 and within(row["valid"], row["valid_ci95"]) and within(row["teacher"], row["teacher_ci95"])


@needs_data("super_natural_instructions")
def test_aod_table(load_study):
    """The quick spec's twin runs the same stand-in generator, so the ablation's paired differences are 0."""
    study = load_study("aod_table")
    result = study.run(quick=True)
    cells = result["cells"]
    assert set(cells) == {"SuperNI", "SuperNI-AR"} and set(cells["SuperNI-AR"]) == {"hill-climb", "static-ar"}
    assert cells["SuperNI"]["static"]["generator_calls"][0] == 0 and cells["SuperNI"]["hill-climb"]["n"] == 2
    # on the twin, "static-ar" stands for "static" (a policy trained against the AR generator)
    assert [(r["agent"], r["ar_agent"], r["n"], r["difference"]) for r in result["ar_ablation"]] == [
        ("hill-climb", "hill-climb", 2, 0.0), ("static", "static-ar", 2, 0.0)]
    assert "**AR-generator ablation**" in result["markdown"] and "| hill-climb |" in result["markdown"]
    assert "training calls on this task | total calls |" in result["markdown"]
    assert "| 0.0 ± 0.0 | - | 0 | 0 |" in result["markdown"]  # static: no search, no training


def test_aod_training_calls(load_study):
    """Each method's generator calls spent training on the task, read from the installed optimisers:
    a PPO policy's 640 edits + 80 episodes + 2 envs' last starts on its own task, 0 on another; the
    editor's policy gradient at most 24 iterations x (1 + 4) per task; the baselines none."""
    from sb3_contrib import MaskablePPO

    study = load_study("aod_table")
    spec, transfer = (study.load_spec(f"studies/specs/{name}.yaml") for name in ("aod", "aod_transfer"))
    agents = {a.name: a for a in spec.agents + transfer.agents}
    calls = {name: study.training_calls(agents[name], "SelfInstruct") for name in agents}
    assert calls["aod-ppo"] == calls["aod-scalar"] == (722, False) and calls["aod-editor"] == (120, True)
    assert calls["aod-ppo-from-TruthfulQA"] == calls["aod-ppo-from-MultiWOZ"] == (0, False)  # trained elsewhere
    assert study.training_calls(agents["aod-ppo-from-TruthfulQA"], "TruthfulQA") == (722, False)
    assert {calls[n] for n in ("static", "random", "hill-climb", "opro", "gepa", "aod-editor-zeroshot")} == {(0, False)}
    # the installed policies load with the current package (they were pickled naming lmgym.policies)
    assert MaskablePPO.load(study.zoo.root() / "aod" / "ppo-SelfInstruct" / "model.zip", device="cpu").policy is not None


def test_diffusion_sampler(load_study):
    study = load_study("diffusion_sampler")
    results = study.run(quick=True)
    rows = {(r["setting"], r["sampler"]): r for r in results["rows"]}
    samplers = ("reference", "threshold", "threshold+cache", "threshold+dualcache", "threshold+dualcache+eos")
    assert set(rows) == {(s, n) for s in ("greedy", "sampling") for n in samplers}
    assert rows[("greedy", "reference")]["forward_passes"] == results["gen_length"]  # LLaDA: one token per pass
    assert rows[("greedy", "reference")]["agreement_with_reference"] == 1.0
    for setting in ("greedy", "sampling"):
        # threshold decoding needs at least one pass per block and at most one per token
        for name in samplers[1:4]:
            assert results["gen_length"] // results["block_length"] <= rows[(setting, name)]["forward_passes"] <= results["gen_length"]
        # stopping at EOS skips the blocks after every record has ended, and changes no record
        assert rows[(setting, "threshold+dualcache+eos")]["forward_passes"] <= rows[(setting, "threshold+dualcache")]["forward_passes"]
        assert rows[(setting, "threshold+dualcache+eos")]["json_valid"] == rows[(setting, "threshold+dualcache")]["json_valid"]
    assert 0.0 <= rows[("greedy", "threshold+cache")]["agreement_with_reference"] <= 1.0
    assert set(results["speedup"]) == {f"{s}/{n}" for s in ("greedy", "sampling") for n in samplers[1:]}
    assert results["failures"] == [] and not results["claims"]["checked"]  # quick runs measure too little to judge
    assert "| greedy | reference |" in study.to_markdown(results)


def test_distill(load_study):
    result = load_study("distill").run(quick=True)
    assert result["turns"] == 16 and 0 < result["completion_window"] < result["tokens"][1]
    assert result["kd_step_s_full_logits"] > 0 and result["kd_step_s_completion_window"] > 0
    assert result["speedup"] == pytest.approx(result["kd_step_s_full_logits"] / result["kd_step_s_completion_window"], rel=0.05)
    bf16 = result["teacher_step_bf16"]
    assert bf16["parameters"] < 200_000 and bf16["ar_step_s_fp32"] > 0 and bf16["ar_step_s_bf16_autocast"] > 0
    assert bf16["speedup"] == pytest.approx(bf16["ar_step_s_fp32"] / bf16["ar_step_s_bf16_autocast"], rel=0.05)


@needs_modules("bm25s", "Stemmer", "rapidfuzz")
def test_hotpotqa(load_study):
    report = load_study("hotpotqa").run(quick=True)
    assert report["reference"]["steps_per_s"] > 0
    generated = ("HotPotQA-Gen-v0", "HotPotQA-Gen-Hard-v0", "HotPotQA-Gen-v0 corpus=all")
    real = ("HotPotQA-v0", "HotPotQA-AllPages-v0")
    for name in generated + (real if data_root() and (data_root() / "hotpotqa").is_dir() else ()):
        assert report["steps_per_s"][name] > 0
        assert report["ratio_to_reference"][name] == pytest.approx(report["steps_per_s"][name] / report["reference"]["steps_per_s"], rel=0.02)
        latency = report["search_latency_ms"][name]
        assert latency["pages"] > 0 and all(latency[kind] > 0 for kind in ("page_hit", "page_miss", "passages_top3"))


def test_kvteam(load_study):
    result = load_study("kvteam").run(quick=True)
    cells = {c["label"]: c for c in result["cells"]}
    assert set(cells) == {"single", "textmas", "latentmas", "diffmas-stop", "lora-solo"}
    for cell in cells.values():
        assert cell["n"] == 2 and within(cell["em"], cell["em_ci"]) and cell["generated_tokens"][0] > 0
    assert cells["single"]["trace_bytes"] == 0 < cells["latentmas"]["trace_bytes"]  # one agent shares no trace
    assert cells["lora-solo"]["trace_bytes"] == 0 and cells["lora-solo"]["mode"] == "lora"  # the control runs alone
    assert {(p["first"], p["second"]) for p in result["paired"]} == {
        ("diffmas-stop", o) for o in ("single", "textmas", "latentmas", "lora-solo")}
    assert all(p["n"] == 2 and 0 <= p["p"] <= 1 for p in result["paired"])
    assert "| diffmas-stop | 2 |" in result["table"]
    panel = result["panel"]  # the test split by default, named and hashed, and every row played its tasks
    assert (panel["env_id"], panel["split"], panel["n"], panel["seeds"]) == ("lmgym/Arith-v0", "test", 2, [0, 1])
    assert f"split test, seeds 0..1 (n = 2, panel `{panel['hash'][:12]}`)" in result["table"]
    # the installed backbone was trained before splits and records no task ids: unknown, not clean
    assert result["contamination"] == dict.fromkeys(cells, None)


def test_kvteam_refuses_a_row_trained_on_the_panel(load_study, tmp_path):
    import shutil

    from lmgym.benchmarks.panels import panel_of
    from lmgym.errors import InputError
    from lmgym.io import atomic_write_json
    from lmgym.models import zoo
    from lmgym.models.checkpoints import META_FILE, TRAIN_PANELS, read_meta

    adapter = tmp_path / "adapter"  # the installed control, its meta claiming the test task of seed 1
    shutil.copytree(zoo.path("kvteam/arith-solver-lora"), adapter)
    trained = panel_of("lmgym/Arith-v0", {"split": "test"}, [1])
    atomic_write_json(adapter / META_FILE, {**read_meta(adapter), TRAIN_PANELS: [{**trained.record(), "task_ids": list(trained.task_ids)}]})
    study = load_study("kvteam")
    with pytest.raises(InputError, match=r"refusing to evaluate lora-leak on lmgym/Arith-v0 \(split test, seeds 0\.\.1, "
                                         r"panel \w{12}\): its checkpoint .* trained on 1 of the panel's 2 tasks"):
        study.run(argv=["--episodes", "2", "--modes", "--adapters", f"leak={adapter}", "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()  # refused before any question


def test_lm_agents(load_study):
    study = load_study("lm_agents")
    report = study.run(quick=True)
    assert {r["model"] for r in report["results"]} == {"tiny alfworld-ar", "tiny hotpotqa-ar"}
    for result in report["results"]:
        assert [(r["batch"], r["cache"]) for r in result["runs"]] == [(1, False), (1, True), (2, True)]
        assert all(r["episodes"] == 2 and r["steps"] > 0 for r in result["runs"])
        # greedy decoding: neither the session cache nor batching may change an action
        assert result["same_actions"]
        assert result["encoded_token_ratio"] <= 1.0  # the cache encodes no more prompt tokens than a fresh start
    assert "| tiny hotpotqa-ar |" in study.markdown(report)


def test_preact_latency(load_study):
    summary = load_study("preact_latency").run(quick=True)
    assert summary["envs"] == ["HotPotQA-Gen easy"] and summary["median_decode_s"] > 0 and summary["failures"] == []
    table = summary["table"]
    for agent in ("preact", "dllm-react", "tiny-ar", "teacher"):
        assert f"| HotPotQA-Gen easy | {agent} | 0 | 2 |" in table and f"| HotPotQA-Gen easy | {agent} | 0.1 | 1 |" in table


@needs_data("super_natural_instructions")
def test_promptedit_baselines(load_study):
    study = load_study("promptedit_baselines")
    result = study.run(quick=True)
    assert set(result["tasks"]) == {"SuperNI"} and not result["skipped"]
    data = result["tasks"]["SuperNI"]
    table = data["baselines"]
    assert set(table) == {"static", "random", "greedy"}
    assert table["static"]["generator_calls"] == 0 and table["greedy"]["generator_calls"] > 2
    # SuperNI: the default generator writes valid records once the prompt names every field
    assert table["greedy"]["reward"] > table["static"]["reward"]
    assert data["seconds_per_cycle"]["generate"] > 0 and data["seconds_per_cycle"]["judge"] > 0
    assert "| greedy |" in study.markdown(result)


@needs_data("super_natural_instructions")
def test_promptedit_generator(load_study):
    study = load_study("promptedit_generator")
    results = study.run(quick=True)
    assert results["samples"] == study.QUICK_SAMPLES and set(results["smollm2_prompts"]) == {"SuperNI"}
    assert {(r["generator"], r["prompt"]) for r in results["rows"]} == {
        (g, k) for g in ("diffusion", "ar", "rules") for k in study.PROMPT_KINDS}
    for row in results["rows"]:
        assert row["samples"] == study.QUICK_SAMPLES and 0 <= row["tsr"] <= row["schema_valid"] <= row["json_valid"] <= row["samples"]
        assert all(within(row[f"{k}_rate"], row[f"{k}_interval"]) for k in ("json_valid", "schema_valid", "tsr"))


@needs_data("self_instruct")
def test_promptedit_judge(load_study):
    result = load_study("promptedit_judge").run(quick=True)
    assert set(result["tasks"]) == {"SelfInstruct"} and result["rounds"] == 1
    row = result["tasks"]["SelfInstruct"]
    assert row["judge_new_s"] > 0 and row["judge_cached_s"] > 0 and row["floor_s"] > 0
    assert row["seconds_per_cycle_batch64"] == pytest.approx(row["generate_s"] + row["judge_new_s"])


def test_teachers(load_study):
    study = load_study("teachers")
    summary = study.run(quick=True)
    rows = {(r["env"], r["agent"]): r for r in summary["table"]}
    played = {env for env, _ in rows}
    skipped = {note.split(":")[0] for note in summary["notes"]}
    assert {c.label for c in study.CELLS} <= played | skipped and "HotPotQA-Gen-Hard" in played  # no data needed
    for row in rows.values():
        assert row["episodes"] == study.QUICK_EPISODES and within(row["success"], row["success_ci95"])
    # the generated HotPotQA questions are answerable from what the teacher reads
    assert rows["HotPotQA-Gen-Hard", "expert"]["success"] == rows["HotPotQA-Gen-Hard", "teacher"]["success"] == 1.0


@needs_modules("spacy")
@needs_modules("openenv")
def test_env_server(load_study, tmp_path):
    result = load_study("env_server").run(quick=True, out=tmp_path)
    load = result["load"]
    assert load["episodes"] == 40 and load["steps"] > 0 and load["sessions"] >= 40 // 5
    assert 0 < load["step_latency_ms"]["p50"] <= load["step_latency_ms"]["p99"]
    assert result["cross_talk"] == {"checked": 8, "differ": 0, "differing_seeds": []}
    killed = result["killed_client"]
    assert killed["admitted_while_full"] is False and killed["freed_after_s"] is not None
    assert result["restart"]["lost"] == 0 and result["restart"]["serves_again"]
    assert result["restart"]["finished_before_kill"] > 0


def test_webshop_latency(load_study):
    result = load_study("webshop_latency").run(quick=True)
    assert result["sizes"] == [300, 1_000] and [r["num_products"] for r in result["rows"]] == [300, 1_000]
    assert result["rows"][0]["ratio_to_reference"]["search"] == 1.0 and "targets" not in result  # targets are about 100k
    for row in result["rows"]:
        assert row["search"]["n"] > 0 and 0 < row["search"]["median_ms"] <= row["search"]["p95_ms"]
        assert row["expert_success"] == 1.0 and row["peak_rss_mb"] >= row["baseline_rss_mb"] > 0


@needs_modules("bm25s", "Stemmer", "rapidfuzz")
def test_rl(load_study):
    """HotPotQA-Gen from its SFT model: one iteration per estimator, two test episodes each, paired."""
    study = load_study("rl")
    result = study.run(quick=True)
    [family] = result["families"]
    assert family["family"] == "hotpotqa" and within(family["start"]["success"], family["start"]["ci95"])
    assert [r["estimator"] for r in family["runs"]] == list(study.ESTIMATORS)
    for run in family["runs"]:
        assert run["env_steps"] >= 1 and run["env_steps_per_second"] > 0 and run["iterations"] == 1
        assert [c["iterations"] for c in run["curve"]] == [0, 1] and run["curve"][0]["env_steps"] == 0
        test = run["test"]
        assert test["n"] == 2 and within(test["success"], test["ci95"]) and sum(test["ends"].values()) == 2
        assert run["vs_start"]["only_rl"] + run["vs_start"]["only_start"] <= 2 and 0 <= run["vs_start"]["p"] <= 1
    family["command"] = "python studies/rl.py --quick"
    summary = study.docs_summary([family])
    assert len(summary["tables"]["test"]["rows"]) == 4 and len(summary["tables"]["curves"]["rows"]) == 6
    # a family re-run replaces its own rows; the others' rows, headline and command stay as measured
    previous = json.loads((study.DOCS / "summary.json").read_text())
    merged = study.docs_summary([family], previous)
    for table in ("test", "curves", "real"):
        kept = [row for row in previous["tables"][table]["rows"] if "HotPotQA" not in row[0] and "hotpotqa" not in row[0]]
        assert [row for row in merged["tables"][table]["rows"] if row in kept] == kept
        assert all(row in kept or row in summary["tables"][table]["rows"] for row in merged["tables"][table]["rows"])
    assert "python studies/rl.py --quick" in merged["tables"]["test"]["command"]
    assert "--families alfworld" in merged["tables"]["test"]["command"] and "ALFWorld-Gen-v0: best" in merged["headline"]


def test_distill_chooses_each_method_on_dev_and_reports_test(load_study):
    study = load_study("distill")

    def cell(env, name, wins, accuracy=0.5, ablation=False):
        method = "teacher" if name == "teacher" else "sad" if ablation else name.split("-", 1)[1]
        return {"env": env, "name": name, "method": method, "wins": wins, "n": 10, "success": wins / 10,
                "success_ci95": (0.0, 1.0), "act_token_accuracy": accuracy, "ablation": ablation}

    cells = [cell("dev", "small-kd", 1), cell("dev", "tiny-kd", 3), cell("test", "small-kd", 9), cell("test", "tiny-kd", 0),
             cell("dev", "small-sad", 2, 0.4), cell("dev", "tiny-sad", 2, 0.7), cell("test", "small-sad", 5),
             cell("test", "tiny-sad", 1), cell("dev", "small-sad-no-curriculum", 9, ablation=True),
             cell("dev", "teacher", 8)]
    chosen = {c["method"]: c for c in study.chosen_on_dev(cells, "dev", "test")}
    assert set(chosen) == {"kd", "sad"}
    assert chosen["kd"]["student"] == "tiny-kd" and chosen["kd"]["test_wins"] == 0  # test's 9/10 chooses nothing
    assert chosen["sad"]["student"] == "tiny-sad" and chosen["sad"]["test_wins"] == 1  # the dev tie: higher accuracy
    assert "tiny-kd | 3 / 10 | 0.00" in study.chosen_table(list(chosen.values()), "dev", "test")


# The grounded teacher's wins on the first 2 test tasks of each twin (WebShop's wins 78% of its panel)
@pytest.mark.parametrize("family, twin, teacher_wins", [("alfworld", "ALFWorld-Gen test", 2),
                                                        ("hotpotqa", "HotPotQA-Gen test", 2),
                                                        ("webshop", "WebShop-Gen test", 1)])
def test_ladder(load_study, tmp_path, family, twin, teacher_wins):
    """Teacher and random on 2 test tasks of each family's twin: the same tasks, paired, in the table."""
    study = load_study("ladder")
    assert set(study.FAMILIES) == {"alfworld", "hotpotqa", "webshop"}  # a new family joins this test
    summary = study.run(quick=True, family=family, out=tmp_path)
    cells = {c["rung"]: c for c in summary["cells"]}
    assert set(cells) == {"teacher", "random"} and {c["env"] for c in cells.values()} == {twin}
    for cell in cells.values():
        assert cell["episodes"] == 2 and within(cell["success_rate"], cell["success_ci95"]) and cell["training"] is None
        assert cell["command"] == f"python studies/ladder.py --family {family} --rung {cell['rung']}"
    assert cells["teacher"]["wins"] == teacher_wins and cells["teacher"]["mean_return"] > cells["random"]["mean_return"]
    [pair] = summary["mcnemar"]
    assert (pair["first"], pair["second"], pair["n"]) == ("teacher", "random", 2)
    assert pair["only_first"] + pair["only_second"] <= 2 and 0 < pair["p"] <= 1
    assert f"| {twin} | teacher vs random | 2 |" in study.markdown(summary)
    assert (tmp_path / family / "summary.md").is_file()


def test_ladder_tiny_rung_plays_the_installed_model_and_reads_its_cost(load_study, tmp_path):
    """`tiny-sft` plays the family's installed 0.9M model; its training column is that model's
    last run as its meta records it, marked as such."""
    from lmgym.models.checkpoints import read_meta

    study = load_study("ladder")
    [cell] = study.run(quick=True, family="hotpotqa", rungs=("tiny-sft",), out=tmp_path)["cells"]
    assert cell["rung"] == "tiny-sft" and cell["episodes"] == 2 and cell["tokens_per_episode"] > 0
    steps = read_meta("react/hotpotqa-preact-ar")["step"]
    assert cell["training"] == {"steps": steps, "env_steps": None, "train_tokens": None, "wall_seconds": None,
                                "last_stage": True}
    assert study.cell_row(cell)[-1] == f"{steps:,} steps (last stage)"


def test_ladder_rl_rung_is_refused_in_one_line_where_the_family_has_no_rl_stages(load_study, tmp_path):
    """ALFWorld's SFT rung wins no train episode, so it lists no RL stages: nothing is trained."""
    from lmgym.errors import InputError

    study = load_study("ladder")
    assert not study.FAMILIES["alfworld"].rl_stages and study.FAMILIES["hotpotqa"].rl_stages
    with pytest.raises(InputError, match="alfworld has no RL rung") as raised:
        study.build_rl("alfworld", tmp_path)
    assert "\n" not in str(raised.value) and not any(tmp_path.iterdir())


def test_ladder_stages_train_each_count_once_and_keep_each_checkpoint(load_study, tmp_path):
    """`keep_stages`: a stage's checkpoint is copied whole as step-N; a rerun skips the kept stages."""
    study = load_study("ladder")
    trained = []

    def train_to(steps):
        trained.append(steps)
        (tmp_path / "checkpoint").mkdir(exist_ok=True)
        (tmp_path / "checkpoint" / "step.txt").write_text(str(steps))

    kept = study.keep_stages(tmp_path, (4, 8), train_to)
    assert [p.name for p in kept] == ["step-4", "step-8"] and trained == [4, 8]
    assert [(p / "step.txt").read_text() for p in kept] == ["4", "8"]
    assert study.keep_stages(tmp_path, (4, 8, 12), train_to) == kept + [tmp_path / "step-12"] and trained == [4, 8, 12]
