"""The README: each Python snippet runs on its own in a fresh interpreter, its table lists every
registered environment, and its Data table lists the files each family's data error names."""

import fnmatch
import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from lmgym.data import DataNotFoundError
from lmgym.envs.registry import ENVS

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
SNIPPETS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_has_snippets():
    assert SNIPPETS, "README lost its Python examples"


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_readme_snippet_runs_on_its_own(index, tmp_path):
    """A reader copies one snippet into a fresh interpreter: it must bring its own imports."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "MPLBACKEND": "Agg"}
    result = subprocess.run([sys.executable, "-c", SNIPPETS[index]], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"README snippet {index} failed:\n{SNIPPETS[index]}\n{result.stderr[-3000:]}"


@pytest.mark.parametrize("env_id", sorted(ENVS))
def test_readme_lists_every_environment(env_id):
    assert f"`{env_id}`" in README, f"add {env_id} to the README's table of environments"


# -- the Data table ----------------------------------------------------------------------------
def data_table() -> dict[str, list[str]]:
    """README's Data table: family -> the paths its files column names (backticked)."""
    section = README[README.index("## Data"):]
    rows = re.findall(r"^\| `([a-z_]+)/` \| (.*?) \|", section, flags=re.M)
    return {family: re.findall(r"`([^`]+)`", files) for family, files in rows}


def expansions(path: str) -> list[str]:
    """A README path as concrete examples: ``{a,b}`` expanded, ``<name>`` read as a name."""
    parts = re.split(r"\{([^}]*)\}", re.sub(r"<([^>]+)>", r"\1", path))
    choices = [[part] if k % 2 == 0 else part.split(",") for k, part in enumerate(parts)]
    return ["".join(combo) for combo in itertools.product(*choices)]


def data_error(family: str, monkeypatch, tmp_path) -> DataNotFoundError:
    env_id = next(i for i, entry in sorted(ENVS.items()) if entry.requires_data == family)
    for variable in ("ALFWORLD_DATA", "WEBSHOP_DATA"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("LMGYM_DATA", str(tmp_path))  # an empty folder: every family is missing
    with pytest.raises(DataNotFoundError) as error:
        gym.make(env_id).reset(seed=0)
    return error.value


@pytest.mark.parametrize("family", sorted({e.requires_data for e in ENVS.values() if e.requires_data}))
def test_data_table_and_data_error_list_the_same_files(family, monkeypatch, tmp_path):
    table = data_table()
    assert family in table, f"add {family}/ to the README's Data table"
    error = data_error(family, monkeypatch, tmp_path)
    assert error.family == family and error.files
    readme_paths = table[family]
    for path in readme_paths:
        assert any(fnmatch.fnmatch(example, pattern) for example in expansions(path) for pattern in error.files), \
            f"README lists {family}/{path}, which the {family} loader does not read ({error.files})"
        assert path.rsplit("/", 1)[-1] in str(error), f"the {family} data error does not name {path}"
    for pattern in error.files:
        assert any(fnmatch.fnmatch(example, pattern) for path in readme_paths for example in expansions(path)), \
            f"the {family} loader reads {pattern}, which the README's Data table does not list"
    # The first line stands alone: what is missing and which variable to set.
    assert error.summary.startswith(f"No {family} data found: ") and "LMGYM_DATA" in error.summary


def test_data_table_has_no_family_that_nothing_reads():
    families = {e.requires_data for e in ENVS.values() if e.requires_data}
    assert set(data_table()) == families
