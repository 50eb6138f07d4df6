"""What `lmgym view` shows, read from disk: a benchmark run folder or a rollout file.

Both become the same thing, a `Source`: episode rows (the columns of ``episodes.jsonl``), a
summary per env x agent (`lmgym.benchmarks.report.summarize`), and each episode's transcript
in the rollout format, found by the row's ``key``. Nothing here knows an env family or an
agent: a transcript is the JSON object the rollout holds, shown as it is.

Files may still be growing (a benchmark in progress): every `refresh` reads only what was
appended since the last one, complete lines only (`lmgym.io.scan_jsonl`), so a partial last
line is skipped until its writer finishes it. A file replaced or truncated is read afresh.
"""

from __future__ import annotations

import json
import os
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Iterable

from lmgym.benchmarks.report import summarize
from lmgym.benchmarks.rows import all_jobs, make_row
from lmgym.benchmarks.runner import TRANSCRIPTS_FILE, read_rows
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec
from lmgym.errors import InputError
from lmgym.io import scan_jsonl

#: The plots a run folder may hold, the only files the viewer serves from it.
PLOTS = ("success.png", "returns.png")
#: Orders of the episode list: the row column each sorts by.
SORTS = ("episode", "return", "steps", "seconds")
OUTCOMES = ("won", "lost", "error")


class ViewerError(InputError, ValueError):
    """The path is neither a benchmark folder nor a rollout file (one line for the CLI)."""


class FollowedFile:
    """A JSONL file read incrementally: each `new_lines` call yields the complete lines added
    since the previous call, and says when the file was replaced or truncated (read it afresh)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.identity: tuple[int, int] | None = None

    def new_lines(self) -> tuple[bool, list[tuple[int, bytes]]]:
        """``(restarted, [(offset, raw line), ...])``; `restarted` means earlier lines are void."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            restarted = self.offset > 0
            self.offset, self.identity = 0, None
            return restarted, []
        identity = (stat.st_dev, stat.st_ino)
        restarted = self.identity is not None and (identity != self.identity or stat.st_size < self.offset)
        if restarted or self.identity is None:
            self.offset, self.identity = 0, identity
        if stat.st_size == self.offset:
            return restarted, []
        lines = list(scan_jsonl(self.path, self.offset))
        if lines:
            self.offset = lines[-1][0] + len(lines[-1][1])
        return restarted, lines

    def read(self, offset: int) -> dict[str, Any]:
        """The JSON object on the line that starts at byte `offset`."""
        with open(self.path, "rb") as f:
            f.seek(offset)
            return json.loads(f.readline())


def _parse(raw: bytes) -> dict[str, Any] | None:
    """One line as a JSON object, or None when it is blank or not one."""
    try:
        value = json.loads(raw) if raw.strip() else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def rollout_env_name(rollout: dict[str, Any]) -> str:
    """The table name of a rollout's env: its id, with its kwargs when it has any (as in specs)."""
    try:
        kwargs = json.loads(rollout.get("env_kwargs_json") or "{}")
    except ValueError:
        kwargs = {}
    return EnvSpec(str(rollout.get("env_id", "?")), kwargs if isinstance(kwargs, dict) else {}).name


def spec_of_rows(title: str, rows: list[dict[str, Any]]) -> BenchmarkSpec:
    """A spec naming the envs and agents that `rows` hold, in order of appearance, so a rollout
    file (or a run whose spec cannot be read) is summarised like a benchmark."""
    agents_of: dict[str, list[str]] = {}
    for row in rows:
        played = agents_of.setdefault(row["env"], [])
        if row["agent"] not in played:
            played.append(row["agent"])
    agents = list(dict.fromkeys(a for played in agents_of.values() for a in played))
    return BenchmarkSpec(title, tuple(EnvSpec(env, label=env, agents=tuple(a)) for env, a in agents_of.items()),
                         tuple(AgentSpec(a) for a in agents), episodes=1)


