"""Fault windows where operators look: Grafana annotation regions (chaos.grafana), against a real
HTTP server on loopback that answers as Grafana's annotations API does and records each call (no
Grafana can be run here: it is not in Debian's packages, and its Go module is under the AGPL,
which the module policy of this machine refuses), and Kubernetes Events on the faults' targets (chaos.fault_events)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from chaos import events, grafana
from chaos.errors import SpecError


class Recorder(ThreadingHTTPServer):
    def __init__(self, status: int = 200, delay: float = 0.0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status, self.delay, self.calls = status, delay, []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Recorder

    def _answer(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.server.calls.append((self.command, self.path, body, self.headers.get("Authorization")))
        time.sleep(self.server.delay)
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        made = {"id": len(self.server.calls), "message": "Annotation added"} if self.command == "POST" else {}
        self.wfile.write(json.dumps(made).encode())

    do_POST = do_PATCH = _answer

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def serving(request) -> Iterator[Recorder]:
    server = Recorder(*getattr(request, "param", ()))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def fault(run_id: str, state: str, at: float, fault_id: str = "f1") -> dict:
    return {"topic": "fault", "run_id": run_id, "fault_id": fault_id, "kind": "gpu-ecc", "state": state,
            "target": {"node": "gpu-007", "card": 3}, "applied_at": 1000.5 if state != "recorded" else None,
            "at": at}


def test_each_fault_is_a_region_from_its_apply_to_its_revert_tagged_for_the_dashboards_query(serving):
    annotator = grafana.Annotator(serving.url, "r1", "S3", grafana.session(serving.url, "t0ken")).start()
    for event in (fault("r1", "recorded", 1000.0), fault("r1", "applied", 1000.6), fault("other", "applied", 1001.0),
                  fault("r1", "reverted", 1060.25)):
        events.publish(event)
    summary = annotator.stop()
    assert summary == {"url": serving.url, "sent": 2, "failed": []}
    (post, patch) = serving.calls
    assert post[:2] == ("POST", "/api/annotations") and post[3] == "Bearer t0ken"
    assert post[2] == {"time": 1000500, "tags": ["kilocard", "run:r1", "kind:gpu-ecc", "experiment:S3"],
                       "text": "gpu-ecc on gpu-007 cards 3 (run r1)"}
    assert patch[:3] == ("PATCH", "/api/annotations/1", {"timeEnd": 1060250})


@pytest.mark.parametrize("serving", [(500,)], indirect=True)
def test_a_grafana_that_refuses_is_counted_never_raised(serving):
    annotator = grafana.Annotator(serving.url, "r1", "S3", grafana.session(serving.url)).start()
    events.publish(fault("r1", "applied", 1000.6))
    events.publish(fault("r1", "reverted", 1060.0))  # its region was never made: nothing to end
    summary = annotator.stop()
    assert summary["sent"] == 0 and len(summary["failed"]) == 1 and "500" in summary["failed"][0]
    assert [c[0] for c in serving.calls] == ["POST"]


@pytest.mark.parametrize("serving", [(200, 2.0)], indirect=True)
def test_a_slow_grafana_never_holds_the_run_up(serving):
    annotator = grafana.Annotator(serving.url, "r1", "S3", grafana.session(serving.url)).start()
    started = time.monotonic()
    events.publish(fault("r1", "applied", 1000.6))  # the ledger's write: it must not wait on Grafana
    assert time.monotonic() - started < 0.5
    summary = annotator.stop(timeout=0.5)
    assert summary["sent"] == 0 and "still sending after 0.5 s" in summary["failed"][0]


def test_a_token_goes_in_cleartext_nowhere_beyond_this_machine_and_a_bad_url_is_input():
    with pytest.raises(SpecError, match="refusing to send the Grafana token in cleartext"):
        grafana.session("http://grafana.example:3000", "t0ken")
    assert grafana.session("https://grafana.example", "t0ken").headers["Authorization"] == "Bearer t0ken"
    assert "Authorization" not in grafana.session("http://grafana.example:3000", "").headers
    with pytest.raises(SpecError, match="expected http"):
        grafana.session("grafana.example:3000", "")


def test_the_flags_become_the_runs_configuration_and_a_cleartext_token_is_exit_2(tmp_path, capsys, monkeypatch):
    from chaos import cli

    monkeypatch.setenv(grafana.TOKEN_ENV, "")  # the flag sets it; undone after the test
    experiment = Path(__file__).parents[2] / "experiments" / "s1-kill-one-replica.yaml"
    (tmp_path / "token").write_text("t0ken\n")
    args = cli.build_parser().parse_args(["run", str(experiment), "--grafana-url", "https://grafana.example",
                                          "--grafana-token-file", str(tmp_path / "token")])
    assert "kilocard_grafana_url=https://grafana.example" in cli._kilocard_vars(args)
    assert grafana.session("https://grafana.example").headers["Authorization"] == "Bearer t0ken"
    argv = ["run", str(experiment), "--kubeconfig", str(tmp_path / "none"), "--grafana-url", "http://grafana.example",
            "--grafana-token-file", str(tmp_path / "token")]
    assert cli.main(argv) == 2
    assert "refusing to send the Grafana token in cleartext" in capsys.readouterr().err


def test_the_dashboard_draws_kilocards_annotations_over_every_engines_series():
    from probes import hung, metric_names, slo

    dashboard = json.loads((Path(__file__).parents[2] / "deploy" / "grafana" / "kilocard-dashboard.json").read_text())
    (query,) = [a for a in dashboard["annotations"]["list"] if a["name"] == "kilocard faults"]
    assert query["target"]["tags"] == [grafana.TAG] and query["enable"] is True
    shown = {p["title"]: p["targets"][0]["expr"] for p in dashboard["panels"]}
    for names, title in ((slo.TTFT_NAMES, "P95 time to first token"), (slo.ITL_NAMES, "P95 inter-token latency"),
                         (hung.RUNNING_NAMES, "Requests running"), (hung.WAITING_NAMES, "Requests waiting")):
        (expr,) = [e for t, e in shown.items() if t.startswith(title)]
        assert all(spelling in expr for name in names for spelling in metric_names.spellings(name)), (title, expr)
        assert "by (le, pod)" in expr or "by (pod)" in expr  # per replica: a model-level line hides the sick one


class Events:
    """A Kube that records the Events asked of it."""

    def __init__(self):
        self.recorded = []

    def record_event(self, kind, name, namespace, reason, message, component, uid=None, event_type="Normal"):
        self.recorded.append((kind, name, namespace, reason, event_type, uid, message))


def test_each_transition_is_one_event_on_the_pod_or_node_it_hit_and_nothing_else_is_told():
    from chaos.fault_events import FaultEvents

    kube = Events()
    told = FaultEvents(kube, "r1").start()
    pod = {"name": "m-0", "namespace": "serving", "uid": "u-1", "node": "gpu-001"}
    for event in ({**fault("r1", "applied", 1.0), "kind": "pod-kill", "target": pod},
                  fault("r1", "recorded", 1.0, "f2"), fault("r1", "applied", 2.0, "f2"),
                  fault("r1", "applied", 2.5, "f2"),  # written again in the same state (its evidence): told once
                  {**fault("r1", "failed", 3.0, "f3"), "error": "agent refused"},
                  {**fault("r1", "applied", 2.0, "f4"), "target": {"namespace": "serving", "pod_selector": {}}},
                  fault("other", "applied", 2.0, "f5"), fault("r1", "reverted", 4.0, "f2")):
        events.publish(event)
    assert told.stop() == {"sent": 4, "failed": []}
    assert [r[:6] for r in kube.recorded] == [
        ("Pod", "m-0", "serving", "KilocardFaultApplied", "Normal", "u-1"),
        ("Node", "gpu-007", "default", "KilocardFaultApplied", "Normal", None),
        ("Node", "gpu-007", "default", "KilocardFaultFailed", "Warning", None),
        ("Node", "gpu-007", "default", "KilocardFaultReverted", "Normal", None)]
    assert kube.recorded[2][6] == "gpu-ecc on gpu-007 cards 3 failed in kilocard run r1: agent refused"
