"""R5: secrets never reach an artifact. One run holds every credential kilocard handles: a
Prometheus bearer token (checked by an authenticating proxy in front of the testbed's Prometheus,
so the run must really send it), the node agents' token, the ServiceAccount token in its
kubeconfig, and a token and a password a user put in the experiment's configuration and secrets.
Then every file the run wrote (journal, report page, summary, JUnit, trend, ledger, its output)
and every Event it left is searched for each of them."""

from __future__ import annotations

import base64
import http.server
import json
import secrets
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import yaml

from testbed import fleet
from tests.testbed.helpers import apply_deploy, service_account_kubeconfig

pytestmark = pytest.mark.testbed
SMALL = "llama-2-7b-fragile"


@pytest.fixture
def guarded_prometheus(testbed) -> Iterator[tuple[str, str]]:
    """(url, token): a proxy that forwards to the testbed's Prometheus only with the token."""
    token = f"canary-prometheus-{secrets.token_hex(8)}"

    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server spelling
            if self.headers.get("Authorization") != f"Bearer {token}":
                self.send_response(401)
                self.end_headers()
                return
            try:
                with urllib.request.urlopen(testbed.prometheus_url + self.path, timeout=30) as reply:
                    status, body = reply.status, reply.read()
            except urllib.error.HTTPError as err:
                status, body = err.code, err.read()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", token
    finally:
        server.shutdown()


def experiment(namespace: str, node: str, planted: dict[str, str]) -> dict:
    slo = {"model": SMALL, "namespace": namespace, "threshold": 5.0, "window": "10s"}
    return {
        "title": "every credential at once", "description": "R5 canaries",
        "configuration": {"namespace": namespace, "prometheus_token": planted["configuration"]},
        "secrets": {"kilocard": {"password": planted["secret"]}},
        "steady-state-hypothesis": {"title": "serving", "probes": [{
            "type": "probe", "name": "ttft-under", "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"},
            "provider": {"type": "python", "module": "probes.chaostoolkit", "func": "slo_under", "arguments": slo}}]},
        "method": [
            {"type": "action", "name": "ecc", "provider": {"type": "python", "module": "chaos.actions",
                                                           "func": "apply_fault", "arguments": {"fault": {
                                                               "kind": "gpu-ecc", "nodes": [node], "card": 0,
                                                               "params": {"type": "sbe"}, "ttl_seconds": 120}}}},
            {"type": "action", "name": "kill", "provider": {"type": "python", "module": "chaos.actions",
                                                            "func": "apply_fault", "arguments": {"fault": {
                                                                "kind": "pod-kill", "namespace": namespace,
                                                                "label_selector": f"kilocard.io/model={SMALL}",
                                                                "count": 1}}}}],
    }


def test_no_credential_reaches_a_journal_a_report_a_log_or_an_event(testbed, kube, pool, prom, tmp_path,
                                                                     guarded_prometheus):
    p = pool(2)
    fleet.deploy(kube, p.fleet(SMALL, replicas={SMALL: 2}), timeout=60, say=lambda _m: None, prometheus=p.prometheus)
    url, prometheus_token = guarded_prometheus
    inputs = tmp_path / "inputs"  # what the user gave; everything else under tmp_path is the run's
    inputs.mkdir()
    apply_deploy(kube, "namespace.yaml", "rbac-runner.yaml")
    kubeconfig = service_account_kubeconfig(testbed, kube, "kilocard-system", "kilocard-runner",
                                            inputs / "runner.kubeconfig")
    (inputs / "prometheus.token").write_text(prometheus_token + "\n")
    planted = {"configuration": f"canary-config-{secrets.token_hex(8)}", "secret": f"canary-secret-{secrets.token_hex(8)}"}
    (inputs / "experiment.yaml").write_text(yaml.safe_dump(experiment(p.namespace, p.node_names[0], planted)))
    canaries = {
        "prometheus token": prometheus_token,
        "agent token": testbed.paths.agent_token.read_text().strip(),
        "kubeconfig token": yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"],
        **{f"planted in the {k}": v for k, v in planted.items()},
    }
    out = tmp_path / "run"
    out.mkdir()
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "run", str(inputs / "experiment.yaml"), "--kubeconfig",
                           str(kubeconfig), "--prometheus-url", url, "--prometheus-token-file",
                           str(inputs / "prometheus.token"), "--ledger-dir", str(out / "ledger"),
                           "--journal", str(out / "journal.json"), "--reports", str(out / "reports")],
                          cwd=out, capture_output=True, text=True, timeout=300)
    (out / "stdout.txt").write_text(done.stdout)
    (out / "stderr.txt").write_text(done.stderr)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]  # the token was sent: the proxy let it by
    journal = json.loads((out / "journal.json").read_text())
    assert journal["experiment"]["configuration"]["prometheus_token"] == "***"  # where the planted one was: redacted
    artifacts = [f for f in out.rglob("*") if f.is_file()]
    assert {f.name for f in artifacts} >= {"journal.json", "index.html", "summary.md", "junit.xml", "stdout.txt"}
    assert any(f.suffix == ".jsonl" for f in artifacts)  # the ledger
    # ...while the run did use what it was given: without the token the proxy refuses, and the
    # probe is refused (an answer, a 401: not "no data").
    second = tmp_path / "unauthorised"
    second.mkdir()
    unauthorised = subprocess.run([sys.executable, "-m", "chaos.cli", "run", str(inputs / "experiment.yaml"),
                                   "--kubeconfig", str(kubeconfig), "--prometheus-url", url, "--ledger-dir",
                                   str(second / "ledger"), "--journal", str(second / "journal.json"), "--no-report"],
                                  cwd=second, capture_output=True, text=True, timeout=300)
    (second / "output.txt").write_text(unauthorised.stdout + unauthorised.stderr)
    assert unauthorised.returncode == 1 and "401" in (second / "journal.json").read_text()
    artifacts += [f for f in second.rglob("*") if f.is_file()]
    events = [e.to_dict() for e in kube.core.list_event_for_all_namespaces().items]
    for what, canary in canaries.items():
        forms = (canary, *encoded(canary))
        found = [str(f.relative_to(tmp_path)) for f in artifacts if any(x.encode() in f.read_bytes() for x in forms)]
        assert not found, f"the {what} is in {found}"
        assert not [e for e in events if any(x in str(e) for x in forms)], f"the {what} is in an Event"


def encoded(secret: str) -> list[str]:
    """The secret's base64 as it would show inside a longer encoded value: at each of the three
    alignments, without the characters its neighbours would change."""
    found = []
    for shift in range(3):
        text = base64.b64encode(b"\0" * shift + secret.encode()).decode().rstrip("=")
        found.append(text[(shift * 4 + 2) // 3 + 1: -2])
    return found
