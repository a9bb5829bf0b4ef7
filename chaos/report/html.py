"""Self-contained HTML pages: one run, two runs side by side, and the trend over many. Styles
and figures (SVG) are inline, so a page opens from a CI artifact with no network."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from html import escape
from types import ModuleType
from typing import Any

from chaos.report import hints, trend
from chaos.report.journal import PHASES, SYMPTOM_COLUMNS, Run

figures: ModuleType | None
try:
    from chaos.report import figures
except ModuleNotFoundError as missing:  # kilocard without its [report] extra: pages say where figures go
    if missing.name != "matplotlib":
        raise
    figures = None
NO_FIGURES = "figure not drawn: matplotlib is not installed (pip install 'kilocard[report]')"

STYLE = "".join((
    'body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1180px;',
    "color:#1b1b1b;padding:0 16px} h1{font-size:22px;margin:0 0 6px}",
    "h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}",
    "table{border-collapse:collapse;width:100%;margin:6px 0}",
    "th,td{border:1px solid #e3e3e3;padding:4px 7px;text-align:left;vertical-align:top;overflow-wrap:anywhere}",
    "th{background:#f6f6f6}",
    ".badge{display:inline-block;padding:2px 10px;border-radius:10px;color:#fff;font-weight:600}",
    ".e0{background:#2d6a4f} .e1{background:#c1121f} .e2{background:#7b2cbf} .e3{background:#e76f51}",
    ".e4{background:#000} .ok{color:#2d6a4f;font-weight:600} .bad{color:#c1121f;font-weight:600} .muted{color:#666}",
    ".ok,.bad,.nw{white-space:nowrap}",
    "pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:12px}",
    ".hint{background:#fff7e6;border-left:4px solid #f4a261;padding:6px 10px;margin:4px 0;white-space:pre-wrap;",
    "font-family:ui-monospace,monospace;font-size:12px} .fig svg{max-width:100%;height:auto}",
    ".cols{display:flex;gap:16px} .cols>div{flex:1;min-width:0}",
))
EXIT_NAMES = {0: "passed", 1: "failed", 2: "invalid input", 3: "aborted", 4: "revert incomplete"}


def _page(title: str, body: Iterable[str]) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>{''.join(body)}"
            f'<p class="muted">kilocard report, written {time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())}</p>'
            "</body></html>\n")


def _table(head: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """Cells are HTML already (escape what comes from the journal)."""
    return ("<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows) + "</table>")


def _fig(draw: Callable[[ModuleType], str | None], missing: str) -> str:
    """A figure `draw` makes with the figures module, or why there is none."""
    svg = draw(figures) if figures is not None else None
    if svg:
        return f'<div class="fig">{svg}</div>'
    said = missing if figures is not None else NO_FIGURES
    return f'<p class="muted">{escape(said)}</p>' if said else ""


def _rel(t: float | None, origin: float | None) -> str:
    return "-" if t is None or origin is None else f"+{t - origin:.1f} s"


def _badge(run: Run) -> str:
    name = escape(EXIT_NAMES.get(run.exit_code, "?"))
    return f'<span class="badge e{run.exit_code}">exit {run.exit_code}: {name}</span>'


def _header(run: Run) -> str:
    expected = run.expected or {}
    expect = "none declared" if not expected else f"expected exit {expected['exit']}" + (
        f" with a reason starting {expected['reason']!r}" if expected.get("reason") else "")
    rows = [("verdict", f"{_badge(run)} <b>{escape(run.verdict)}</b>"), ("reason", escape(run.reason)),
            ("expectation", escape(expect)), ("run id", escape(run.run_id or "-")),
            ("experiment", escape(run.experiment_file)), ("cluster", escape(run.cluster)),
            ("sha256", escape(str(run.raw["kilocard"].get("experiment_sha256", "-")))),
            ("started", escape(time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(run.when))) if run.when else "-"),
            ("duration", f"{run.duration:.1f} s" if run.duration else "-"),
            ("kilocard", escape(str(run.raw["kilocard"].get("kilocard_version", "-"))))]
    return _table(("", ""), rows)


def _faults(run: Run) -> str:
    if not run.faults:
        return '<p class="muted">no fault was applied</p>'
    origin = run.started
    return _table(("kind", "target", "applied", "reverted/expired", "state", "error"),
                  ((escape(f.kind), escape(f.target), _rel(f.applied_at, origin), _rel(f.ended_at, origin),
                    escape(f.state), escape(f.error)) for f in run.faults))


def _checks(run: Run) -> str:
    if not run.checks:
        return '<p class="muted">no probe ran</p>'
    rows = []
    for c in run.checks:
        found = hints.hint(c, run)
        reason = escape(c.reason) + (f'<div class="hint"><b>fix:</b> {escape(found)}</div>' if found else "")
        rows.append((f'<span class="nw">{escape(c.phase)}</span>', escape(c.name),
                     '<span class="ok">ok</span>' if c.ok else '<span class="bad">failed</span>', reason,
                     f'<span class="nw">{c.seconds:.1f} s</span>'))
    return _table(("when", "probe", "result", "reason", "took"), rows)


def _recovery_table(run: Run) -> str:
    if not run.recovery:
        return '<p class="muted">no replica was deleted or replaced while the run watched</p>'
    return _table(("replica", "replacement", "node", *PHASES),
                  ((escape(str(r.get("pod", ""))), escape(str(r.get("replacement") or "-")),
                    escape(str(r.get("node") or "-")),
                    *(f"{r[p]:.1f} s" if r.get(p) is not None else "-" for p in PHASES)) for r in run.recovery))


def _release(run: Run) -> str:
    if not run.release:
        return '<p class="muted">no workload touched</p>'
    rows = []
    for model, r in sorted(run.release.items()):
        images = ", ".join(f"{i.get('image')}" + (f"@{i['digest']}" if i.get("digest") else "")
                           for i in r.get("images") or [])
        rows.append((escape(model), escape(", ".join(r.get("workloads") or [])), escape(images),
                     f"<code>{escape(' '.join(map(str, r.get('engine_args') or [])))}</code>"))
    return _table(("model", "workloads", "images", "engine arguments"), rows)


def _replay(run: Run) -> list[str]:
    """A replay's verdict on its symptoms (reproduced, or fixed) with recorded against observed; its
    faults at the recorded offsets and the replayed ones; the two recoveries."""
    replay = run.replay
    if replay is None:
        return []
    rows = [(escape(str(p.get("kind", "?"))), escape(", ".join(json.dumps(t, sort_keys=True) for t in p.get("targets")
                                                                or [])),
             f"{p['at']:.1f} s", "-" if p.get("applied_after") is None else f"{p['applied_after']:.2f} s",
             "-" if p.get("applied_after") is None else f"{p['applied_after'] - p['at']:+.2f} s",
             "-" if p.get("reverted_after") is None else f"{p['reverted_after']:.1f} s")
            for p in replay["played"] if p]
    recorded = replay["recorded"]
    alerts = [(escape(a.get("name", "?")), escape(json.dumps(a.get("labels") or {}, sort_keys=True)),
               f"{a['firing_at']:.1f} s", "-" if a.get("resolved_at") is None else f"{a['resolved_at']:.1f} s")
              for a in recorded.get("alerts") or []]
    judged = replay["symptoms"]
    if judged is None:
        verdict = f'<p class="muted">symptoms not judged ({escape(replay["expect"])} was expected)</p>'
    else:
        said = escape(str(judged.get("judgement", "failed")))
        word = '<span class="ok">ok</span>' if judged.get("ok") else f'<span class="bad">{said}</span>'
        verdict = (f"<p>{word} {escape(str(judged.get('reason', '')))}</p>"
                   + _table(SYMPTOM_COLUMNS, [tuple(escape(c) for c in row) for row in run.symptom_rows]))
    return ["<h2>Replay against the incident</h2>", f"<p>timeline {escape(replay['timeline'])}</p>", verdict,
            _table(("fault", "targets", "recorded at", "replayed at", "drift", "reverted at"), rows),
            '<div class="cols"><div><h3>the incident</h3>',
            _fig(lambda f: f.recorded_recovery(run, list(recorded.get("recovery") or [])), "no recovery recorded"),
            "</div><div><h3>the replay</h3>", _fig(lambda f: f.recovery(run), "no replica recovered in the replay"),
            "</div></div>",
            _table(("alert the incident fired", "labels", "firing at", "resolved at"), alerts) if alerts else ""]


def run_page(run: Run) -> str:
    body = [f"<h1>{escape(run.title)}</h1>", _header(run),
            "<h2>Fault timeline</h2>", _fig(lambda f: f.timeline(run), "nothing to draw"), _faults(run),
            "<h2>Probes</h2>", _checks(run),
            "<h2>SLO</h2>", "".join(_fig(lambda f, s=s: f.slo(run, s), "") for s in run.series)
            or '<p class="muted">no SLO verdict with a series</p>',
            "<h2>Recovery</h2>", _fig(lambda f: f.recovery(run), ""), _recovery_table(run), *_replay(run),
            "<h2>Placement</h2>", _fig(lambda f: f.placement(run), "no placement recorded"),
            "<h2>Release</h2>", _release(run),
            "<h2>Plan</h2>", f"<pre>{escape(json.dumps(run.plan, indent=2))}</pre>",
            "<h2>Runner time</h2>", f"<pre>{escape(json.dumps(run.raw['kilocard'].get('runner_seconds', {})))}</pre>"]
    return _page(f"{run.scenario} {run.run_id}: {run.verdict}", body)


def compare_page(a: Run, b: Run) -> str:
    def column(run: Run) -> str:
        return (f"<h2>{escape(run.scenario)} <span class='muted'>{escape(run.run_id)}</span></h2>{_header(run)}"
                f"<h3>Probes</h3>{_checks(run)}<h3>Recovery</h3>{_fig(lambda f: f.recovery(run), '')}"
                f"{_recovery_table(run)}")
    body = [f"<h1>{escape(a.scenario)} against {escape(b.scenario)}</h1>",
            "<h2>SLO, overlaid (from each run's fault)</h2>",
            _fig(lambda f: f.compare_slo(a, b), "one of the runs has no SLO series"),
            f'<div class="cols"><div>{column(a)}</div><div>{column(b)}</div></div>']
    return _page(f"compare {a.key} {b.key}", body)


def trend_page(runs: list[Run], links: dict[str, str]) -> str:
    scenarios = trend.by_scenario(runs)
    points = {name: [(r.when, (w.seconds if (w := trend.slowest(r)) else None), r.exit_code == 0) for r in rs]
              for name, rs in scenarios.items()}
    rows = []
    for name, rs in sorted(scenarios.items()):
        for r in rs:
            w = trend.slowest(r)
            link = f'<a href="{escape(links[r.key])}">{escape(r.key)}</a>' if r.key in links else escape(r.key)
            rows.append((escape(name), link, escape(time.strftime("%Y-%m-%d %H:%M", time.gmtime(r.when))),
                         _badge(r), f"{w.seconds:.1f} s of {w.budget:g} s ({escape(w.check)})" if w else "-",
                         f"{trend.score(r):.2f}"))
    body = [f"<h1>Resilience: {trend.resilience(runs)} / 100</h1>",
            f"<p>{len(runs)} runs of {len(scenarios)} scenarios.</p>",
            f"<pre>{escape((trend.__doc__ or '').strip())}</pre>",
            "<h2>Recovery per scenario over runs</h2>", _fig(lambda f: f.trend(points), "no recovery was measured"),
            _table(("scenario", "run", "when", "verdict", "slowest recovery (share of budget)", "score"), rows)]
    return _page("kilocard trend", body)


STEP_MARKS = {"ran": "", "paused": "ok", "approved": "ok", "skipped": "muted", "aborted": "bad"}


def gameday_page(day: dict[str, Any], runs: list[Run], links: dict[str, str], trend_link: str | None) -> str:
    """A game day as it went (its journal, chaos.gameday.day.GameDay.to_json): the plan, the
    window, and each step in order: an experiment's verdict (and whether its failure was the one
    expected) linked to its report, a pause and how long it held, a gate with who approved it and
    when, what was skipped or aborted and why."""
    by_run = {r.run_id: r for r in runs if r.run_id}
    clusters = sorted({r.cluster for r in runs if r.cluster != "-"})
    exit_code = int(day.get("exit_code", 0))
    badge = (f'<span class="badge e{exit_code}">exit {exit_code}: '
             f'{escape(EXIT_NAMES.get(exit_code, "?"))}</span>')
    head = _table(("", ""), [
        ("verdict", f"{badge} {escape(str(day.get('reason') or ''))}"),
        ("plan", f"{escape(str(day.get('plan_file')))} <span class='muted'>sha256 "
                 f"{escape(str(day.get('plan_sha256') or '')[:12])}</span>"),
        ("when", f"{escape(str(day.get('started_at')))} to {escape(str(day.get('ended_at')))} "
                 f"({_span(day.get('started_at'), day.get('ended_at'))})"),
        ("window", escape(json.dumps(day["window"])) if day.get("window") else "none: any time"),
        ("abort-all switch", escape(str(day.get("control") or "none"))),
        ("cluster", escape("; ".join(clusters)) or "-"),
        ("kilocard", escape(str(day.get("kilocard_version") or "-"))),
    ])
    rows = []
    for step in day.get("steps") or []:
        rows.append((_nowrap(step.get("id")), _nowrap(step.get("kind")), _step_what(step),
                     f'<span class="nw {STEP_MARKS.get(step.get("status"), "")}">{escape(str(step.get("status")))}'
                     "</span>", _step_outcome(step, by_run.get(step.get("run_id") or ""), links),
                     escape(str(step.get("started_at") or "-")),
                     _nowrap(_span(step.get("started_at"), step.get("ended_at")))))
    notes = f"<pre>{escape(str(day['notes']))}</pre>" if day.get("notes") else ""
    body = [f"<h1>Game day: {escape(str(day.get('title')))}</h1>",
            f"<p>{escape(str(day.get('description') or ''))}</p>", head, notes,
            "<h2>Steps</h2>",
            _table(("#", "kind", "step", "status", "outcome", "started", "took"), rows),
            (f"<h2>Resilience of its experiments: {trend.resilience(runs)} / 100</h2>" if runs else ""),
            (f'<p><a href="{escape(trend_link)}">the trend over every run reported here</a></p>'
             if trend_link else "")]
    return _page(f"game day {day.get('title')}: {day.get('verdict')}", body)


def _nowrap(text: Any) -> str:
    return f'<span class="nw">{escape(str(text))}</span>'


def _step_what(step: dict[str, Any]) -> str:
    name = escape(str(step.get("name") or ""))
    what = escape(str(step.get("describe") or ""))
    note = f'<br><span class="muted">{escape(str(step["note"]))}</span>' if step.get("note") else ""
    return (f"<b>{name}</b><br>{what}" if name else what) + note


def _step_outcome(step: dict[str, Any], run: Run | None, links: dict[str, str]) -> str:
    """An experiment's verdict and report; a gate's approver; otherwise the step's reason."""
    reason = escape(str(step.get("reason") or ""))
    if step.get("kind") == "experiment" and step.get("exit_code") is not None:
        code = int(step["exit_code"])
        said = (f'<span class="badge e{code}">exit {code}: {escape(EXIT_NAMES.get(code, "?"))}</span> {reason}')
        if run is not None and run.expected:
            said += f'<br><span class="muted">expected exit {escape(str(run.expected.get("exit")))}</span>'
        if run is not None and run.key in links:
            said += f'<br><a href="{escape(links[run.key])}">report {escape(run.key)}</a>'
        elif step.get("journal"):
            said += f'<br><span class="muted">journal {escape(str(step["journal"]))}</span>'
        return said
    if step.get("kind") == "approve" and step.get("ended_at"):
        return f"{reason}, at {escape(str(step['ended_at']))}"  # who answered is in the reason
    return reason


def _span(start: Any, end: Any) -> str:
    """The time between two ISO stamps, in words ("-" if either is missing)."""
    try:
        seconds = (datetime.fromisoformat(str(end)) - datetime.fromisoformat(str(start))).total_seconds()
    except ValueError:
        return "-"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"
