"""Prometheus over TLS as a production one is reached: a real HTTPS server on loopback whose
certificate a private CA signed. Every call (the queries and the scrape interval's config read)
verifies it: refused without the CA, answered with `--prometheus-ca`; the bearer token rides
along, and is never sent in cleartext beyond this machine unless `--prometheus-insecure` says so."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from probes import slo
from testbed import pki

CONFIG = {"status": "success", "data": {"yaml": "global:\n  scrape_interval: 7s\n"}}
EMPTY = {"status": "success", "data": {"resultType": "vector", "result": []}}


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> pki.Pki:
    return pki.ensure(tmp_path_factory.mktemp("pki"), "127.0.0.1")


@pytest.fixture
def prometheus(authority: pki.Pki) -> Iterator[tuple[str, list[str]]]:
    """(https URL, the Authorization headers it received)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            seen.append(self.headers.get("Authorization", ""))
            body = json.dumps(CONFIG if self.path.startswith("/api/v1/status/config") else EMPTY).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(authority.apiserver_cert, authority.apiserver_key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (slo.CA_ENV, slo.INSECURE_ENV, slo.TOKEN_ENV):
        monkeypatch.delenv(name, raising=False)


def test_a_certificate_no_trusted_ca_signed_is_refused_on_every_path(prometheus: tuple[str, list[str]]) -> None:
    url, seen = prometheus
    with pytest.raises(slo.ProbeError, match="CERTIFICATE_VERIFY_FAILED"):  # cannot tell: never a default
        slo.scrape_interval(url)
    with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
        slo.connect(url).custom_query("up")
    assert seen == []  # not one request got through


def test_with_its_ca_every_path_verifies_and_the_token_rides_along(prometheus: tuple[str, list[str]],
                                                                   authority: pki.Pki,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    url, seen = prometheus
    monkeypatch.setenv(slo.CA_ENV, str(authority.ca_cert))
    monkeypatch.setenv(slo.TOKEN_ENV, "s3cret")
    assert slo.scrape_interval(url) == 7.0
    assert slo.connect(url).custom_query("up") == []
    assert seen == ["Bearer s3cret", "Bearer s3cret"]


def test_insecure_is_said_outright_and_only_then_skips_verification(prometheus: tuple[str, list[str]],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    url, _seen = prometheus
    monkeypatch.setenv(slo.INSECURE_ENV, "1")
    assert slo.scrape_interval(url) == 7.0


@pytest.mark.parametrize(("url", "refused"), [
    ("http://prometheus.monitoring:9090", True), ("http://10.0.0.7:9090", True),
    ("http://[fe80::1]:9090", True), ("http://127.0.0.1:9090", False), ("http://127.0.0.2:9090", False),
    ("http://[::1]:9090", False), ("http://localhost:9090", False), ("https://prometheus:9090", False)])
def test_a_token_never_goes_in_cleartext_beyond_this_machine(url: str, refused: bool,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(slo.TOKEN_ENV, "s3cret")
    if refused:
        with pytest.raises(slo.SloError, match="refusing to send the Prometheus credentials in cleartext"):
            slo.session(url)
        monkeypatch.setenv(slo.INSECURE_ENV, "1")
    assert slo.session(url).headers["Authorization"] == "Bearer s3cret"


def test_the_cli_flags_set_the_ca_and_the_switch_and_a_missing_ca_file_is_input(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch,
                                                                                capsys: pytest.CaptureFixture[str],
                                                                                authority: pki.Pki) -> None:
    from chaos import cli

    timeline = Path(__file__).parents[2] / "experiments" / "incidents" / "ecc-one-card.yaml"
    journal = tmp_path / "j.json"
    journal.write_text((Path(__file__).parent / "journals" / "s3.json").read_text())
    assert cli.main(["record", "--journal", str(journal), "--prometheus-url", "https://127.0.0.1:1",
                     "--prometheus-ca", str(tmp_path / "none.pem"), "-o", str(tmp_path / "t.yaml")]) == 2
    assert f"--prometheus-ca: no such file {tmp_path / 'none.pem'}" in capsys.readouterr().err
    args = cli.build_parser().parse_args(["replay", str(timeline), "--prometheus-ca", str(authority.ca_cert),
                                          "--prometheus-insecure"])
    cli._prometheus_access(args)
    import os

    assert os.environ[slo.CA_ENV] == str(authority.ca_cert.resolve()) and os.environ[slo.INSECURE_ENV] == "1"


def test_basic_auth_goes_in_cleartext_nowhere_beyond_this_machine_and_never_beside_a_token(monkeypatch):
    monkeypatch.setenv(slo.BASIC_ENV, "kilocard:s3cret")
    with pytest.raises(slo.SloError, match="refusing to send the Prometheus credentials in cleartext"):
        slo.session("http://prometheus.example:9090")
    assert slo.session("http://127.0.0.1:9090").auth == ("kilocard", "s3cret")
    monkeypatch.setenv(slo.TOKEN_ENV, "t")
    with pytest.raises(slo.SloError, match="bearer token and basic auth both given"):
        slo.session("https://prometheus.example:9090")


def test_a_tenant_header_rides_with_every_call_and_a_malformed_one_is_said(monkeypatch):
    monkeypatch.setenv(slo.HEADERS_ENV, "X-Scope-OrgID: team-a\nTHANOS-TENANT: team-a")
    found = slo.session("https://prometheus.example:9090").headers
    assert (found["X-Scope-OrgID"], found["THANOS-TENANT"]) == ("team-a", "team-a")
    monkeypatch.setenv(slo.HEADERS_ENV, "X-Scope-OrgID team-a")
    with pytest.raises(slo.SloError, match="expected a header as 'Name: value'"):
        slo.session("https://prometheus.example:9090")


@pytest.mark.parametrize(("flags", "said"), [
    (["--prometheus-basic-auth-file", "{nocolon}"], "--prometheus-basic-auth-file: {nocolon}: expected one line "
                                                     "'user:password'"),
    (["--prometheus-basic-auth-file", "{missing}"], "--prometheus-basic-auth-file: cannot read {missing}"),
    (["--prometheus-cert", "{nocolon}"], "--prometheus-cert and --prometheus-key: give both"),
    (["--prometheus-cert", "{missing}", "--prometheus-key", "{nocolon}"], "--prometheus-cert: no such file {missing}"),
    (["--prometheus-header", "X-Scope-OrgID team-a"], "--prometheus-header: expected a header as 'Name: value'"),
])
def test_prometheus_access_flags_that_cannot_work_are_input_errors_before_anything_runs(tmp_path, capsys, flags,
                                                                                         said):
    from chaos import cli

    files = {"nocolon": tmp_path / "nocolon", "missing": tmp_path / "missing"}
    files["nocolon"].write_text("kilocard\n")
    experiment = Path(__file__).parents[2] / "experiments" / "s1-kill-one-replica.yaml"
    argv = ["run", str(experiment), "--kubeconfig", str(tmp_path / "none"), *(f.format(**files) for f in flags)]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.startswith(f"kilocard: {said.format(**files)}")


def test_the_label_flags_become_the_runs_configuration_and_a_name_prometheus_cannot_have_is_input(tmp_path, capsys):
    from chaos import cli
    from chaos.settings import Settings

    experiment = Path(__file__).parents[2] / "experiments" / "s1-kill-one-replica.yaml"
    args = cli.build_parser().parse_args(["run", str(experiment), "--prometheus-pod-label", "kubernetes_pod_name",
                                          "--prometheus-namespace-label", "kubernetes_namespace"])
    given = dict(v.split("=", 1) for v in cli._kilocard_vars(args))
    settings = Settings.of(given)
    assert (settings.prometheus_pod_label, settings.prometheus_namespace_label) == ("kubernetes_pod_name",
                                                                                    "kubernetes_namespace")
    assert settings.prometheus().labels.pod == "kubernetes_pod_name"
    argv = ["run", str(experiment), "--kubeconfig", str(tmp_path / "none"), "--prometheus-pod-label", "pod-name"]
    assert cli.main(argv) == 2
    assert "configuration.kilocard_prometheus_pod_label: expected a Prometheus label name" in capsys.readouterr().err
