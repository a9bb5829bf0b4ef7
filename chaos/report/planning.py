"""The capacity planner's pages, from the plain data `kilocard hunt` and `kilocard rehearse`
print as JSON (a page can be made again from the JSON alone): the fleet's weakest points as a
grid of racks and nodes coloured by what losing each does, and the month of failures with its
inputs, each figure's confidence and the spares curve."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from chaos.report.html import _fig, _page, _table

SEVERITY_COLOURS = {"outage": "#000000", "slo-lasting": "#7b0d1e", "slo": "#c1121f", "capacity": "#f4a261",
                    "degraded": "#e9c46a", "none": "#d8f3dc"}
GRID_STYLE = ("<style>.grid{display:flex;flex-wrap:wrap;gap:10px}.rack{border:1px solid #ccc;padding:4px 6px}"
              ".rack b{font-size:12px}.cells{display:grid;grid-template-columns:repeat(8,14px);gap:2px;margin-top:3px}"
              ".cell{width:14px;height:14px;border-radius:2px}.key span{display:inline-block;width:12px;height:12px;"
              "margin:0 4px 0 12px;vertical-align:middle}</style>")


def _write(folder: Path, name: str, found: dict[str, Any], html: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(found, indent=1, default=str) + "\n")
    page = folder / f"{name}.html"
    page.write_text(html)
    return page


def _swatch(severity: str) -> str:
    return f'<span class="cell" style="display:inline-block;background:{SEVERITY_COLOURS[severity]}"></span>'


def _model_line(m: dict[str, Any]) -> str:
    why = f" <span class=muted>({escape('; '.join(m['reasons']))})</span>" if m["reasons"] else ""
    return (f"{escape(m['namespace'])}/{escape(m['model'])}: {m['lost']} of {m['replicas']} lost, "
            f"{m['nowhere']} for good, SLO {escape(m['slo'])}, KV {escape(m['kv'])}{why}")


def _confirmed(c: dict[str, Any] | None) -> str:
    if not c:
        return '<span class="muted">not confirmed</span>'
    mark = '<span class="ok">as predicted</span>' if c["agree"] else '<span class="bad">not as predicted</span>'
    links = " ".join(f'<a href="{escape(Path(c[k]).name)}">{k}</a>' for k in ("experiment", "journal") if c.get(k))
    return f"{mark}: {escape(c['summary'].split(': ', 1)[-1])}<br><span class=muted>exit {c['exit']}, " \
           f"{escape(c['verdict'])}</span> {links}"


def hunt_page(found: dict[str, Any], folder: Path, top: int = 25) -> Path:
    """hunt.html (and hunt.json) in `folder`."""
    ranked = found["ranked"]
    by_node = {d["nodes"][0]: d["severity"] for d in ranked if d["kind"] == "node"}
    racks: dict[str, list[str]] = {d["domain"].split("/", 1)[1]: d["nodes"] for d in ranked if d["kind"] == "rack"}
    in_rack = {n for nodes in racks.values() for n in nodes}
    if set(by_node) - in_rack:
        racks["(no rack label)"] = sorted(set(by_node) - in_rack)
    rack_severity = {d["domain"].split("/", 1)[1]: d["severity"] for d in ranked if d["kind"] == "rack"}
    grid = []
    for rack, nodes in sorted(racks.items()):
        cells = "".join(f'<div class="cell" title="{escape(n)}: {by_node.get(n, "none")}" '
                        f'style="background:{SEVERITY_COLOURS[by_node.get(n, "none")]}"></div>' for n in sorted(nodes))
        grid.append(f'<div class="rack"><b>{escape(rack)}</b> {_swatch(rack_severity.get(rack, "none"))}'
                    f'<div class="cells">{cells}</div></div>')
    key = "".join(f'<span style="background:{c}"></span>{escape(s)}' for s, c in SEVERITY_COLOURS.items())
    inputs = found["inputs"]
    loads = _table(("model", "load (QPS)", "service rate per replica", "P95 TTFT now"),
                   ([escape(name), f"{v['qps']:g}", f"{v['service_rate']:g}", f"{v['p95_now']:.3f} s"]
                    for name, v in inputs["loads"].items()))
    shown = [d for d in ranked if d["severity"] != "none"][:top]
    rows = []
    for i, d in enumerate(shown, 1):
        models = "<br>".join(_model_line(m) for m in d["models"])
        rows.append([str(i), f'<span class="nw">{escape(d["domain"])}</span>',
                     f'<span class="nw">{_swatch(d["severity"])} {escape(d["severity"])}</span>', str(d["cards"]),
                     models, _confirmed(d.get("confirmed"))])
    body = [GRID_STYLE, "<h1>The fleet's weakest points</h1>",
            f'<p class="muted">{inputs["nodes"]} nodes, {inputs["cards"]} cards; '
            + ", ".join(f"{n} {k} domains" for k, n in found["domains"].items() if n)
            + f"; each lost in turn on one snapshot, predicted in {found['seconds']:.2f} s. SLO: P95 TTFT at most "
            f"{inputs['slo_ttft_seconds']:g} s at {inputs['peak']:g}x the load of the last {escape(inputs['window'])}."
            "</p>",
            "<h2>Racks and nodes, coloured by what losing each does</h2>",
            f'<p class="key">{key}</p><div class="grid">{"".join(grid)}</div>',
            "<h2>Loads read from Prometheus</h2>", loads,
            "".join(f'<p class="muted">{escape(k)}: SLO not predicted: {escape(v)}</p>'
                    for k, v in inputs["no_load"].items()),
            f"<h2>The {len(shown)} weakest of {len(ranked)} domains</h2>",
            _table(("#", "domain", "severity", "cards", "what it does", "on the twin"), rows)]
    return _write(folder, "hunt", found, _page("kilocard hunt", body))


def rehearse_page(found: dict[str, Any], folder: Path) -> Path:
    """rehearse.html (and rehearse.json) in `folder`."""
    i = found["inputs"]
    classes = _table(("class", "rate", "a month here", "effect", "repair", "source"),
                     ([escape(c["name"]), f"{c['per_day']:.3g} per {escape(c['per'])}-day",
                       f"{c['expected_per_month']:g}", escape(c["effect"]),
                       f"{c['repair_hours']:g} h <span class=muted>({escape(c['repair_source'])})</span>",
                       escape(c["source"])] for c in i["classes"]))
    rec = i["recoveries"]
    samples = _table(("part", "of", "samples", "median", "range"),
                     ([part, escape(name), str(s["n"]), f"{s['median']:.0f} s", f"{s['min']:.0f}-{s['max']:.0f} s"]
                      for part in ("detection", "startup") for name, s in rec[part].items()))
    models = []
    for name, m in found["models"].items():
        if "slo_minutes" not in m:
            models.append([escape(name), str(m["replicas"]), escape(m["slo"]), "", "", "", "",
                           f"{m['replica_hours_down']['mean']:g}"])
            continue
        s = m["slo_minutes"]
        ci = f"[{s['ci95'][0]:g}, {s['ci95'][1]:g}]" if s["ci95"] else ""
        short = ' <span class="bad">over its SLO with every replica serving</span>' if m["short_before_failures"] \
            else ""
        models.append([escape(name), f"{m['replicas']} (SLO from {m['fewest_replicas_for_slo']}){short}",
                       f"{s['mean']:g} {ci}", f"{s['p90']:g}", f"{m['availability']:.5f}",
                       f"{m['worst_day']['minutes']['mean']:g} (worst month: {m['worst_day']['worst_month_minutes']:g} "
                       f"on day {m['worst_day']['worst_month_day']})", f"{m['no_spare_minutes']['mean']:g}",
                       f"{m['replica_hours_down']['mean']:g}"])
    spares = []
    for name, search in found.get("spares", {}).items():
        enough = search["fewest_meeting_target"]
        rule = search["field_account_rule"]
        spares.append([escape(name), ", ".join(
            f"+{c['spares']}: {c['slo_minutes']['p90']:g}" if "slo_minutes" in c else f"+{c['spares']}: no room"
            for c in search["curve"]), f"+{enough}" if enough is not None else "not met",
            f"+{rule[0]} to +{rule[1]}"])
    hour = found.get("worst_hour")
    replayed = (hour or {}).get("replayed")
    compared = (f"<p>Replayed on the testbed ({escape(replayed['how'])}): {escape(replayed['verdict'])}</p>"
                + _table(("model", "simulated SLO-minutes", "observed on the replay"),
                         ([escape(k), f"{v['simulated']:g}", "-" if v["observed"] is None else f"{v['observed']:.1f}"]
                          for k, v in replayed["models"].items()))) if replayed else ""
    worst = (f"<p>Month {hour['month']}, from hour {hour['start_seconds'] / 3600:.0f}: {hour['slo_minutes']:g} "
             f"SLO-minutes ({escape(', '.join(f'{k} {v:g}' for k, v in hour['models'].items()))}).</p>" + compared
             + _table(("at (h)", "event", "what", "detail"),
                      ([f"{e['at'] / 3600:.2f}", escape(e["kind"]), escape(e["what"]), escape(e["detail"])]
                       for e in hour["events"]))) if hour else "<p>No hour of any month broke an SLO.</p>"
    seconds = found["seconds"]
    body = ["<h1>A month of failures, before it happens</h1>",
            f'<p class="muted">{i["months"]} months of {i["horizon_days"]:g} days on {i["nodes"]} nodes, '
            f"{i['cards']} cards, simulated in {seconds['months']:.1f} s"
            + (f", spares searched in {seconds['spares']:.1f} s" if "spares" in seconds else "")
            + f". Repairs at a time: {i['repair_crews'] or 'every failed part at once'}. Each figure: the mean over "
            "the months with its 95 % confidence interval, and the 90th percentile (9 months in 10 lose at most "
            "that).</p>",
            "<h2>Each model's month</h2>",
            _table(("model", "replicas", "SLO-minutes lost: mean [95 % CI]", "p90", "availability", "worst day (min)",
                    "minutes with no spare", "replica-hours down"), models),
            f"<h2>Spares against the target (availability {i['target_availability']} in 9 months of 10: at most "
            f"{i['allowed_slo_minutes']:g} SLO-minutes)</h2>",
            _fig(lambda f: f.spares_curve(found), ""),
            _table(("model", "p90 SLO-minutes with each added replica", "fewest meeting the target",
                    "the field account's 20-30 % rule"), spares),
            "<h2>The worst hour</h2>", worst,
            "<h2>Inputs: failure rates</h2>", classes,
            f"<h2>Inputs: recoveries measured ({escape(Path(str(rec.get('source', ''))).name)}"
            f"{', ' + escape(str(rec['command'])) if rec.get('command') else ''}"
            f"{', ' + escape(str(rec['measured'])) if rec.get('measured') else ''})</h2>", samples,
            "<h2>Loads</h2>", _table(("model", "QPS", "service rate per replica", "SLO P95 TTFT"),
                                     ([escape(k), f"{v['qps']:g}", f"{v['service_rate']:g}",
                                       f"{v['slo_ttft_seconds']:g} s"] for k, v in i["loads"].items()))]
    return _write(folder, "rehearse", found, _page("kilocard rehearse", body))
