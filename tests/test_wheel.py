"""A user's install: the wheel built from this checkout, installed into a fresh virtualenv (not
editable), runs the README's Python snippets and a tiny ReAct episode from outside the checkout,
with its models from the zoo that LMGYM_ZOO names.

Offline and lean: the wheel is built with this venv's setuptools (no build isolation), and the
fresh venv sees this venv's dependencies through a .pth file of plain path lines. Such lines only
extend sys.path: the .pth files in those folders (this venv's editable lmgym) do not run, so
``import lmgym`` can only come from the installed wheel.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from test_readme import SNIPPETS

REPO = Path(__file__).resolve().parents[1]
WEIGHT_SUFFIXES = (".safetensors", ".zip", ".gguf", ".bin", ".pt", ".ckpt", ".npz")


def run(command, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """``pip wheel`` of a copy of the checkout (the package and the top-level files that setup
    reads): a build in the checkout itself would leave build/ there, whose stale files later
    builds pick up."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    shutil.copytree(REPO / "lmgym", source / "lmgym", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for file in REPO.iterdir():
        if file.is_file():
            shutil.copy2(file, source / file.name)
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                 "--quiet", "-w", tmp / "dist", source])
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (tmp / "dist").glob("lmgym-*.whl")
    return wheel


def test_the_wheel_holds_the_package_data_and_no_weights(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    weights = [name for name in names if name.endswith(WEIGHT_SUFFIXES)]
    assert not weights, f"weights belong in zoo/, not in the package: {weights}"
    assert not [name for name in names if name.startswith("zoo/")]
    data_files = {path.relative_to(REPO).as_posix() for path in (REPO / "lmgym").rglob("*")
                  if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts}
    assert data_files, "lmgym reads its prompts and priors from YAML/JSON files in the package"
    missing = data_files - set(names)
    assert not missing, f"setup.cfg package_data drops files lmgym loads: {sorted(missing)}"


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory) -> Path:
    """A new virtualenv with the wheel installed (no dependencies downloaded: see the module doc)."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    made = run([sys.executable, "-m", "venv", "--without-pip", venv])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    outer = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (site / "lmgym-test-dependencies.pth").write_text("".join(f"{path}\n" for path in outer))
    installed = run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
                     "--quiet", wheel])
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv


def user_env(**extra) -> dict:
    """A user's environment: no PYTHONPATH into the checkout, no data folder, the zoo named."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LMGYM_DATA", "LMGYM_ZOO")}
    return {**env, "MPLBACKEND": "Agg", "LMGYM_ZOO": str(REPO / "zoo"), **extra}


def test_the_installed_wheel_runs_the_readme_and_a_tiny_react_episode(fresh, tmp_path):
    python, lmgym = fresh / "bin" / "python", fresh / "bin" / "lmgym"
    where = run([python, "-c", "import lmgym; print(lmgym.__file__)"], cwd=tmp_path, env=user_env())
    site = fresh / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    assert Path(where.stdout.strip()) == site / "lmgym" / "__init__.py", where.stdout + where.stderr

    # Without LMGYM_ZOO a wheel reads ~/.cache/lmgym/zoo; a missing model is one line naming LMGYM_ZOO.
    home = tmp_path / "home"
    no_zoo = user_env(HOME=str(home))
    del no_zoo["LMGYM_ZOO"]
    root = run([lmgym, "zoo", "--root"], cwd=tmp_path, env=no_zoo)
    assert root.returncode == 0 and root.stdout.strip() == str(home / ".cache" / "lmgym" / "zoo"), root.stderr
    missing = run([lmgym, "rollout", "lmgym/ALFWorld-Gen-v0", "--agent", "lm(model=tiny-ar)", "--episodes", "1",
                   "--out", tmp_path / "none.jsonl"], cwd=tmp_path, env=no_zoo)
    assert missing.returncode == 2 and "LMGYM_ZOO" in missing.stderr and "train_tiny_react.py" in missing.stderr
    assert "Traceback" not in missing.stderr, missing.stderr

    verified = run([lmgym, "zoo", "--verify"], cwd=tmp_path, env=user_env())
    assert verified.returncode == 0, verified.stdout + verified.stderr

    for index, snippet in enumerate(SNIPPETS):
        folder = tmp_path / f"snippet{index}"
        folder.mkdir()
        result = run([python, "-c", snippet], cwd=folder, env=user_env())
        assert result.returncode == 0, f"README snippet {index} fails from the wheel:\n{snippet}\n{result.stderr[-3000:]}"

    out = tmp_path / "episode.jsonl"
    episode = run([lmgym, "rollout", "lmgym/ALFWorld-Gen-v0", "--agent", "lm(model=tiny-ar)", "--episodes", "1",
                   "--out", out, "--env-kwargs", '{"max_episode_steps": 2}', "--quiet"], cwd=tmp_path, env=user_env())
    assert episode.returncode == 0, episode.stderr[-3000:]
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["agent"] == "lm" and record["length"] == 2
    assert all(step["completion"].strip() and step["action"] for step in record["steps"])
