"""The results pages: every study's tables rendered from its committed ``summary.json``.

A study is a page, ``docs/results/<study>.md``, written by hand around table slots::

    <!-- table: engines -->
    | ... rendered here ... |
    <!-- /table -->

and its data, ``docs/results/<study>/summary.json``::

    {"title": "ALFWorld: engines and baselines", "order": 10,
     "headline": "one line: the key figure with its n and interval",
     "source": "where the numbers come from (a run folder, or the docs they were transcribed from)",
     "tables": {
        "engines": {"columns": ["", "native", "official"], "align": "lrr",
                    "rows": [["step (ms)", "0.891", "1497.038"]], "command": "python studies/..."},
        "students": {"records": "run/summary.json", "key": "cells", "where": {"env": "lmgym/X-v0"},
                     "columns": [{"label": "success", "cell": "{success:.2f}", "align": "r"}]}}}

A table is either ``rows`` (cells as written) or ``records``: a JSON file beside the summary
(a study's own output, e.g. a distillation run's ``summary.json``), a list under ``key``,
filtered by ``where``, one row per record, each column a `str.format` template over the record
(a key it names that the record lacks, or holds null, renders as ``-``).

Two index tables list every study, one line each, from its ``title`` and ``headline``:
``docs/results/README.md`` and the README's results table (slot ``<!-- results -->``). Those two
pages may also show any study's table in full, by the slot ``<!-- table: <study>.<table> -->``.

``python -m lmgym.benchmarks.results_docs`` rewrites every slot; ``--check`` writes nothing and
exits 1 when a committed page differs from its render (tests/test_results_docs.py runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import string
import sys
from pathlib import Path
from typing import Any

from lmgym.errors import InputError
from lmgym.io import atomic_write_text

REPO = Path(__file__).resolve().parents[2]
SLOT = re.compile(r"(<!-- (table: [\w.-]+|results) -->\n)(.*?)(<!-- /(?:table|results) -->)", re.S)


def markdown_table(columns: list[str], align: str, rows: list[list[Any]]) -> str:
    """A GitHub markdown table; `align` holds one letter per column, ``l`` or ``r``."""
    if len(align) != len(columns) or set(align) - {"l", "r"}:
        raise InputError(f"align {align!r} must give l or r for each of the {len(columns)} columns")
    for row in rows:
        if len(row) != len(columns):
            raise InputError(f"row {row!r} has {len(row)} cells for {len(columns)} columns")
    def line(cells: list[Any]) -> str:
        return "|" + "".join(f" {cell} |" if str(cell) else " |" for cell in cells)
    separator = "|" + "".join(" ---: |" if a == "r" else " --- |" for a in align)
    return "\n".join([line(columns), separator] + [line(row) for row in rows]) + "\n"


class _Missing(string.Formatter):
    """`str.format` over a record where a missing or null field is the whole cell's ``-``."""

    def get_field(self, field_name, args, kwargs):
        try:
            value, key = super().get_field(field_name, args, kwargs)
        except TypeError:  # an index into a null field
            raise KeyError(field_name) from None
        if value is None:
            raise KeyError(field_name)
        return value, key


def record_cell(template: str, record: dict) -> str:
    try:
        return _Missing().vformat(template, (), record)
    except (KeyError, IndexError):
        return "-"


def records_table(spec: dict, folder: Path) -> str:
    path = folder / spec["records"]
    if not path.is_file():
        raise InputError(f"{path} not found (a records table reads a JSON file beside its summary.json)")
    records = json.loads(path.read_text(encoding="utf-8"))
    if "key" in spec:
        records = records[spec["key"]]
    where = spec.get("where", {})
    records = [r for r in records if all(r.get(k) == v for k, v in where.items())]
    columns = spec["columns"]
    return markdown_table([c["label"] for c in columns], "".join(c.get("align", "l") for c in columns),
                          [[record_cell(c["cell"], r) for c in columns] for r in records])


def render_table(spec: dict, folder: Path) -> str:
    if "records" in spec:
        return records_table(spec, folder)
    return markdown_table(spec["columns"], spec["align"], spec["rows"])


def load_summaries(results: Path) -> dict[str, dict]:
    """Every study under `results`: its name (the folder) -> its summary.json."""
    studies = {}
    for path in sorted(results.glob("*/summary.json")):
        summary = json.loads(path.read_text(encoding="utf-8"))
        missing = {"title", "order", "headline", "source", "tables"} - set(summary)
        if missing:
            raise InputError(f"{path} lacks {', '.join(sorted(missing))}")
        studies[path.parent.name] = summary
    return studies


def index_table(studies: dict[str, dict], prefix: str) -> str:
    """One line per study: its page (linked through `prefix`) and its headline."""
    ordered = sorted(studies.items(), key=lambda item: (item[1]["order"], item[0]))
    return markdown_table(["study", "headline result"], "ll",
                          [[f"[{s['title']}]({prefix}{name}.md)", s["headline"]] for name, s in ordered])


def fill(text: str, render: dict[str, str], page: Path) -> str:
    """`text` with every slot's body replaced by its render; a slot nothing renders is an error."""
    def body(match: re.Match) -> str:
        name = match.group(2).removeprefix("table: ")
        if name not in render:
            raise InputError(f"{page}: slot {name!r} has no table in its summary.json")
        return match.group(1) + render[name] + match.group(4)
    return SLOT.sub(body, text)


def rendered_pages(repo: Path = REPO) -> dict[Path, str]:
    """Every page that slots name, as the committed summaries render it."""
    results = repo / "docs" / "results"
    studies = load_summaries(results)
    pages = {}
    anywhere = {}  # the two index pages may also hold any study's table, by its slot <!-- table: <study>.<table> -->
    for name, summary in studies.items():
        page = results / f"{name}.md"
        if not page.is_file():
            raise InputError(f"{page} not found: each docs/results/<study>/summary.json needs its page")
        text = page.read_text(encoding="utf-8")
        used = {m.group(2).removeprefix("table: ") for m in SLOT.finditer(text)}
        unused = set(summary["tables"]) - used
        if unused:
            raise InputError(f"{page} has no slot for the tables {', '.join(sorted(unused))} of its summary.json")
        render = {t: render_table(spec, results / name) for t, spec in summary["tables"].items()}
        pages[page] = fill(text, render, page)
        anywhere.update({f"{name}.{t}": table for t, table in render.items()})
    for page, prefix in ((results / "README.md", ""), (repo / "README.md", "docs/results/")):
        pages[page] = fill(page.read_text(encoding="utf-8"), {"results": index_table(studies, prefix), **anywhere}, page)
    return pages


def stale_pages(repo: Path = REPO) -> list[Path]:
    return [page for page, text in rendered_pages(repo).items() if page.read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmgym.benchmarks.results_docs", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs from its render")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose docs/results to render")
    args = parser.parse_args(argv)
    try:
        if args.check:
            stale = stale_pages(args.repo)
            for page in stale:
                print(f"stale: {page} (run python -m lmgym.benchmarks.results_docs)")
            return 1 if stale else 0
        for page, text in rendered_pages(args.repo).items():
            if page.read_text(encoding="utf-8") != text:
                atomic_write_text(page, text)
                print(f"wrote {page}")
        return 0
    except (InputError, OSError, json.JSONDecodeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
