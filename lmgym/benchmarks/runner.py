"""Run a benchmark spec into a folder, resumably, on any backend.

``run_benchmark(spec, "bench-out/smoke")`` writes:

* ``spec.json``: the spec, and under ``written_by`` the lmgym version and git commit that
  wrote the folder (a folder holds one spec; another spec there is refused, naming what differs),
* ``episodes.jsonl``: one row per episode (`lmgym.benchmarks.rows`), appended atomically as each
  finishes (`lmgym.io.append_jsonl`), so a crash loses at most the episodes in flight,
* ``transcripts.jsonl`` (unless ``transcripts=False``): each episode in the rollout format
  (`lmgym.rollouts`: observations, completions with their spans, actions, rewards, info) plus
  its row's ``key``; the row's ``transcript`` column names this file (None when not recorded).
  A transcript is written before its row, so a crash between the two leaves a transcript
  whose episode reruns on resume: readers take the last transcript of a key,
* ``summary.json``, ``summary.md``, ``success.png``, ``returns.png`` (`lmgym.benchmarks.report`).

Resume: calling it again with the same folder repairs a partial last line, skips every job
whose row is there and runs the rest; rows are keyed ``env|agent|episode``, and a finished
key is never written again, so no episode is lost or counted twice. A row that records an
error is not finished: the next run retries it (the summary counts errors apart, never as
losses). Resuming says how much was done, and that the folder was written by other code when
the version or commit differ; a complete folder only gets its summary rewritten.

Rows are a function of the spec (seed ``base_seed + k``): re-running gives identical rows
apart from ``seconds``, whatever the backend. Every row names its env's panel (``panel``: the
hash of its task ids, also in spec.json) and ``contaminated`` (`BenchmarkSpec.row_marks`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
from tqdm import tqdm

import lmgym
from lmgym.agents.registry import resolve_agent
from lmgym.benchmarks.backends import Backend, make_backend
from lmgym.benchmarks.report import write_report
from lmgym.benchmarks.rows import ROLLOUT_FIELD, all_jobs, job_key
from lmgym.benchmarks.spec import BenchmarkSpec
from lmgym.io import append_jsonl, atomic_write_json, read_jsonl, repair_jsonl

#: Row fields that legitimately differ between two runs of the same spec.
NONDETERMINISTIC_FIELDS = ("seconds",)
#: The file of a run folder that holds its episodes' transcripts (rollout format).
TRANSCRIPTS_FILE = "transcripts.jsonl"


class SpecMismatchError(ValueError):
    """The output folder already holds results of a different spec."""


def read_rows(out: str | Path) -> list[dict[str, Any]]:
    """The rows of ``episodes.jsonl``, one per key: its first finished row, else its last error row."""
    path = Path(out) / "episodes.jsonl"
    if not path.exists():
        return []
    rows: dict[str, dict] = {}
    for row in read_jsonl(path):
        kept = rows.get(row["key"])
        if kept is None or kept.get("error") is not None:
            rows[row["key"]] = row
    return list(rows.values())


def _check_names(spec: BenchmarkSpec) -> None:
    """Fail before any episode on a misspelt env id or agent name (KeyError naming it)."""
    for env in spec.envs:
        if env.id not in gym.registry:
            raise KeyError(f"unknown env id {env.id!r}; `lmgym list` shows the registered ids")
    for agent in spec.agents:
        resolve_agent(agent.target)


def code_version() -> dict[str, Any]:
    """The lmgym version and, in a git checkout, its commit (``dirty`` when files differ from it)."""
    root = Path(lmgym.__file__).resolve().parent.parent
    version: dict[str, Any] = {"lmgym_version": lmgym.__version__, "git_commit": None, "dirty": None}
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if commit.returncode == 0:
            status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                    capture_output=True, text=True, timeout=10)
            version.update(git_commit=commit.stdout.strip(), dirty=bool(status.stdout.strip()))
    except (OSError, subprocess.TimeoutExpired):  # no git here: the version alone
        pass
    return version


def _differences(existing: dict[str, Any], requested: dict[str, Any]) -> str:
    """``"episodes: 4 in the folder, 5 requested; ..."`` for the spec fields that differ."""
    parts = []
    differing = [key for key in sorted(set(existing) | set(requested)) if existing.get(key) != requested.get(key)]
    for key in differing:
        if key == "panels" and len(differing) > 1:  # follows from the other fields; alone it means the tasks changed
            continue
        here, wanted = (json.dumps(v, sort_keys=True)[:120] for v in (existing.get(key), requested.get(key)))
        parts.append(f"{key}: {here} in the folder, {wanted} requested")
    return "; ".join(parts)


def _folder_spec(spec: BenchmarkSpec, out: Path) -> dict[str, Any] | None:
    """The ``written_by`` of the folder's spec.json (``{}`` if it has none), None for a new
    folder; SpecMismatchError naming what differs when the folder holds another spec."""
    spec_path = out / "spec.json"
    if not spec_path.exists():
        return None
    existing = json.loads(spec_path.read_text(encoding="utf-8"))
    written_by = existing.pop("written_by", None) or {}
    requested = json.loads(spec.to_json())
    if existing != requested:
        raise SpecMismatchError(f"{out} holds results of another spec ({_differences(existing, requested)}); "
                                "use another --out folder or delete it")
    return written_by


def check_spec(spec: BenchmarkSpec, out: str | Path) -> None:
    """Fail before any work on input that cannot run: an unknown env id or agent name (KeyError,
    ImportError, AttributeError naming it), a folder holding another spec (SpecMismatchError) or
    a checkpoint evaluated on tasks it trained on (InputError, unless ``allow_contaminated``)."""
    _check_names(spec)
    _folder_spec(spec, Path(out))
    spec.contamination  # noqa: B018  computed now: a contaminated cell is refused before any episode


def _claim_folder(spec: BenchmarkSpec, out: Path) -> dict[str, Any] | None:
    """Write spec.json (and who wrote it) into a new folder; an existing folder's ``written_by``."""
    written_by = _folder_spec(spec, out)
    if written_by is None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / "spec.json", {**json.loads(spec.to_json()), "written_by": code_version()})
    return written_by


