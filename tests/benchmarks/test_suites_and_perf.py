"""Suites come from the registry and skip what cannot run; the perf section never crashes."""

import textwrap

import pytest

from lmgym.benchmarks import perf, suites
from lmgym.benchmarks.spec import BenchmarkSpec, load_spec, parse_call
from lmgym.envs.registry import ENVS, family_of


def test_default_suite_skips_data_backed_ids_without_lmgym_data(monkeypatch):
    monkeypatch.delenv("LMGYM_DATA", raising=False)
    spec = suites.default_suite(episodes=2)
    data_backed = {i for i, e in ENVS.items() if e.requires_data}
    assert "lmgym/KeyDoor-v0" in {e.id for e in spec.envs}
    assert not data_backed & {e.id for e in spec.envs}
    representatives = set(suites.representative_ids())
    for env_id in data_backed & representatives:
        assert any(note.startswith(env_id) and "LMGYM_DATA is unset" in note for note in spec.notes)
    keydoor = next(e for e in spec.envs if e.id == "lmgym/KeyDoor-v0")
    assert keydoor.agents == ()  # KeyDoor has an expert, so every agent plays it


def test_family_and_representatives():
    assert family_of("lmgym/HotPotQA-Gen-Easy-v0") == "HotPotQA"
    ids = suites.representative_ids()
    assert "lmgym/KeyDoor-v0" in ids and "lmgym/KeyDoor-Large-v0" not in ids
    assert len(ids) == len(set(ids))


def test_spec_files_round_trip(tmp_path):
    yaml_file = tmp_path / "spec.yaml"
    yaml_file.write_text(textwrap.dedent("""\
        id: mine
        episodes: 3
        base_seed: 5
        envs:
          - lmgym/KeyDoor-v0
          - {id: lmgym/KeyDoor-v0, kwargs: {size: 3}, label: big, agents: [random]}
        agents:
          - random
          - {name: best, kind: expert}
        """))
    toml_file = tmp_path / "spec.toml"
    toml_file.write_text(textwrap.dedent("""\
        id = "mine"
        episodes = 3
        base_seed = 5
        agents = ["random", {name = "best", kind = "expert"}]
        [[envs]]
        id = "lmgym/KeyDoor-v0"
        [[envs]]
        id = "lmgym/KeyDoor-v0"
        kwargs = {size = 3}
        label = "big"
        agents = ["random"]
        """))
    from_yaml, from_toml = load_spec(yaml_file), load_spec(toml_file)
    assert from_yaml == from_toml
    assert BenchmarkSpec.from_dict(from_yaml.to_dict()) == from_yaml
    assert from_yaml.seed(2) == 7 and from_yaml.agents[1].target == "expert"
    with pytest.raises(ValueError, match="not in the spec"):
        BenchmarkSpec.from_dict({**from_yaml.to_dict(), "agents": ["random"], "envs": [{"id": "x", "agents": ["best"]}]})


def test_parse_call_reads_yaml_values():
    assert parse_call("lmgym/KeyDoor-v0") == ("lmgym/KeyDoor-v0", {})
    assert parse_call("ppo(path=runs/a b/model.zip, deterministic=true)") == (
        "ppo", {"path": "runs/a b/model.zip", "deterministic": True})
    assert parse_call("lmgym/ALFWorld-v0(task_types=[pick_and_place_simple, look_at_obj_in_light], split=valid_seen)") == (
        "lmgym/ALFWorld-v0", {"task_types": ["pick_and_place_simple", "look_at_obj_in_light"], "split": "valid_seen"})


def test_perf_steps_per_second_and_scripts_that_fail(tmp_path, monkeypatch):
    row = perf.env_steps_per_second("lmgym/KeyDoor-v0", budget_s=0.05)
    assert row["steps"] > 0 and row["steps_per_s"] > 0 and row["family"] == "KeyDoor"
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "good.py").write_text("def run(quick):\n    return {'quick': quick, 'x': 1}\n")
    (tmp_path / "benchmarks" / "bad.py").write_text("def run(quick):\n    raise RuntimeError('broken engine')\n")
    (tmp_path / "benchmarks" / "slow.py").write_text("import time\ndef run(quick):\n    time.sleep(60)\n")
    (tmp_path / "benchmarks" / "claims.py").write_text("def run(quick):\n    return {'failures': ['2x, claimed 3x']}\n")
    monkeypatch.setattr(perf, "REPO_ROOT", tmp_path)
    assert perf.run_script("good", True, 60)["result"] == {"quick": True, "x": 1}
    assert perf.run_script("bad", True, 60) | {"seconds": 0} == {
        "script": "bad", "status": "failed", "seconds": 0, "note": "RuntimeError: broken engine"}
    assert perf.run_script("slow", True, 0.5)["status"] == "timeout"
    assert perf.run_script("absent", True, 60)["status"] == "missing"
    # a script that measured a claim and found it false is a failure, not an "ok" with a note
    assert perf.run_script("claims", True, 60)["status"] == "failed"


def test_scaling_rows_run_for_their_budget():
    rows = perf.rollouts_per_second(budget_s=1.0)
    assert [r["backend"] for r in rows] == ["in-process", "1 process", "2 processes"]
    assert all(r["seconds"] >= 1.0 and r["episodes"] >= perf.ROLLOUT_CHUNK for r in rows)


def test_with_the_shared_data_nothing_is_left_out_but_what_is_declared():
    # CI sets LMGYM_DATA and installs every extra: then no id may be skipped, and a suite may
    # leave out only ids whose declared optional modules are missing here.
    import os

    from lmgym.envs.registry import unavailable_reason

    if not os.environ.get("LMGYM_DATA"):
        pytest.skip("LMGYM_DATA is not set: this checks the CI configuration")
    for env_id, entry in ENVS.items():
        reason = unavailable_reason(entry)
        assert reason is None or "optional modules" in reason, f"{env_id}: {reason}"
    # the suites leave out exactly the unavailable ids (the matrix skips the same ones)
    notes = []
    suites.usable_envs([i for i in ENVS if unavailable_reason(ENVS[i])], notes)
    assert len(notes) == sum(unavailable_reason(e) is not None for e in ENVS.values())
