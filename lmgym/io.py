"""Crash-safe file writes shared by every layer.

Two primitives cover everything lmgym writes: a whole file replaced atomically (summaries,
specs, checkpoints' metadata) and a JSON line appended so that a reader never sees half of it
(rollouts, benchmark episodes). Both fsync, so a `kill -9` loses at most the line in flight.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` through a temporary file and `os.replace` (atomic on POSIX)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def append_jsonl(path: str | os.PathLike, record: Any) -> None:
    """Append one JSON line with a single O_APPEND write, then fsync.

    A crash can at worst leave a partial last line, which `read_jsonl` drops and
    `repair_jsonl` truncates before the next append.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
    repair_jsonl(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def repair_jsonl(path: str | os.PathLike) -> int:
    """Truncate a trailing partial line left by a crash; return the bytes removed."""
    path = Path(path)
    if not path.exists():
        return 0
    with open(path, "rb+") as f:
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