class Source(ABC):
    """Episode rows, their transcripts and a summary, from a run folder or a rollout file."""

    kind = "source"  # "run" or "rollouts"

    def __init__(self, path: Path):
        self.path = path
        self.title = path.name
        self.rows: list[dict[str, Any]] = []
        self.by_key: dict[str, dict[str, Any]] = {}
        #: What the pages should say about the files (unreadable lines, a missing spec).
        self.notes: list[str] = []
        self.lock = threading.Lock()  # the server answers requests from a thread pool

    # -- reading ---------------------------------------------------------------------------
    @abstractmethod
    def refresh(self) -> None:
        """Take in what was appended since the last call."""

    @abstractmethod
    def transcript(self, key: str) -> dict[str, Any] | None:
        """The episode `key` in the rollout format, or None when it was not recorded."""

    def spec(self) -> BenchmarkSpec:
        return spec_of_rows(self.title, self.rows)

    def expected_episodes(self) -> int | None:
        """Episodes the run will have when finished (None for a rollout file)."""
        return None

    def plots(self) -> list[str]:
        return []

    def summary(self) -> dict[str, Any]:
        return summarize(self.spec(), self.rows)

    def _set_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        self.rows = list(rows)
        self.by_key = {row["key"]: row for row in self.rows}

    # -- queries ---------------------------------------------------------------------------
    def envs(self) -> list[str]:
        return list(dict.fromkeys(row["env"] for row in self.rows))

    def agents(self, env: str | None = None) -> list[str]:
        return list(dict.fromkeys(row["agent"] for row in self.rows if env is None or row["env"] == env))

    def select(self, *, env: str | None = None, agent: str | None = None, outcome: str | None = None,
               seed: str | None = None, sort: str = "episode", descending: bool = False) -> list[dict[str, Any]]:
        """The rows matching every filter given, ordered by `sort` (one of `SORTS`)."""
        rows = [r for r in self.rows if (env is None or r["env"] == env) and (agent is None or r["agent"] == agent)
                and (seed is None or str(r["seed"]) == seed) and (outcome is None or outcome_of(r) == outcome)]
        column = sort if sort in SORTS else "episode"
        return sorted(rows, key=lambda r: (r.get(column) is None, r.get(column) or 0), reverse=descending)

    def paired(self, env: str, seed: str) -> dict[str, dict[str, Any]]:
        """Agent -> its row on `env` with `seed` (the first, should an agent have several)."""
        found: dict[str, dict[str, Any]] = {}
        for row in self.rows:
            if row["env"] == env and str(row["seed"]) == seed:
                found.setdefault(row["agent"], row)
        return found

    def pairs(self, env: str, first: str, second: str) -> list[tuple[str, dict | None, dict | None]]:
        """``(seed, row of first, row of second)`` for every seed either agent played on `env`."""
        by_seed: dict[str, dict[str, dict]] = {}
        for row in sorted(self.select(env=env), key=lambda r: r["episode"]):
            if row["agent"] in (first, second):
                by_seed.setdefault(str(row["seed"]), {}).setdefault(row["agent"], row)
        return [(seed, rows.get(first), rows.get(second)) for seed, rows in by_seed.items()]


def outcome_of(row: dict[str, Any]) -> str:
    """``"error"``, ``"won"`` or ``"lost"``."""
    return "error" if row.get("error") else ("won" if row.get("won") else "lost")


class RunSource(Source):
    """A folder written by `lmgym.benchmarks.runner.run_benchmark` (possibly still running)."""

    kind = "run"

    def __init__(self, path: Path):
        super().__init__(path)
        self._spec: BenchmarkSpec | None = None
        self._spec_note: str | None = None
        self._rows_note: str | None = None
        self._rows_stamp: tuple[int, int, int] | None = None
        self._transcripts = FollowedFile(path / TRANSCRIPTS_FILE)
        self._offsets: dict[str, int] = {}

    def refresh(self) -> None:
        with self.lock:
            self._read_spec()
            self._read_rows()
            self._index_transcripts()
            self.notes = [note for note in (self._spec_note, self._rows_note) if note]

    def _read_spec(self) -> None:
        if self._spec is not None:
            return
        try:
            self._spec = BenchmarkSpec.from_dict(json.loads((self.path / "spec.json").read_text(encoding="utf-8")))
            self.title = self._spec.id
            self._spec_note = None
        except FileNotFoundError:
            self._spec_note = "spec.json is missing: envs and agents are taken from the rows"
        except (ValueError, KeyError, TypeError) as error:
            self._spec_note = (f"spec.json is not a spec this lmgym reads ({error}): "
                               "envs and agents are taken from the rows")

    def _read_rows(self) -> None:
        """Re-read ``episodes.jsonl`` when it changed, with the runner's own rule for repeated keys."""
        path = self.path / "episodes.jsonl"
        try:
            stat = path.stat()
        except FileNotFoundError:
            self._set_rows([])
            return
        stamp = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if stamp == self._rows_stamp:
            return
        try:
            rows = read_rows(self.path)
        except ValueError as error:  # a complete line that is not JSON: keep what was read before
            self._rows_note = f"episodes.jsonl has an unreadable line ({error}); showing the rows read before"
            return
        self._rows_stamp, self._rows_note = stamp, None
        self._set_rows(row for row in rows if isinstance(row.get("key"), str))

    def _index_transcripts(self) -> None:
        restarted, lines = self._transcripts.new_lines()
        if restarted:
            self._offsets.clear()
        for offset, raw in lines:
            record = _parse(raw)
            if record is not None and isinstance(record.get("key"), str):
                self._offsets[record["key"]] = offset  # the last transcript of a key is its row's

    def transcript(self, key: str) -> dict[str, Any] | None:
        offset = self._offsets.get(key)
        return None if offset is None else self._transcripts.read(offset)

    def spec(self) -> BenchmarkSpec:
        return self._spec if self._spec is not None else super().spec()

    def expected_episodes(self) -> int | None:
        return len(all_jobs(self._spec)) if self._spec is not None else None

    def plots(self) -> list[str]:
        return [name for name in PLOTS if (self.path / name).is_file()]


