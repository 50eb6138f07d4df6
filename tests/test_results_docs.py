"""The results pages: every committed page equals what its committed summary.json renders, and
the renderer says clearly what is wrong with a page or a summary."""

import json
import shutil
from pathlib import Path

import pytest

from lmgym.benchmarks import results_docs
from lmgym.errors import InputError

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results"


def test_committed_pages_equal_their_render():
    assert results_docs.stale_pages(REPO) == [], "run python -m lmgym.benchmarks.results_docs and commit the pages"


def test_every_study_has_a_page_a_source_and_commands():
    studies = results_docs.load_summaries(RESULTS)
    assert len(studies) >= 14
    for name, summary in studies.items():
        assert (RESULTS / f"{name}.md").is_file()
        assert summary["source"] and summary["headline"]
        for table, spec in summary["tables"].items():
            assert spec.get("command"), f"{name}/{table}: which command produced it?"


def test_readme_and_index_list_every_study():
    studies = results_docs.load_summaries(RESULTS)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    index = (RESULTS / "README.md").read_text(encoding="utf-8")
    for name in studies:
        assert f"(docs/results/{name}.md)" in readme and f"({name}.md)" in index


def test_rows_render_as_a_markdown_table():
    table = results_docs.markdown_table(["", "n", "rate"], "lrr", [["a", 3, "0.50 [0.10, 0.90]"]])
    assert table == "| | n | rate |\n| --- | ---: | ---: |\n| a | 3 | 0.50 [0.10, 0.90] |\n"


def test_records_render_with_templates_and_a_dash_for_what_a_record_lacks(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"cells": [
        {"env": "A", "success": 0.3, "success_ci95": [0.19, 0.4375], "cot": 0.114},
        {"env": "A", "success": 0.0, "success_ci95": None},
        {"env": "B", "success": 1.0, "success_ci95": [0.9, 1.0], "cot": 0.5}]}))
    spec = {"records": "run.json", "key": "cells", "where": {"env": "A"}, "columns": [
        {"label": "success", "cell": "{success:.2f} [{success_ci95[0]:.2f}, {success_ci95[1]:.2f}]"},
        {"label": "cot", "cell": "{cot:.2f}", "align": "r"}]}
    assert results_docs.render_table(spec, tmp_path).splitlines()[2:] == [
        "| 0.30 [0.19, 0.44] | 0.11 |", "| - | - |"]


def test_the_distillation_run_renders_from_its_own_summary():
    """The WebShop 1k run's rows come from the run's summary.json, not from a copy of its table."""
    spec = results_docs.load_summaries(RESULTS)["distill"]["tables"]["webshop-1k-dev-students"]
    cells = json.loads((RESULTS / "distill" / spec["records"]).read_text())["cells"]
    rows = results_docs.render_table(spec, RESULTS / "distill").splitlines()[2:]
    assert len(rows) == len(cells) == 27  # teacher + 8 students on each of 3 envs
    assert rows[0].startswith("| lmgym/WebShop-Gen-v0 | teacher | teacher | 918,656 | 50 | 0.06 [0.02, 0.16] |")


def copy_results(tmp_path: Path) -> Path:
    shutil.copytree(RESULTS, tmp_path / "docs" / "results")
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    return tmp_path


def test_check_finds_an_edited_table_and_rendering_restores_it(tmp_path):
    repo = copy_results(tmp_path)
    page = repo / "docs" / "results" / "alfworld.md"
    committed = page.read_text()
    page.write_text(committed.replace("166,220x", "199,999x"))  # a cell of the engines table
    assert results_docs.main(["--check", "--repo", str(repo)]) == 1
    assert results_docs.main(["--repo", str(repo)]) == 0
    assert page.read_text() == committed


def test_a_slot_without_a_table_and_a_table_without_a_slot_are_errors(tmp_path, capsys):
    repo = copy_results(tmp_path)
    page = repo / "docs" / "results" / "alfworld.md"
    page.write_text(page.read_text() + "\n<!-- table: nowhere -->\n<!-- /table -->\n")
    with pytest.raises(InputError, match="slot 'nowhere' has no table"):
        results_docs.rendered_pages(repo)
    assert results_docs.main(["--check", "--repo", str(repo)]) == 2
    assert "error:" in capsys.readouterr().err
    page.write_text(page.read_text().replace("<!-- table: engines -->", "<!-- engines -->"))
    with pytest.raises(InputError, match="no slot for the tables engines"):
        results_docs.rendered_pages(repo)


def test_a_row_of_the_wrong_width_is_an_error():
    with pytest.raises(InputError, match="has 1 cells for 2 columns"):
        results_docs.markdown_table(["a", "b"], "ll", [["x"]])


def test_the_readme_shows_a_study_table_by_its_slot(tmp_path):
    repo = copy_results(tmp_path)
    readme = repo / "README.md"
    readme.write_text(readme.read_text() + "\n<!-- table: alfworld.engines -->\n<!-- /table -->\n")
    pages = results_docs.rendered_pages(repo)
    engines = results_docs.render_table(results_docs.load_summaries(repo / "docs" / "results")["alfworld"]["tables"]["engines"],
                                        repo / "docs" / "results" / "alfworld")
    assert pages[readme].endswith(f"<!-- table: alfworld.engines -->\n{engines}<!-- /table -->\n")
    assert engines in pages[repo / "docs" / "results" / "alfworld.md"]
