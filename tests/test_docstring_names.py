"""Names that docstrings cite in single backticks exist: a class, function or attribute defined
in lmgym (``JudgeCluster``, not a ``Judge`` that never was), or a dotted ``lmgym.x.y`` path that
imports and resolves. Lower-case names (arguments, variables) and names of the libraries lmgym
builds on (Gymnasium, torch, transformers, SB3) are not checked here.
"""

import ast
import dataclasses
import importlib
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lmgym"
CITED = re.compile(r"(?<![`\w])`([A-Za-z_][\w.]*)`(?!`)")
#: Libraries whose names docstrings cite (checked by import, not by this package's definitions).
LIBRARIES = ("builtins", "gymnasium", "gymnasium.spaces", "gymnasium.wrappers", "gymnasium.vector", "numpy",
             "torch", "torch.nn", "transformers", "stable_baselines3", "sb3_contrib", "tokenizers", "peft")


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def _defined_names() -> set[str]:
    names = set()
    for _, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id if isinstance(t, ast.Name) else t.attr for t in node.targets
                             if isinstance(t, (ast.Name, ast.Attribute)))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, (ast.Name, ast.Attribute)):
                names.add(node.target.id if isinstance(node.target, ast.Name) else node.target.attr)
    return names


def _library_name(name: str) -> bool:
    for module in LIBRARIES:
        try:
            if hasattr(importlib.import_module(module), name):
                return True
        except ImportError:
            continue
    return False


def _resolves(path: str) -> bool:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            fields = {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else set()
            if not hasattr(obj, attribute) and attribute not in fields:
                return False
            obj = getattr(obj, attribute, None)
        return True
    return False


def test_names_cited_in_docstrings_exist():
    defined = _defined_names()
    missing = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for cited in CITED.findall(ast.get_docstring(node) or ""):
                if cited.startswith("lmgym."):
                    ok = _resolves(cited)
                else:
                    head, last = cited.split(".")[0], cited.split(".")[-1]
                    if not head[:1].isupper() or head.isupper():  # arguments, variables, constants
                        continue
                    ok = last in defined or _library_name(head)
                if not ok:
                    missing.append(f"{path.relative_to(PACKAGE.parent)} ({getattr(node, 'name', 'module')}): `{cited}`")
    assert not missing, "docstrings cite names that do not exist:\n" + "\n".join(missing)
