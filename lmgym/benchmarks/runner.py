"""Run a benchmark spec into a folder, resumably, on any backend.

``run_benchmark(spec, "bench-out/smoke")`` writes:

* ``spec.json``: the spec (a folder holds one spec; another spec there is refused),
* ``episodes.jsonl``: one row per episode, appended atomically as each finishes
  (`lmgym.io.append_jsonl`), so a crash loses at most the episodes in flight,
* ``transcripts.jsonl`` (unless ``transcripts=False``): each episode in the rollout format
  (`lmgym.rollouts`: observations, completions with their spans, actions, rewards, info) plus
  its row's ``key``; the row's ``transcript`` column names this file (None when not recorded).
  A transcript is written before its row, so a crash between the two leaves a transcript
  whose episode reruns on resume: readers take the last transcript of a key,
* ``summary.json``, ``summary.md``, ``success.png``, ``returns.png`` (`lmgym.benchmarks.report`).

Resume: calling it again with the same folder repairs a partial last line, skips every job
whose row is there and runs the rest; rows are keyed ``env|agent|episode``, and a key already
written is never written again, so no episode is lost or counted twice.

Rows are a function of the spec (seed ``base_seed + k``): re-running gives identical rows
apart from ``seconds``, whatever the backend.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
from tqdm import tqdm

from lmgym.agents.registry import resolve_agent
from lmgym.benchmarks.backends import Backend, all_jobs, job_key, make_backend
from lmgym.benchmarks.backends.worker import ROLLOUT_FIELD
from lmgym.benchmarks.report import write_report
from lmgym.benchmarks.spec import BenchmarkSpec
from lmgym.io import append_jsonl, atomic_write_text, read_jsonl, repair_jsonl

#: Row fields that legitimately differ between two runs of the same spec.
NONDETERMINISTIC_FIELDS = ("seconds",)
#: The file of a run folder that holds its episodes' transcripts (rollout format).
TRANSCRIPTS_FILE = "transcripts.jsonl"


class SpecMismatchError(ValueError):
    """The output folder already holds results of a different spec."""


def read_rows(out: str | Path) -> list[dict[str, Any]]:
    """The rows of ``episodes.jsonl``, first occurrence of each key only."""
    path = Path(out) / "episodes.jsonl"
    if not path.exists():
        return []
    rows: dict[str, dict] = {}
    for row in read_jsonl(path):
        rows.setdefault(row["key"], row)
    return list(rows.values())


def _check_names(spec: BenchmarkSpec) -> None:
    """Fail before any episode on a misspelt env id or agent name (KeyError naming it)."""
    for env in spec.envs:
        if env.id not in gym.registry:
            raise KeyError(f"unknown env id {env.id!r}; `lmgym list` shows the registered ids")
    for agent in spec.agents:
        resolve_agent(agent.target)


def _claim_folder(spec: BenchmarkSpec, out: Path) -> None:
    spec_path = out / "spec.json"
    if spec_path.exists():
        existing = json.loads(spec_path.read_text(encoding="utf-8"))
        if existing != json.loads(spec.to_json()):
            raise SpecMismatchError(f"{out} holds results of another spec ({existing.get('id')!r}); "
                                    "use another --out folder or delete it")
    else:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(spec_path, spec.to_json() + "\n")


def run_benchmark(
    spec: BenchmarkSpec,
    out: str | Path,
    *,
    backend: str | Backend = "inprocess",
    workers: int = 2,
    address: str | None = None,
    quiet: bool = False,
    plots: bool = True,
    transcripts: bool = True,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run (or finish) `spec` into `out`; return the summary dict.

    Args:
        backend: ``"inprocess"``, ``"processes"``, ``"ray"`` or a `Backend` instance.
        workers: processes or Ray actors for those backends.
        address: Ray cluster address (``"auto"``, ``"ray://host:10001"``); local Ray if None.
        quiet: no progress bar (CI).
        plots: write the PNG plots.
        transcripts: record each episode's rollout in ``transcripts.jsonl``.
        on_row: called with each new row after it is on disk (tests inject faults here).
    """
    out = Path(out)
    _check_names(spec)
    _claim_folder(spec, out)
    episodes_path = out / "episodes.jsonl"
    repair_jsonl(episodes_path)
    done = {row["key"]: row for row in read_rows(out)}
    jobs = all_jobs(spec)
    pending = [job for job in jobs if job_key(spec, job) not in done]

    if pending:
        runner = make_backend(backend, workers=workers, address=address) if isinstance(backend, str) else backend
        wins = sum(bool(r["won"]) for r in done.values())
        with tqdm(total=len(jobs), initial=len(jobs) - len(pending), desc=spec.id, unit="ep",
                  disable=quiet, dynamic_ncols=True) as bar:
            try:
                runner.start(spec)
                for row in runner.run(pending):
                    rollout = row.pop(ROLLOUT_FIELD, None)
                    if row["key"] in done:  # a retried job that had in fact finished
                        continue
                    row["transcript"] = None
                    if transcripts and rollout is not None:
                        append_jsonl(out / TRANSCRIPTS_FILE, {**rollout, "key": row["key"]})
                        row["transcript"] = TRANSCRIPTS_FILE
                    append_jsonl(episodes_path, row)
                    done[row["key"]] = row
                    wins += bool(row["won"])
                    bar.update(1)
                    bar.set_postfix_str(f"success {wins / len(done):.2f}")
                    if on_row is not None:
                        on_row(row)
            finally:
                runner.close()

    rows = [done[job_key(spec, job)] for job in jobs if job_key(spec, job) in done]
    return write_report(out, spec, rows, plots=plots)
