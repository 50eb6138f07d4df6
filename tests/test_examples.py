"""Every script in examples/ runs with the tiny budget its docstring declares.

Each example's module docstring has a line ``Smoke test: ARGS`` (``{tmp}`` is replaced by a
temporary folder); an example without one fails here, so none goes untested. Optional lines
``Smoke expects: TEXT`` name text its output must contain.
"""

import ast
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


def smoke_lines(path: Path, key: str) -> list[str]:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return [line.split(":", 1)[1].strip() for line in doc.splitlines() if line.strip().startswith(key)]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_with_tiny_budget(path, tmp_path):
    lines = smoke_lines(path, "Smoke test:")
    assert lines, f"{path.name}: add a 'Smoke test: ARGS' line to its docstring"
    args = [a.replace("{tmp}", str(tmp_path)) for a in shlex.split(lines[0])]
    result = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                            cwd=tmp_path, env={**os.environ, "MPLBACKEND": "Agg"}, timeout=900)
    assert result.returncode == 0, f"{path.name} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    assert result.stdout.strip(), f"{path.name} printed nothing"
    for expected in smoke_lines(path, "Smoke expects:"):
        assert expected in result.stdout, f"{path.name}: output lacks {expected!r}"