def _say_where_we_start(out: Path, written_by: dict[str, Any] | None, total: int, pending: int, retried: int) -> None:
    """One line on resuming (and on code that differs from the code that started the folder)."""
    if written_by is None:
        return
    if pending == 0:
        print(f"{out}: complete ({total} episodes); summary rewritten", file=sys.stderr)
        return
    line = f"{out}: resuming, {total - pending} of {total} episodes done, {pending} to run"
    if retried:
        line += f" ({retried} of them retried after an error)"
    print(line, file=sys.stderr)
    now = code_version()
    then = {k: written_by.get(k) for k in now}
    if not written_by:
        print(f"{out}: note: its spec.json does not record the code that wrote it (older lmgym); "
              f"this is lmgym {now['lmgym_version']} (commit {now['git_commit']})", file=sys.stderr)
    elif then != now:
        print(f"{out}: note: written by lmgym {then['lmgym_version']} (commit {then['git_commit']}, dirty "
              f"{then['dirty']}); this is lmgym {now['lmgym_version']} (commit {now['git_commit']}, dirty "
              f"{now['dirty']}): new rows may differ from the old ones", file=sys.stderr)


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
    check_spec(spec, out)
    written_by = _claim_folder(spec, out)
    episodes_path = out / "episodes.jsonl"
    repair_jsonl(episodes_path)
    rows_by_key = {row["key"]: row for row in read_rows(out)}
    done = {key: row for key, row in rows_by_key.items() if row.get("error") is None}
    jobs = all_jobs(spec)
    pending = [job for job in jobs if job_key(spec, job) not in done]
    _say_where_we_start(out, written_by, len(jobs), len(pending), len(rows_by_key) - len(done))

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
                    row.update(spec.row_marks(row["env"], row["agent"]))
                    row["transcript"] = None
                    if transcripts and rollout is not None:
                        append_jsonl(out / TRANSCRIPTS_FILE, {**rollout, "key": row["key"]})
                        row["transcript"] = TRANSCRIPTS_FILE
                    append_jsonl(episodes_path, row)
                    rows_by_key[row["key"]] = row
                    if row.get("error") is None:
                        done[row["key"]] = row
                        wins += bool(row["won"])
                    bar.update(1)
                    bar.set_postfix_str(f"success {wins / max(len(done), 1):.2f}")
                    if on_row is not None:
                        on_row(row)
            finally:
                runner.close()

    rows = [rows_by_key[job_key(spec, job)] for job in jobs if job_key(spec, job) in rows_by_key]
    return write_report(out, spec, rows, plots=plots)
