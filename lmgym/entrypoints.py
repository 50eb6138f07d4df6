"""The one resolver of ``"package.module:attribute"`` strings, shared by every layer.

Envs, agents, backends and suites name optional components by such strings (as Gymnasium's
entry points do), so a dependency is imported only when it is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def load_entry_point(target: str, *, aliases: Mapping[str, str] | None = None, what: str = "entry point") -> Any:
    """The object ``target`` names: a key of ``aliases`` or ``"package.module:attribute"``.

    Raises ValueError (malformed or unknown name) or ImportError/AttributeError (naming the
    missing module or attribute) with one line a user can act on.
    """
    if not isinstance(target, str):
        raise TypeError(f"{what} must be a name or 'module:attribute', got {type(target).__name__}")
    aliases = aliases or {}
    resolved = aliases.get(target, target)
    module_name, _, attribute = resolved.partition(":")
    if not module_name or not attribute:
        known = f"one of {sorted(aliases)} or " if aliases else ""
        raise ValueError(f"{what} must be {known}'package.module:attribute', got {target!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise ImportError(f"{what} {target!r}: no module named {error.name!r}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise AttributeError(f"{what} {target!r}: module {module_name!r} has no attribute {attribute!r}") from None
