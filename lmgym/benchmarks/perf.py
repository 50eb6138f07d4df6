"""The performance section of ``make bench`` (``lmgym bench perf``).

1. Environment steps/s per family: the random agent in each representative id for a fixed
   wall-time budget, resets included, reported beside the ratio to ``lmgym/KeyDoor-v0``
   measured in the same run (absolute numbers move with the machine's load; ratios less).
   Making the env and one untimed episode come first: one-time warm-up (data, indexes, spaCy)
   stays out of the rate and is reported apart (``warmup_s``).
2. Rollouts/s of the random agent on ``lmgym/KeyDoor-Large-v0``: in-process, then the process
   backend with 1 and 2 workers (pools started before the clock runs), each for the same wall
   time (tens of seconds, so process start-up cannot dominate); the scaling ratio is
   rollouts/s with 2 workers over rollouts/s with 1.
3. The env engineers' own scripts, every ``benchmarks/<name>.py`` at the repository root, each
   exposing ``run(quick: bool) -> dict``: each runs in a subprocess with a timeout, within a
   shared time budget.

Nothing fails silently: an env that raises, a script that is missing, fails, times out or
returns ``failures`` (claims it checked that do not hold) is listed in ``failures``, and
``lmgym bench perf`` exits 1. Only a script skipped because the shared budget was spent is a
note. Writes ``perf.json`` and ``perf.md`` into the output folder and prints the markdown.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

from lmgym.agents.base import RandomAgent
from lmgym.agents.runner import run_episode
from lmgym.benchmarks.backends import InProcessBackend, all_jobs
from lmgym.benchmarks.backends.processes import ProcessBackend
from lmgym.benchmarks.report import LOAD_NOTE
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec
from lmgym.benchmarks.suites import representative_ids, usable_envs
from lmgym.envs.registry import family_of
from lmgym.io import atomic_write_json, atomic_write_text

REFERENCE_ENV = "lmgym/KeyDoor-v0"
ROLLOUT_ENV = "lmgym/KeyDoor-Large-v0"
REPO_ROOT = Path(__file__).resolve().parents[2]
#: Scripts the families' issues ask for (reported as missing when absent); any other
#: ``benchmarks/*.py`` is run too.
SCRIPTS = ("alfworld_engines", "alfworld_gen", "webshop_latency", "hotpotqa", "diffusion_sampler", "promptedit_judge")


def env_steps_per_second(env_id: str, budget_s: float) -> dict[str, Any]:
    """Random-agent steps/s in `env_id`, episodes seeded 0, 1, ... until `budget_s` passes."""
    start = time.perf_counter()
    env = gym.make(env_id)
    agent = RandomAgent()
    # One untimed episode first: data, indexes and lazily loaded models load there.
    run_episode(env, agent, seed=10**6, env_id=env_id)
    warmup_s = time.perf_counter() - start
    steps = episodes = 0
    start = time.perf_counter()
    while time.perf_counter() - start < budget_s or episodes == 0:
        steps += run_episode(env, agent, seed=episodes, env_id=env_id).length
        episodes += 1
    seconds = time.perf_counter() - start
    env.close()
    return {"env": env_id, "family": family_of(env_id), "steps": steps, "episodes": episodes,
            "seconds": round(seconds, 3), "steps_per_s": round(steps / seconds, 1), "warmup_s": round(warmup_s, 3)}


#: Episodes handed to a backend at a time while its clock runs (enough to keep 2 workers busy).
ROLLOUT_CHUNK = 200


def rollouts_per_second(budget_s: float) -> list[dict[str, Any]]:
    """Random-agent episodes/s on `ROLLOUT_ENV` for `budget_s` each: in-process, then 1 and 2
    worker processes (chunks of `ROLLOUT_CHUNK` episodes until the budget is spent)."""
    spec = BenchmarkSpec("perf-rollouts", (EnvSpec(ROLLOUT_ENV),), (AgentSpec("random"),), episodes=10**6)
    jobs = all_jobs(spec)
    results = []
    for label, backend in (("in-process", InProcessBackend()), ("1 process", ProcessBackend(workers=1)),
                           ("2 processes", ProcessBackend(workers=2))):
        backend.start(spec)
        try:
            done, start = 0, time.perf_counter()
            while time.perf_counter() - start < budget_s:
                done += sum(1 for _ in backend.run(jobs[done:done + ROLLOUT_CHUNK]))
            seconds = time.perf_counter() - start
        finally:
            backend.close()
        results.append({"backend": label, "episodes": done, "seconds": round(seconds, 3),
                        "rollouts_per_s": round(done / seconds, 1)})
    return results


def run_script(name: str, quick: bool, timeout_s: float) -> dict[str, Any]:
    """``benchmarks/<name>.py``'s ``run(quick)`` in a subprocess, or a note saying why not."""
    path = REPO_ROOT / "benchmarks" / f"{name}.py"
    if not path.exists():
        return {"script": name, "status": "missing", "note": f"{path.relative_to(REPO_ROOT)} not found"}
    code = ("import importlib.util, json, sys\n"
            f"spec = importlib.util.spec_from_file_location('bench_script', {str(path)!r})\n"
            "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
            f"result = module.run(quick={quick!r})\n"
            "sys.stdout.write('\\n@@RESULT@@' + json.dumps(result, default=str))\n")
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s,
                              cwd=REPO_ROOT)
    except subprocess.TimeoutExpired:
        return {"script": name, "status": "timeout", "note": f"no result within {timeout_s:.0f} s"}
    seconds = round(time.perf_counter() - start, 1)
    if done.returncode != 0 or "@@RESULT@@" not in done.stdout:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"script": name, "status": "failed", "seconds": seconds, "note": last[:300]}
    result = json.loads(done.stdout.rsplit("@@RESULT@@", 1)[1])
    failed = result.get("failures") if isinstance(result, dict) else None
    if failed:  # the script ran and found that something it checks does not hold
        return {"script": name, "status": "failed", "seconds": seconds, "note": "; ".join(failed)[:600], "result": result}
    return {"script": name, "status": "ok", "seconds": seconds, "result": result}