class RolloutSource(Source):
    """A rollout file (`lmgym rollout`, `RecordEpisodes`, `write_episode`, a run's transcripts):
    each line one episode, whose row is made from its steps (`lmgym.benchmarks.rows.make_row`)."""

    kind = "rollouts"

    def __init__(self, path: Path):
        super().__init__(path)
        self._file = FollowedFile(path)
        self._offsets: dict[str, int] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self._unreadable = 0

    def refresh(self) -> None:
        with self.lock:
            restarted, lines = self._file.new_lines()
            if restarted:
                self._offsets.clear()
                self._counts.clear()
                self._unreadable = 0
                self._set_rows([])
            by_key = dict(self.by_key)
            for offset, raw in lines:
                row = self._row(raw)
                if row is None:
                    self._unreadable += bool(raw.strip())
                    continue
                self._offsets[row["key"]] = offset
                by_key[row["key"]] = row  # a repeated key: the last line wins, as for run transcripts
            self._set_rows(by_key.values())
            self.notes = [f"{self._unreadable} line(s) are not episodes in the rollout format and are skipped"
                          ] if self._unreadable else []

    def _row(self, raw: bytes) -> dict[str, Any] | None:
        record = _parse(raw)
        if record is None or not isinstance(record.get("steps"), list):
            return None
        env, agent = rollout_env_name(record), str(record.get("agent", "?"))
        episode = self._counts.get((env, agent), 0)
        key = record.get("key") if isinstance(record.get("key"), str) else f"{env}|{agent}|{episode}"
        try:
            # The episode's wall time where the rollout has it, else its steps' decision time.
            seconds = float(record.get("seconds") or sum(float(s.get("seconds", 0.0)) for s in record["steps"]))
            row = make_row(key=key, env=env, env_id=str(record.get("env_id", "?")), agent=agent, episode=episode,
                           seed=record.get("seed"), task_index=None, rollout=record, seconds=seconds,
                           transcript=self.path.name)
        except (AttributeError, TypeError, ValueError):  # steps that are not step objects
            return None
        self._counts[env, agent] = episode + 1
        return row

    def transcript(self, key: str) -> dict[str, Any] | None:
        offset = self._offsets.get(key)
        return None if offset is None else self._file.read(offset)


def open_source(path: str | os.PathLike) -> Source:
    """The `Source` at `path`: a run folder (or a file inside one), or a rollout file."""
    path = Path(path)
    if not path.exists():
        raise ViewerError(f"{path} does not exist")
    if path.is_file() and path.name in ("episodes.jsonl", TRANSCRIPTS_FILE, "spec.json") \
            and (path.parent / "spec.json").is_file():
        path = path.parent  # a file of a run folder: show the run
    if path.is_dir():
        if (path / "spec.json").is_file() or (path / "episodes.jsonl").is_file():
            source: Source = RunSource(path)
        else:
            runs = sorted(p.parent.name for p in path.glob("*/spec.json"))
            hint = f"; it holds the runs {', '.join(runs)}: view one of them" if runs else ""
            raise ViewerError(f"{path} is not a benchmark folder (no spec.json or episodes.jsonl){hint}")
    else:
        source = RolloutSource(path)
    source.refresh()
    if source.kind == "rollouts" and not source.rows and source.notes:
        raise ViewerError(f"{path} holds no episode in the rollout format (one JSON object with 'steps' a line)")
    return source
