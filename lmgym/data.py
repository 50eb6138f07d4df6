"""Where real data sets live: `LMGYM_DATA`, per-family overrides, and one clear error.

Real data is never shipped with lmgym. A family names the folder it expects under
`LMGYM_DATA` (for example `alfworld/`) and may honour an older variable of its own
(`ALFWORLD_DATA`, as the official ALFWorld scripts set). When neither holds the files,
`DataNotFoundError` says which variables were read, the layout expected and where the official
files come from; an env never silently loads zero tasks.
"""

from __future__ import annotations

import os
from pathlib import Path


class DataNotFoundError(FileNotFoundError):
    """A data set is missing or does not have the expected layout."""


def data_root() -> Path | None:
    """The folder `LMGYM_DATA` points at, or None when unset."""
    value = os.environ.get("LMGYM_DATA")
    return Path(value).expanduser() if value else None


def find_data(
    family: str,
    *,
    required: list[str],
    layout: str,
    source: str,
    env_var: str | None = None,
) -> Path:
    """Return the folder holding `family`'s files, checked against `required`.

    Args:
        family: sub-folder of `LMGYM_DATA` (``"alfworld"``, ``"webshop"``, ...).
        required: paths (globs allowed) relative to the folder that must exist.
        layout: a short description of the expected tree, shown in the error.
        source: where the official files come from, shown in the error.
        env_var: an optional per-family variable that points straight at the folder.
    """
    candidates: list[tuple[str, Path]] = []
    if env_var and os.environ.get(env_var):
        candidates.append((env_var, Path(os.environ[env_var]).expanduser()))
    root = data_root()
    if root is not None:
        candidates.append(("LMGYM_DATA", root / family))
    problems = []
    for variable, folder in candidates:
        missing = [r for r in required if not any(folder.glob(r))]
        if not missing:
            return folder
        problems.append(f"  {variable} -> {folder}: missing {', '.join(missing)}")
    read = " or ".join(v for v in ([env_var] if env_var else []) + ["LMGYM_DATA"])
    found = "\n".join(problems) if problems else f"  neither {read} is set"
    raise DataNotFoundError(
        f"No {family} data found.\n{found}\n"
        f"Set LMGYM_DATA to a folder holding {family}/ "
        + (f"(or {env_var} to the {family} folder itself) " if env_var else "")
        + f"with this layout:\n{layout}\nOfficial files: {source}"
    )


def cache_dir() -> Path:
    """``LMGYM_CACHE`` or ``~/.cache/lmgym``: derived files (converted weights, parsed data)."""
    return Path(os.environ.get("LMGYM_CACHE") or Path.home() / ".cache" / "lmgym").expanduser()