def perf_markdown(report: dict[str, Any]) -> str:
    lines = ["## Performance", ""]
    if report["failures"]:
        lines += ["**FAILED:**"] + [f"- {f}" for f in report["failures"]] + [""]
    lines += ["### Environment steps/s (random agent, resets included; warm-up apart)", "",
              f"| env | steps | seconds | steps/s | ratio to {REFERENCE_ENV} | warm-up (s) |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    reference = next((r["steps_per_s"] for r in report["envs"] if r["env"] == REFERENCE_ENV and "error" not in r), None)
    for r in report["envs"]:
        if "error" in r:
            lines.append(f"| {r['env']} | FAILED: {r['error']} | | | | |")
            continue
        ratio = f"{r['steps_per_s'] / reference:.3f}" if reference else "-"
        lines.append(f"| {r['env']} | {r['steps']} | {r['seconds']} | {r['steps_per_s']} | {ratio} | {r['warmup_s']} |")
    lines += ["", f"### Rollouts/s ({ROLLOUT_ENV}, random agent)", "",
              "| backend | episodes | seconds | rollouts/s |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {r['backend']} | {r['episodes']} | {r['seconds']} | {r['rollouts_per_s']} |" for r in report["rollouts"]]
    lines += ["", f"Scaling ratio, 2 processes / 1 process: **{report['scaling_ratio']:.2f}** "
              f"({report['cpus']} CPUs, 1-minute load average {report['load_average_1min']:.1f} at the end: "
              "a ratio near 2 needs two idle cores)", "",
              "### Family benchmark scripts (benchmarks/*.py, quick mode)", ""]
    for s in report["scripts"]:
        if s["status"] == "ok":
            lines.append(f"- `{s['script']}` ({s['seconds']} s): `{json.dumps(s['result'], sort_keys=True)[:1500]}`")
        else:
            lines.append(f"- `{s['script']}`: {s['status'].upper() if s['status'] != 'skipped' else s['status']} ({s['note']})")
    if report["notes"]:
        lines += ["", "Left out:"] + [f"- {n}" for n in report["notes"]]
    lines += ["", f"_{LOAD_NOTE}_", ""]
    return "\n".join(lines)


def run_perf(out: Path, quick: bool = True, quiet: bool = False) -> dict[str, Any]:
    """Measure everything above, write perf.json and perf.md into `out`, print the markdown."""
    # Quick mode keeps `make bench` (default suite + this) under 10 minutes on a loaded 2-core
    # machine: the family scripts share one budget, each capped, the rest noted as skipped.
    budget_s, rollout_s, script_timeout_s, scripts_budget_s = (2.0, 20.0, 120.0, 300.0) if quick else (
        10.0, 60.0, 600.0, 3600.0)
    notes: list[str] = []
    failures: list[str] = []
    env_ids = [env_id for env_id, _ in usable_envs(representative_ids(), notes)]
    envs = []
    for env_id in env_ids:
        if not quiet:
            print(f"perf: {env_id} steps/s ...", file=sys.stderr, flush=True)
        try:
            envs.append(env_steps_per_second(env_id, budget_s))
        except Exception as error:  # a broken env is a failed measurement, reported as one
            message = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
            envs.append({"env": env_id, "family": family_of(env_id), "error": message})
            failures.append(f"{env_id}: {message}")
    if not quiet:
        print("perf: rollouts/s with 1 and 2 workers ...", file=sys.stderr, flush=True)
    rollouts = rollouts_per_second(rollout_s)
    scripts = []
    deadline = time.perf_counter() + scripts_budget_s
    found = {path.stem for path in (REPO_ROOT / "benchmarks").glob("*.py") if not path.stem.startswith("_")}
    for name in sorted(set(SCRIPTS) | found):
        left = deadline - time.perf_counter()
        if left < 10:
            scripts.append({"script": name, "status": "skipped",
                            "note": f"the scripts' {scripts_budget_s:.0f} s budget was spent"})
            continue
        if not quiet:
            print(f"perf: benchmarks/{name}.py ...", file=sys.stderr, flush=True)
        scripts.append(run_script(name, quick, min(script_timeout_s, left)))
    failures += [f"benchmarks/{s['script']}.py: {s['status']} ({s['note']})" for s in scripts
                 if s["status"] in ("missing", "failed", "timeout")]
    by_backend = {r["backend"]: r["rollouts_per_s"] for r in rollouts}
    report = {"quick": quick, "load_average_1min": os.getloadavg()[0], "cpus": os.cpu_count(), "envs": envs, "rollouts": rollouts,
              "scaling_ratio": by_backend["2 processes"] / by_backend["1 process"],
              "scripts": scripts, "notes": notes, "failures": failures, "load_note": LOAD_NOTE}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "perf.json", report)
    markdown = perf_markdown(report)
    atomic_write_text(out / "perf.md", markdown)
    print(markdown)
    return report
