"""Fault windows where operators look: the dashboard kilocard ships (deploy/grafana) queried on the
testbed's real Prometheus, and a catalog run's fault sent as an annotation region to a Grafana
annotations API (a recording HTTP server: no Grafana can be run here, tests/unit/test_fault_windows.py)
and recorded as Events on the node it hit, in the testbed's real apiserver."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from chaos import grafana, record
from tests.testbed.helpers import deploy, eventually
from tests.testbed.test_catalog import TP8, experiment
from tests.testbed.test_runner import kilocard_run
from tests.unit.test_fault_windows import Recorder

pytestmark = pytest.mark.testbed
DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "kilocard-dashboard.json"


@pytest.mark.long(90)
def test_the_dashboard_shows_each_replica_and_a_runs_fault_window_is_annotated_over_it(kube, testbed, pool, prom,
                                                                                       tmp_path):
    p = pool(3)
    deploy(kube, p, {TP8: 2})
    replicas = {pod["metadata"]["name"] for pod in kube.list_pods_raw(p.namespace)}
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        query = panel["targets"][0]["expr"].replace("$model", TP8).replace("$namespace", p.namespace)
        shown = eventually(lambda q=query: {row["metric"].get("pod") for row in prom.custom_query(q)}, 30)
        assert shown == replicas, (panel["title"], query, shown)

    recorder = Recorder()
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    try:
        code, journal, _ = kilocard_run(testbed, tmp_path, experiment("s2-isolate-one-card.yaml"),
                                        "--var", f"namespace={p.namespace}", "--grafana-url", recorder.url)
    finally:
        recorder.shutdown()
        recorder.server_close()
    assert code == 0, journal["kilocard"]["reason"]
    (isolated,) = journal["kilocard"]["faults"]
    assert journal["kilocard"]["grafana"] == {"url": recorder.url, "sent": 2, "failed": []}
    (made, ended) = recorder.calls
    (query,) = [a for a in dashboard["annotations"]["list"] if a["name"] == "kilocard faults"]
    assert made[0] == "POST" and set(query["target"]["tags"]) <= set(made[2]["tags"])  # the dashboard draws it
    assert f"kind:{isolated['kind']}" in made[2]["tags"] and f"run:{journal['kilocard']['run_id']}" in made[2]["tags"]
    assert made[2]["time"] == int(isolated["applied_at"] * 1000)
    assert ended[:2] == ("PATCH", "/api/annotations/1")  # the region ends at the revert, before the run did
    assert made[2]["time"] < ended[2]["timeEnd"] <= journal["kilocard"]["finished_at"] * 1000
    assert grafana.TAG in made[2]["tags"]
    # `kubectl describe node` shows the same window: the run's Events on the node it isolated.
    told = [e for e in record.events(kube, [], isolated["applied_at"] - 5, journal["kilocard"]["finished_at"] + 5)
            if e["involvedObject"]["name"] == isolated["target"]["node"] and e["reason"].startswith("KilocardFault")]
    assert [e["reason"] for e in sorted(told, key=lambda e: e["eventTime"])] == ["KilocardFaultApplied",
                                                                                "KilocardFaultReverted"], told
    assert all(journal["kilocard"]["run_id"] in e["message"] for e in told)
    assert journal["kilocard"]["events"] == {"sent": 2, "failed": []}
