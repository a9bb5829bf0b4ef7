"""The planner's commands refuse bad input before any cluster is asked, and their pages show what
their JSON says: the fragile machine black in the grid and first in the table; each model's
month with its interval, the spares curve and the worst hour."""

from __future__ import annotations

import json
import subprocess
import sys

from chaos import hunt
from chaos.rehearsal import month
from chaos.rehearsal.recoveries import Recoveries
from chaos.report import planning
from probes.impact import Load
from tests.unit.test_hunt import LOADS, fragile
from tests.unit.test_rehearsal import KEY, LOAD, fleet, host


def kilocard(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "KUBECONFIG": "/nonexistent/kubeconfig"})


def test_bad_input_is_said_at_once_with_exit_2():
    found = kilocard("hunt", "--kinds", "card,disk", "--topology-label", "x", "--window", "5x")
    assert found.returncode == 2 and "Traceback" not in found.stderr
    for said in ("--kinds: 'disk' is not a kind of domain", "--topology-label 'x': expected KEY=KIND",
                 "--window:"):
        assert said in found.stderr, found.stderr
    found = kilocard("rehearse", "--rate", "disk.per_day=1", "--horizon", "soon", "--recoveries", "/nonexistent.json")
    assert found.returncode == 2 and "Traceback" not in found.stderr
    for said in ("--horizon:", "--rate 'disk.per_day=1'", "/nonexistent.json: cannot read recovery samples"):
        assert said in found.stderr, found.stderr
    assert kilocard("rehearse", "--target", "1").returncode == 2
    assert kilocard("hunt", "--top", "0").returncode == 2


def test_the_hunt_page_colours_the_fragile_machine_and_ranks_it(tmp_path):
    found = hunt.hunt(fragile(), LOADS, {}, hunt.Figures("5m", 1.0, 0.5))
    found["ranked"][1]["confirmed"] = {"agree": False, "exit": 1, "verdict": "probe 'whole-ns-frag' failed",
                                       "summary": "NOT as predicted: ns/frag: lost 4 (predicted 4)",
                                       "journal": str(tmp_path / "confirm-2.json")}
    text = hunt.text(found, 3)
    assert text[0].startswith("5 nodes, 40 cards; ") and any(line.startswith("the 3 weakest of") for line in text)
    assert any("  1. rack/r0  [outage]" in line for line in text)
    assert any("on the twin: NOT as predicted" in line for line in text)
    page = planning.hunt_page(found, tmp_path)
    html = page.read_text()
    assert json.loads((tmp_path / "hunt.json").read_text())["ranked"][0]["domain"] == "rack/r0"
    assert 'title="a: outage" style="background:#000000"' in html
    assert 'title="e: none"' in html  # the full rack's node: losing it takes no replica
    assert '<span class="bad">not as predicted</span>: ns/frag: lost 4 (predicted 4)' in html
    assert '<a href="confirm-2.json">journal</a>' in html and html.count("not confirmed") == len(
        [d for d in found["ranked"] if d["severity"] != "none"][:25]) - 1
    first = html.index("<td>1</td>")
    assert html.index("rack/r0", first) < html.index("node/a", first)


def test_the_rehearse_page_states_its_inputs_and_figures(tmp_path):
    plan = month.Plan(horizon_days=60, seeds=4, max_spares=2, target_availability=0.9999)
    found = month.rehearse(fleet(5, spare_nodes=2), {KEY: LOAD}, host(24.0),
                           Recoveries({"host": (600.0,)}, {"m": (300.0,)}), plan)
    found["inputs"]["no_load"] = {}
    html = planning.rehearse_page(found, tmp_path).read_text()
    text = "\n".join(month.text(found))
    assert "4 months of 60 days on 7 nodes, 56 cards" in text and "spares for ns/m (p90 SLO-minutes): +0:" in text
    assert "host: 1 per node-day" in text and "repair 24 h (assumed: no published figure)" in text
    model = found["models"]["ns/m"]
    assert model["slo_minutes"]["ci95"] is not None and 0 <= model["availability"] <= 1
    assert "<svg" in html  # the spares curve
    for said in ("SLO-minutes lost: mean [95 % CI]", "the field account", "Inputs: failure rates", "host",
                 f"{model['slo_minutes']['mean']:g}"):
        assert said in html, said
    assert found["worst_hour"] is None or "The worst hour" in html


def test_a_model_without_load_figures_is_said_so_not_rehearsed_as_kept(tmp_path):
    plan = month.Plan(horizon_days=10, seeds=2, search=False)
    found = month.rehearse(fleet(5), {}, host(24.0), Recoveries({"host": (60.0,)}, {"m": (60.0,)}), plan)
    assert found["models"]["ns/m"]["slo"] == "unknown: no load figures" and "spares" not in found
    assert isinstance(Load, type)
