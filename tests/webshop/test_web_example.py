"""examples/webshop_web.py runs end to end with a tiny budget (CleanRL-style smoke test)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("spacy")

REPO = Path(__file__).resolve().parents[2]


def test_webshop_web_example_scores_match():
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "webshop_web.py"), "--episodes", "1", "--num-products", "300"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "web page score 1.000 == text env reward 1.000" in done.stdout
