"""The README's Python snippets run, and its table lists every registered environment."""

import re
from pathlib import Path

import pytest

from lmgym.envs.registry import ENVS

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
SNIPPETS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_has_snippets():
    assert SNIPPETS, "README lost its Python examples"


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_readme_snippet_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for earlier in SNIPPETS[: index + 1]:  # later snippets build on the first (imports, env)
        exec(compile(earlier, f"README snippet {index}", "exec"), namespace)


@pytest.mark.parametrize("env_id", sorted(ENVS))
def test_readme_lists_every_environment(env_id):
    assert f"`{env_id}`" in README, f"add {env_id} to the README's table of environments"
