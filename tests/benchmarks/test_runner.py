"""The benchmark runner: paired seeds, identical reruns, resume, backends, reports, CLI."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmgym.benchmarks.backends.processes import ProcessBackend
from lmgym.benchmarks.cli import run as bench_cli
from lmgym.benchmarks.runner import NONDETERMINISTIC_FIELDS, SpecMismatchError, read_rows, run_benchmark
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec
from lmgym.benchmarks.suites import smoke_suite
from lmgym.stats import wilson_interval

HERE = Path(__file__).resolve().parent
SPEC = BenchmarkSpec("t", (EnvSpec("lmgym/KeyDoor-v0"), EnvSpec("lmgym/KeyDoor-v0", {"size": 3}, label="kd3")),
                     (AgentSpec("random"), AgentSpec("expert")), episodes=4, base_seed=7)


def comparable(rows):
    """Rows without wall time, sorted by key: what must match between two runs."""
    return sorted(({k: v for k, v in r.items() if k not in NONDETERMINISTIC_FIELDS} for r in rows),
                  key=lambda r: r["key"])


@pytest.fixture(scope="module")
def reference_rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    run_benchmark(SPEC, out, quiet=True, plots=False)
    return comparable(read_rows(out))


def test_outputs_and_paired_seeds(tmp_path, reference_rows):
    summary = run_benchmark(SPEC, tmp_path, quiet=True)
    for name in ("spec.json", "episodes.jsonl", "summary.json", "summary.md", "success.png", "returns.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    rows = read_rows(tmp_path)
    assert len(rows) == 2 * 2 * 4
    assert {r["seed"] for r in rows if r["episode"] == 2} == {9}  # base_seed + k for every env and agent
    # The expert wins every KeyDoor episode; the summary's counts come from the rows.
    cells = {(c["env"], c["agent"]): c for c in summary["cells"]}
    assert cells["kd3", "expert"]["success_rate"] == 1.0
    assert cells["kd3", "expert"]["success_ci95"][0] == pytest.approx(0.510, abs=1e-3)  # Wilson, 4/4
    assert cells["lmgym/KeyDoor-v0", "random"]["episodes"] == 4
    assert json.loads((tmp_path / "summary.json").read_text())["cells"] == summary["cells"]
    assert "| kd3 | expert | 4 | 1.00 [0.51, 1.00]" in (tmp_path / "summary.md").read_text()
    assert comparable(rows) == reference_rows  # a rerun gives identical rows apart from wall time


def test_resume_after_interrupt_loses_and_repeats_nothing(tmp_path, reference_rows):
    seen = []

    def interrupt_after_five(row):
        seen.append(row)
        if len(seen) == 5:
            raise KeyboardInterrupt  # what Ctrl-C raises in the middle of a run

    with pytest.raises(KeyboardInterrupt):
        run_benchmark(SPEC, tmp_path, quiet=True, plots=False, on_row=interrupt_after_five)
    assert len(read_rows(tmp_path)) == 5
    with open(tmp_path / "episodes.jsonl", "a") as f:
        f.write('{"key": "half a line from a cra')  # a crash in the middle of an append
    run_benchmark(SPEC, tmp_path, quiet=True, plots=False)
    lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 16 and len({json.loads(line)["key"] for line in lines}) == 16
    assert comparable(read_rows(tmp_path)) == reference_rows


def test_resume_after_sigkill(tmp_path):
    marker = tmp_path / "killed"
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(
        "id: kill\nepisodes: 6\nenvs: [lmgym/KeyDoor-v0]\n"
        f"agents:\n  - {{name: random, kind: 'faulty_agents:KillProcessOnce', kwargs: {{seed: 3, marker: '{marker}'}}}}\n")
    command = [sys.executable, "-m", "lmgym.benchmarks.cli", str(spec_file), "--out", str(tmp_path / "out"), "--quiet",
               "--no-plots"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == -9 and marker.exists(), first.stderr[-2000:]
    assert [r["episode"] for r in read_rows(tmp_path / "out")] == [0, 1, 2]
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr[-2000:]
    assert [r["episode"] for r in read_rows(tmp_path / "out")] == [0, 1, 2, 3, 4, 5]
    assert "| lmgym/KeyDoor-v0 | random | 6 |" in second.stdout


def test_a_folder_holds_one_spec_and_says_what_differs(tmp_path, capsys):
    run_benchmark(SPEC, tmp_path, quiet=True, plots=False)
    other = BenchmarkSpec("t", SPEC.envs, SPEC.agents, episodes=5, base_seed=7)
    with pytest.raises(SpecMismatchError, match="another spec \\(episodes: 4 in the folder, 5 requested\\)"):
        run_benchmark(other, tmp_path, quiet=True, plots=False)
    capsys.readouterr()
    run_benchmark(SPEC, tmp_path, quiet=True, plots=False)  # the same spec again: nothing to run
    assert f"{tmp_path}: complete (16 episodes); summary rewritten" in capsys.readouterr().err


def test_spec_json_records_the_code_that_wrote_the_folder(tmp_path, capsys):
    import lmgym

    with pytest.raises(KeyboardInterrupt):
        run_benchmark(SPEC, tmp_path, quiet=True, plots=False, on_row=_stop_after(3))
    written = json.loads((tmp_path / "spec.json").read_text())
    assert written["written_by"]["lmgym_version"] == lmgym.__version__
    assert written["written_by"]["git_commit"] is None or len(written["written_by"]["git_commit"]) == 40
    assert BenchmarkSpec.from_dict(written) == SPEC  # spec.json is a spec file too
    written["written_by"] = {"lmgym_version": "0.0.1", "git_commit": "0" * 40, "dirty": False}
    (tmp_path / "spec.json").write_text(json.dumps(written))
    capsys.readouterr()
    run_benchmark(SPEC, tmp_path, quiet=True, plots=False)
    err = capsys.readouterr().err
    assert "resuming, 3 of 16 episodes done, 13 to run" in err
    assert f"written by lmgym 0.0.1 (commit {'0' * 40}" in err and "new rows may differ" in err


def _stop_after(count):
    """An `on_row` hook that interrupts the run (as Ctrl-C does) after `count` rows."""
    seen = []

    def stop(row):
        seen.append(row)
        if len(seen) == count:
            raise KeyboardInterrupt

    return stop


def test_failing_agent_is_a_reported_error_not_a_loss_and_is_retried_on_resume(tmp_path, capsys):
    marker = tmp_path / "raised"
    spec = BenchmarkSpec("err", (EnvSpec("lmgym/KeyDoor-v0"),),
                         (AgentSpec("flaky", "faulty_agents:RaisesOnce", {"seed": 1, "marker": str(marker)}),),
                         episodes=3)
    [cell] = run_benchmark(spec, tmp_path / "out", quiet=True, plots=False)["cells"]
    assert cell["episodes"] == 2 and cell["errors"] == 1  # the rates are over the 2 finished episodes
    assert cell["success_ci95"] == list(wilson_interval(cell["wins"], 2))
    assert "RuntimeError: a one-off failure" in cell["first_error"]
    assert "| flaky | 2/3 |" in (tmp_path / "out" / "summary.md").read_text()
    [cell] = run_benchmark(spec, tmp_path / "out", quiet=True, plots=False)["cells"]
    assert cell["episodes"] == 3 and cell["errors"] == 0  # retried, not counted as done
    assert "1 of them retried after an error" in capsys.readouterr().err
    assert sorted(r["episode"] for r in read_rows(tmp_path / "out")) == [0, 1, 2]


def test_an_env_that_fails_to_start_is_an_error_and_a_failing_exit(tmp_path, capsys):
    import gymnasium as gym

    from lmgym.benchmarks import suites
    from lmgym.envs.registry import ENVS, EnvEntry, register_env

    register_env(EnvEntry("lmgym/Broken-v0", "faulty_agents:BrokenEnv", "raises when made", max_episode_steps=5))
    try:
        notes = []
        assert [env_id for env_id, _ in suites.usable_envs(["lmgym/Broken-v0"], notes)] == ["lmgym/Broken-v0"]
        assert notes == []  # not "left out": only missing data or modules are
        code = bench_cli(["smoke", "--envs", "lmgym/Broken-v0", "lmgym/KeyDoor-v0", "--agents", "random",
                          "--episodes", "2", "--out", str(tmp_path), "--quiet", "--no-plots"])
        assert code == 1
        out = capsys.readouterr().out
        assert "| lmgym/Broken-v0 | random | 0/2 | - |" in out and "OSError: the engine's shared library" in out
    finally:
        ENVS.pop("lmgym/Broken-v0")
        gym.registry.pop("lmgym/Broken-v0")


def test_process_backend_matches_in_process_and_survives_a_killed_worker(tmp_path, reference_rows):
    spec = BenchmarkSpec("t", SPEC.envs, SPEC.agents, episodes=4, base_seed=7)
    run_benchmark(spec, tmp_path / "a", backend=ProcessBackend(workers=2), quiet=True, plots=False)
    assert comparable(read_rows(tmp_path / "a")) == reference_rows

    marker = tmp_path / "killed"
    spec = BenchmarkSpec("k", (EnvSpec("lmgym/KeyDoor-v0"),),
                         (AgentSpec("random", "faulty_agents:KillProcessOnce", {"seed": 2, "marker": str(marker)}),),
                         episodes=6)
    backend = ProcessBackend(workers=2)
    run_benchmark(spec, tmp_path / "b", backend=backend, quiet=True, plots=False)
    assert marker.exists() and backend.restarts == 1
    rows = read_rows(tmp_path / "b")
    assert sorted(r["episode"] for r in rows) == list(range(6))


def test_cli_overrides_and_prints_the_table(tmp_path, capsys):
    code = bench_cli(["smoke", "--envs", "lmgym/KeyDoor-v0(size=1)", "--agents", "random", "expert",
                      "--episodes", "2", "--out", str(tmp_path), "--quiet", "--no-plots"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| lmgym/KeyDoor-v0(size=1) | expert | 2 | 1.00" in printed
    spec = json.loads((tmp_path / "spec.json").read_text())
    assert spec["envs"][0]["kwargs"] == {"size": 1} and spec["episodes"] == 2


def test_cli_selects_the_specs_own_entries_by_name(tmp_path):
    """--envs and --agents name a spec's entries (label, id, agent name) with their kwargs kept; an
    env restricted to some agents plays only those still chosen, and drops out when none is."""
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(
        "id: pick\nepisodes: 2\n"
        "envs:\n  - id: lmgym/KeyDoor-v0\n  - {id: lmgym/KeyDoor-v0, kwargs: {size: 1}, label: kd1, agents: [expert]}\n"
        "agents:\n  - random\n  - {name: expert1, kind: expert}\n  - expert\n")
    out = tmp_path / "a"
    assert bench_cli([str(spec_file), "--envs", "kd1", "--agents", "expert", "random", "--out", str(out),
                      "--quiet", "--no-plots"]) == 0
    ran = json.loads((out / "spec.json").read_text())
    assert [(e["label"], e["kwargs"], e["agents"]) for e in ran["envs"]] == [("kd1", {"size": 1}, ["expert"])]
    assert {r["agent"] for r in read_rows(out)} == {"expert"}
    out = tmp_path / "b"
    assert bench_cli([str(spec_file), "--agents", "random", "expert1", "--out", str(out), "--quiet", "--no-plots"]) == 0
    ran = json.loads((out / "spec.json").read_text())
    assert [e["id"] for e in ran["envs"]] == ["lmgym/KeyDoor-v0"]
    assert [(a["name"], a["kind"]) for a in ran["agents"]] == [("random", ""), ("expert1", "expert")]


def test_cli_bad_input_is_one_line_not_a_traceback(tmp_path, capsys):
    assert bench_cli([str(tmp_path / "missing.yaml"), "--quiet"]) == 2
    assert bench_cli(["smoke", "--agents", "no_such_agent", "--out", str(tmp_path), "--quiet"]) == 2
    assert "unknown agent 'no_such_agent'" in capsys.readouterr().err
    assert bench_cli(["smoke", "--envs", "lmgym/NoSuch-v0", "--out", str(tmp_path), "--quiet"]) == 2
    assert "unknown env id 'lmgym/NoSuch-v0'" in capsys.readouterr().err
    assert bench_cli(["smoke", "--out", str(tmp_path), "--quiet", "--no-plots"]) == 0
    assert bench_cli(["smoke", "--episodes", "9", "--out", str(tmp_path), "--quiet"]) == 2
    assert "holds results of another spec (episodes: 3 in the folder, 9 requested)" in capsys.readouterr().err
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("id: x\nenvs: [lmgym/KeyDoor-v0\nagents: random\n")
    assert bench_cli([str(bad_yaml), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lmgym bench: error: {bad_yaml} is not valid YAML") and len(err.strip().splitlines()) == 1
    assert bench_cli(["smoke", "--agents", "nosuchmod:Foo", "--out", str(tmp_path / "x"), "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == ("lmgym bench: error: agent 'nosuchmod:Foo': no module named 'nosuchmod'")


def test_smoke_suite_comes_from_the_registry():
    spec = smoke_suite()
    assert {e.id for e in spec.envs} >= {"lmgym/KeyDoor-v0"}
    assert [a.name for a in spec.agents] == ["random", "expert"]


def test_plots_show_zero_success_and_integer_episodes(tmp_path, monkeypatch):
    import matplotlib.figure

    from lmgym.benchmarks.report import plot_returns, plot_success, summarize

    spec = BenchmarkSpec("p", (EnvSpec("lmgym/KeyDoor-v0"),), (AgentSpec("random"), AgentSpec("expert")), episodes=3)
    rows = [{"key": f"k|{agent}|{k}", "env": "lmgym/KeyDoor-v0", "agent": agent, "episode": k, "won": agent == "expert",
             "return": float(agent == "expert"), "steps": 5, "invalid_actions": 0, "prompt_tokens": 0,
             "completion_tokens": 0, "seconds": 0.1, "error": None} for agent in ("random", "expert") for k in range(3)]
    figures = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda self, *a, **k: figures.append(self))
    summary = summarize(spec, rows)
    plot_success(summary, tmp_path / "s.png")
    plot_returns(summary, rows, tmp_path / "r.png")
    success, returns = (f.axes[0] for f in figures)
    assert {t.get_text() for t in success.texts} == {"0/3", "3/3"}  # the zero bar is labelled, not blank
    assert any(min(seg[:, 1]) == 0 == max(seg[:, 1]) for c in success.collections for seg in c.get_segments())
    assert "Wilson 95% CI" in success.get_ylabel()
    ticks = returns.xaxis.get_major_locator().tick_values(0, 2)
    assert all(float(t).is_integer() for t in ticks)
    assert {t.get_text() for t in returns.get_legend().get_texts()} == {"random (n=3)", "expert (n=3)"}


def test_format_error_rate_counts_lm_steps_and_is_blank_for_agents_that_write_no_text():
    from lmgym.benchmarks.report import summarize, summary_markdown

    spec = BenchmarkSpec("f", (EnvSpec("lmgym/KeyDoor-v0"),), (AgentSpec("random"), AgentSpec("model")), episodes=2)
    rows = [{"key": f"k|{agent}|{k}", "env": "lmgym/KeyDoor-v0", "agent": agent, "episode": k, "won": False,
             "return": 0.0, "steps": 4, "invalid_actions": 0, "prompt_tokens": 10 * (agent == "model"),
             "completion_tokens": 5 * (agent == "model"), "format_errors": k * (agent == "model"), "seconds": 0.1,
             "error": None} for agent in ("random", "model") for k in range(2)]
    cells = {c["agent"]: c for c in summarize(spec, rows)["cells"]}
    assert cells["model"]["format_error_rate"] == 1 / 8  # one of its eight steps had no Action: line
    assert cells["random"]["format_error_rate"] is None
    table = summary_markdown(summarize(spec, rows))
    assert "format-error rate" in table and "| 0.12 |" in table
