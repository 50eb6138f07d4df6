"""Imports only go downward: base <- envs <- models <- components <- agents <- training <- benchmarks <- cli.

Every import statement in the package counts, including those inside functions, so a lazy
upward import fails as well. lmgym.envs and the base layer (lmgym.react, the ReAct format,
among it) never import torch or transformers: they work without them; lmgym.models imports no
env (a language model knows no task). No package file runs a script of the repository by path
(examples/, studies/): the package works installed.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lmgym"

LAYERS = {
    "lmgym.io": 0, "lmgym.data": 0, "lmgym.rollouts": 0, "lmgym.entrypoints": 0, "lmgym.errors": 0, "lmgym.react": 0,
    "lmgym.stats": 0,
    "lmgym.envs": 1,
    "lmgym.models": 2,
    "lmgym.components": 3,
    "lmgym.agents": 4, "lmgym.testing": 4,
    "lmgym.training": 5,
    "lmgym.integrations": 5,
    "lmgym.benchmarks": 6,
    "lmgym.cli": 7, "lmgym.__main__": 7, "lmgym.play": 7,
}
NEURAL = ("torch", "transformers", "peft", "accelerate", "stable_baselines3", "sb3_contrib")


def layer_of(module: str) -> int | None:
    for prefix, rank in LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            return rank
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_only_go_downward(path):
    own = layer_of(module_name(path))
    assert own is not None, f"{module_name(path)} belongs to no layer: add it to LAYERS"
    upward = [m for m in imports_of(path) if (layer_of(m) or 0) > own]
    assert not upward, f"{module_name(path)} (layer {own}) imports upward: {upward}"


@pytest.mark.parametrize("path", [p for p in SOURCES if layer_of(module_name(p)) in (0, 1)],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_envs_and_the_base_import_no_neural_packages(path):
    neural = [m for m in imports_of(path) if m.split(".")[0] in NEURAL]
    assert not neural, f"{module_name(path)} imports {neural}; lmgym.envs and the base layer must work without torch"


def test_the_walker_catches_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from lmgym.training import ppo\n")
    assert "lmgym.training" in imports_of(bad)
    assert layer_of("lmgym.training.ppo") > layer_of("lmgym.envs.core")


#: The folders of the repository that hold scripts, not package code.
SCRIPT_FOLDERS = ("examples", "studies", "benchmarks")
#: Loading a module from a file path is allowed only here, and why.
LOADS_FILES = {"lmgym.envs.alfworld.gen.scenes": "reads the installed alfworld package's own scene tables"}


def script_paths_run(path: Path) -> list[str]:
    """What `path` does that runs a file by path: runpy, a file-spec loader, a path built from a
    script folder's name (``root / "studies"``, ``Path("examples")``) or a script's path as an argument."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [m for m in imports_of(path) if m.split(".")[0] == "runpy"]

    def folder_name(node) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in SCRIPT_FOLDERS

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "spec_from_file_location" \
                and module_name(path) not in LOADS_FILES:
            found.append("spec_from_file_location")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            found += [repr(side.value) for side in (node.left, node.right) if folder_name(side)]
        if isinstance(node, ast.Call):
            callee = getattr(node.func, "attr", getattr(node.func, "id", ""))
            found += [repr(a.value) for a in node.args if callee in ("Path", "join", "joinpath") and folder_name(a)]
            found += [repr(a.value) for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                      and a.value.split("/")[0] in SCRIPT_FOLDERS and a.value.endswith(".py")]
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_package_file_runs_a_script_by_path(path):
    assert not script_paths_run(path), f"{module_name(path)} runs repository scripts by path: {script_paths_run(path)}"


@pytest.mark.parametrize("path", [p for p in SOURCES if module_name(p).startswith("lmgym.models")],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_models_import_no_envs(path):
    envs = [m for m in imports_of(path) if m.startswith(("lmgym.envs", "lmgym.components"))]
    assert not envs, f"{module_name(path)} imports {envs}; a language model knows no env"


def test_the_script_check_catches_a_path_to_a_study(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import runpy\nfrom pathlib import Path\nrunpy.run_path(str(Path('.') / 'studies' / 'x.py'))\n")
    assert script_paths_run(bad) == ["runpy", "'studies'"]
