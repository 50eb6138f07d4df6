"""Where real data sets live: `LMGYM_DATA`, per-family overrides, and one clear error.

Real data is never shipped with lmgym. A family names the folder it expects under
`LMGYM_DATA` (for example `alfworld/`) and may honour an older variable of its own
(`ALFWORLD_DATA`, as the official ALFWorld scripts set). When neither holds the files,
`DataNotFoundError` says which variables were read, the layout expected and where the official
files come from; an env never silently loads zero tasks.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator


class DataNotFoundError(FileNotFoundError):
    """A data set is missing or does not have the expected layout.

    The message's first line stands alone (`summary`: what is missing and which variable to
    set); the lines after it give the layout and the official source. `family` and `files`
    (the paths the family reads under its folder, required first, then optional) let tools
    and tests read the error without parsing it.
    """

    def __init__(self, message: str, family: str = "", files: tuple[str, ...] = ()):
        super().__init__(message)
        self.family, self.files = family, tuple(files)

    @property
    def summary(self) -> str:
        return str(self).split("\n", 1)[0]


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
    optional: list[str] | tuple[str, ...] = (),
) -> Path:
    """Return the folder holding `family`'s files, checked against `required`.

    Args:
        family: sub-folder of `LMGYM_DATA` (``"alfworld"``, ``"webshop"``, ...).
        required: paths (globs allowed) relative to the folder that must exist.
        layout: the expected tree, one path per line indented by two spaces, shown in the error.
        source: where the official files come from, shown in the error.
        env_var: an optional per-family variable that points straight at the folder.
        optional: paths the family reads when present (listed in the error's `files`).
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
        problems.append(f"{variable} -> {folder} is missing {', '.join(missing)}")
    if problems:
        why = "; ".join(problems)
    elif env_var:
        why = f"neither {env_var} nor LMGYM_DATA is set"
    else:
        why = "LMGYM_DATA is not set"
    where = f"a folder holding {family}/" + (f" (or {env_var} to the {family} folder itself)" if env_var else "")
    raise DataNotFoundError(
        f"No {family} data found: {why}.\nSet LMGYM_DATA to {where}, laid out as:\n{layout}\n"
        f"Official files: {source}",
        family, files=(*required, *optional),
    )


@contextlib.contextmanager
def exit_if_data_missing() -> Iterator[None]:
    """For scripts: a `DataNotFoundError` inside ends the program with one line on stderr
    (exit status 1) instead of a traceback.

    >>> with exit_if_data_missing():
    ...     env = gym.make("lmgym/ALFWorld-v0")
    """
    try:
        yield
    except DataNotFoundError as error:
        raise SystemExit(f"{error.summary} This needs the real data: set LMGYM_DATA to a folder holding "
                         f"{error.family}/ (the README's Data section).") from None


def cache_dir() -> Path:
    """``LMGYM_CACHE`` or ``~/.cache/lmgym``: derived files (converted weights, parsed data)."""
    return Path(os.environ.get("LMGYM_CACHE") or Path.home() / ".cache" / "lmgym").expanduser()
