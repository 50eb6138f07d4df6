"""The model zoo: the one place installed model names resolve to folders.

Trained weights live outside the package, in a zoo folder with a manifest::

    zoo/
      manifest.json          {name: {"files": {path: {"sha256", "size"}}, "bytes", "command", "data"}}
      react/alfworld-ar/     a name is a folder path under the root ("react/alfworld-ar")
      aod/ppo-SuperNI/ ...

The root is ``$LMGYM_ZOO`` when set, else the ``zoo/`` folder of the checkout lmgym runs from
(a clone or an editable install), else ``~/.cache/lmgym/zoo`` (a wheel install: point
``LMGYM_ZOO`` at a clone's ``zoo/`` or install models there). Every agent, trainer and env
plug-in resolves names here; ``--install`` flags write here (`install`), never into the
package. ``command`` and ``data`` in the manifest say how each model was trained and on what,
so every entry can be rebuilt (``lmgym zoo`` lists them, ``lmgym zoo --verify`` checks the hashes).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

from lmgym.errors import InputError
from lmgym.io import atomic_folder, atomic_write_json

MANIFEST = "manifest.json"
_CHECKOUT = Path(__file__).resolve().parents[2]  # the repo root in a clone; site-packages in a wheel install


class ModelNotInstalled(InputError, FileNotFoundError):
    """A zoo name with no folder under the zoo root (one line: the name, the root, how to build it)."""


def root() -> Path:
    """The zoo folder models are read from and installed to (see the module docstring)."""
    if os.environ.get("LMGYM_ZOO"):
        return Path(os.environ["LMGYM_ZOO"]).expanduser().resolve()
    if (_CHECKOUT / "pyproject.toml").exists() and (_CHECKOUT / "zoo" / MANIFEST).exists():
        return _CHECKOUT / "zoo"
    return Path("~/.cache/lmgym/zoo").expanduser()


def manifest(zoo: Path | None = None) -> dict[str, dict[str, Any]]:
    path = (zoo or root()) / MANIFEST
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _checked(name: str) -> str:
    """`name` if it is a folder path inside the zoo (``"react/alfworld-ar"``), else an InputError."""
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or ".." in parts:
        raise InputError(f"{name!r} is not a zoo model name (a relative folder path such as 'react/alfworld-ar')")
    return name


def path(name: str, *, rebuild: str | None = None) -> Path:
    """The folder of the installed model `name` (``"react/alfworld-ar"``).

    Raises `ModelNotInstalled` naming the root and the command that builds it: the manifest's
    ``command`` for a known name, else `rebuild`.
    """
    zoo = root()
    folder = zoo / _checked(name)
    if not folder.is_dir():
        command = manifest(zoo).get(name, {}).get("command") or rebuild
        hint = f"; build it with: {command}" if command else ""
        raise ModelNotInstalled(f"model {name!r} does not exist: no such folder, and no such name in the zoo at {zoo} "
                                f"(set LMGYM_ZOO to a zoo folder){hint}")
    return folder


def resolve(model: str | os.PathLike) -> Path:
    """A model folder from a zoo name or a folder path: an existing path wins, else the zoo name."""
    if Path(model).expanduser().exists() or os.path.isabs(model):
        return Path(model).expanduser()
    return path(str(model))


def label(model: str | os.PathLike) -> str:
    """How a record names `model`: its zoo name when it is a folder under the zoo root (a path
    in one checkout means nothing in another), else the name or path as given."""
    try:
        return Path(model).expanduser().resolve().relative_to(root().resolve()).as_posix()
    except ValueError:
        return str(model)


def is_installed(name: str) -> bool:
    return (root() / name).is_dir()


def names(prefix: str = "") -> list[str]:
    """Installed names (those in the manifest whose folder exists), sorted; only under `prefix` if given."""
    zoo = root()
    return sorted(n for n in manifest(zoo) if n.startswith(prefix) and (zoo / n).is_dir())


def _digest(file: Path) -> str:
    sha = hashlib.sha256()
    with open(file, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def describe(folder: Path) -> dict[str, Any]:
    """``files`` (sha256 and size of every file under `folder`) and their total ``bytes``."""
    files = {str(f.relative_to(folder)): {"sha256": _digest(f), "size": f.stat().st_size}
             for f in sorted(folder.rglob("*")) if f.is_file()}
    return {"files": files, "bytes": sum(f["size"] for f in files.values())}


def record(name: str, *, command: str, data: str, zoo: Path | None = None) -> dict[str, Any]:
    """Write `name`'s manifest entry from its folder as it is now (hashes, sizes, provenance)."""
    zoo = zoo or root()
    entry = {**describe(zoo / name), "command": command, "data": data}
    atomic_write_json(zoo / MANIFEST, dict(sorted({**manifest(zoo), name: entry}.items())))
    return entry


def install(name: str, write: Callable[[Path], Any] | str | os.PathLike, *, command: str, data: str) -> Path:
    """Install a model under `name`: `write(tmp_folder)` fills the folder (or a folder path is
    copied), atomically, then the manifest records its files, `command` and `data` provenance."""
    zoo = root()
    target = zoo / _checked(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_folder(target) as tmp:
        if callable(write):
            write(tmp)
        else:
            shutil.copytree(write, tmp, dirs_exist_ok=True)
    record(name, command=command, data=data, zoo=zoo)
    return target


def verify(zoo: Path | None = None) -> list[str]:
    """One line per problem, empty when the zoo matches its manifest: an entry whose folder or
    file is missing, a file whose size or sha256 differs, a file that no entry lists."""
    zoo = zoo or root()
    if not (zoo / MANIFEST).is_file():
        return [f"{zoo}: no {MANIFEST} (set LMGYM_ZOO to a zoo folder, such as a clone's zoo/)"]
    entries = manifest(zoo)
    problems = []
    for name, entry in entries.items():
        folder = zoo / name
        if not folder.is_dir():
            problems.append(f"{name}: not installed (no folder {folder})")
            continue
        for rel, want in entry["files"].items():
            file = folder / rel
            if not file.is_file():
                problems.append(f"{name}: {rel} is missing")
            elif file.stat().st_size != want["size"] or _digest(file) != want["sha256"]:
                problems.append(f"{name}: {rel} differs from the manifest (size or sha256)")
    listed = {(zoo / name / rel).resolve() for name, entry in entries.items() for rel in entry["files"]}
    for file in sorted(zoo.rglob("*")):
        if file.is_file() and file != zoo / MANIFEST and file.resolve() not in listed:
            problems.append(f"{file.relative_to(zoo)}: not listed in {MANIFEST}")
    return problems
