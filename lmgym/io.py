"""Crash-safe file writes shared by every layer.

Two primitives cover everything lmgym writes: a whole file replaced atomically (summaries,
specs, checkpoints' metadata) and a JSON line appended so that a reader never sees half of it
(rollouts, benchmark episodes). Both fsync, so a `kill -9` loses at most the line in flight.
A folder written as a whole (a checkpoint, a run's adapters) is replaced through `atomic_folder`.
A training log is cut back to the step its run resumes from by `rewind_log` (a rewrite of the whole file).
Appenders hold an exclusive ``flock`` while they repair and write, so processes appending to
one file never cut each other's lines.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator


def _new_file_mode() -> int:
    """The mode ``open()`` gives a new file: 0o666 less the umask (read once: setting it to read it races)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_NEW_FILE_MODE = _new_file_mode()


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` through a temporary file and `os.replace` (atomic on POSIX).

    The file gets the mode a plain write would give it (an existing file's own mode, else
    0o666 less the umask), not the temporary file's private 0o600.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else _NEW_FILE_MODE
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


@contextlib.contextmanager
def atomic_folder(folder: str | os.PathLike) -> Iterator[Path]:
    """A new temporary sibling of `folder` to write into; it replaces `folder` when the block ends.

    The old folder is renamed aside, the new one renamed into place, then the old one removed:
    a reader finds the old folder or the new one, never a half-written one. If the block
    raises, the temporary folder is removed and `folder` stays as it was.
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        yield tmp
        old = folder.with_name(f".{folder.name}.old")
        if folder.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.rename(folder, old)
        os.rename(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def append_jsonl(path: str | os.PathLike, record: Any) -> None:
    """Append one JSON line under an exclusive lock, then fsync.

    The lock (``flock`` on the file) makes the repair and the write one step for every lmgym
    appender of the file, so a concurrent appender never sees, and truncates, a line that is
    still being written. Short writes are continued until the whole line is down. A crash can at
    worst leave a partial last line, which `read_jsonl` drops and the next append truncates.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _truncate_partial_line(fd)
        view = memoryview(line)
        while view:
            written = os.write(fd, view)
            if written <= 0:
                raise OSError(f"{path}: appending a line wrote {written} bytes")
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)  # releases the lock


def repair_jsonl(path: str | os.PathLike) -> int:
    """Truncate a trailing partial line left by a crash (under the appenders' lock); return the bytes removed."""
    path = Path(path)
    if not path.exists():
        return 0
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return _truncate_partial_line(fd)
    finally:
        os.close(fd)


def _truncate_partial_line(fd: int) -> int:
    """Cut the file behind `fd` back to its last newline; the bytes removed."""
    with open(fd, "rb+", closefd=False) as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size == 0:
            return 0
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return 0
        # Walk back to the last complete line.
        block, end = 65536, size
        while end > 0:
            start = max(0, end - block)
            f.seek(start)
            chunk = f.read(end - start)
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                keep = start + idx + 1
                break
            end = start
        else:
            keep = 0
        f.truncate(keep)
        return size - keep


def rewind_log(path: str | os.PathLike, step: int, key: str = "train/step") -> None:
    """Drop the rows of a training log past `step`, atomically: the steps a resumed (or restarted,
    `step` 0) run is about to log again, so the log holds each step once."""
    path = Path(path)
    if not path.exists():
        return
    kept = [row for row in read_jsonl(path) if row.get(key, 0) <= step]
    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in kept))


def scan_jsonl(path: str | os.PathLike, start: int = 0) -> Iterator[tuple[int, bytes]]:
    """Yield ``(byte offset, raw line)`` for each complete line of `path` from byte `start` on.

    A trailing partial line (an append in flight, or a crash) is not yielded, so a reader that
    follows a growing file resumes from the end of the last line it got.
    """
    with open(path, "rb") as f:
        f.seek(start)
        offset = start
        for raw in f:
            if not raw.endswith(b"\n"):
                return  # partial line from an interrupted (or ongoing) append
            yield offset, raw
            offset += len(raw)


def read_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the complete JSON lines of `path`, skipping a trailing partial line."""
    for _, raw in scan_jsonl(path):
        if raw.strip():
            yield json.loads(raw)
