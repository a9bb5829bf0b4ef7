"""Reports of runs, from their journals: a self-contained HTML page, a Markdown summary and JUnit
XML per run (`reports/<run id>/`), two runs side by side, and the trend over many.

    journal.py   a journal read once into a Run (SpecError if it is not ours)
    hints.py     a concrete fix per failing probe
    figures.py   matplotlib figures as inline SVG
    html.py      the pages (a run, two runs, the trend, a game day); markdown.py the summary;
                 junit.py the XML
    trend.py     recovery per scenario over runs, and the resilience score
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos.report import html, junit, markdown
from chaos.report.journal import Run, load, parse

__all__ = ["Run", "compare", "load", "parse", "write", "write_gameday", "write_trend"]


def write(run: Run, root: Path) -> Path:
    """reports/<run id>/: index.html, summary.md, junit.xml and the journal itself. Returns the page."""
    out = root / run.key
    out.mkdir(parents=True, exist_ok=True)
    (out / "journal.json").write_text(json.dumps(run.raw, indent=2, default=str))
    (out / "summary.md").write_text(markdown.summary(run))
    (out / "junit.xml").write_text(junit.render([run]))
    page = out / "index.html"
    page.write_text(html.run_page(run))
    return page


def compare(a: Run, b: Run, root: Path) -> Path:
    out = root / f"compare-{a.key}-{b.key}"
    out.mkdir(parents=True, exist_ok=True)
    page = out / "index.html"
    page.write_text(html.compare_page(a, b))
    return page


def write_trend(runs: list[Run], root: Path, name: str = "trend") -> Path:
    """The trend page of many runs (each linked to its own report, written beside it) and one
    JUnit file of them all."""
    for run in runs:  # a run reported before keeps its page
        if not (root / run.key / "index.html").is_file():
            write(run, root)
    links = {r.key: f"../{r.key}/index.html" for r in runs}
    out = root / name
    out.mkdir(parents=True, exist_ok=True)
    (out / "junit.xml").write_text(junit.render(runs))
    page = out / "index.html"
    page.write_text(html.trend_page(runs, links))
    return page


def write_gameday(day: dict[str, Any], runs: list[Run], root: Path, name: str, trend: Path | None) -> Path:
    """A game day's own page (its steps, pauses, gates and verdicts, each experiment linked to its
    report, written beside it if it is not there yet), its journal and one JUnit file of its runs."""
    for run in runs:
        if not (root / run.key / "index.html").is_file():
            write(run, root)
    out = root / name
    out.mkdir(parents=True, exist_ok=True)
    (out / "gameday.json").write_text(json.dumps(day, indent=2, default=str))
    (out / "junit.xml").write_text(junit.render(runs, day))
    page = out / "index.html"
    trend_link = None if trend is None else f"../{trend.parent.name}/index.html"
    page.write_text(html.gameday_page(day, runs, {r.key: f"../{r.key}/index.html" for r in runs}, trend_link))
    return page
