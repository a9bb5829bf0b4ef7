"""The SLO probes against a Prometheus reached the production way: a second real Prometheus (the
testbed's binary, scraping the same fleet) behind its own web configuration, which serves only
HTTPS, asks every client for a certificate its CA signed (mutual TLS) and for basic auth. Green
and red (the twin: a threshold under the healthy P95) with every credential given; each
credential left out is refused by the server and raised as the probe's error, never judged."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator

import bcrypt
import pytest
import requests
import yaml

from probes import chaostoolkit, slo
from probes.errors import ProbeError
from probes.metric_names import MetricNotFound
from testbed import pki, prometheus
from tests.testbed.helpers import deploy, eventually

pytestmark = pytest.mark.testbed
MODEL = "llama-3-70b"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def guarded(testbed, tmp_path_factory) -> Iterator[tuple[str, pki.Pki]]:
    """(https URL, the PKI) of a Prometheus that wants a client certificate and basic auth."""
    here = tmp_path_factory.mktemp("guarded")
    authority = pki.ensure(here / "pki", "127.0.0.1")
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt()).decode()
    web = here / "web.yaml"
    web.write_text(yaml.safe_dump({
        "tls_server_config": {"cert_file": str(authority.apiserver_cert), "key_file": str(authority.apiserver_key),
                              "client_auth_type": "RequireAndVerifyClientCert",
                              "client_ca_file": str(authority.ca_cert)},
        "basic_auth_users": {"kilocard": hashed}}))
    port = free_port()
    log = (here / "prometheus.log").open("w")
    proc = subprocess.Popen([prometheus.binary(), f"--config.file={testbed.paths.prometheus_config}",
                             f"--storage.tsdb.path={here / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                             f"--web.config.file={web}", "--log.level=warn"], stdout=log, stderr=log)
    url = f"https://127.0.0.1:{port}"
    try:
        assert eventually(lambda: _answers(url, authority), 60), (here / "prometheus.log").read_text()
        yield url, authority
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        shutil.rmtree(here / "data", ignore_errors=True)


def _answers(url: str, authority: pki.Pki) -> bool:
    try:
        return requests.get(f"{url}/-/ready", verify=str(authority.ca_cert), auth=("kilocard", "s3cret"),
                            cert=(str(authority.admin_cert), str(authority.admin_key)), timeout=5).ok
    except requests.RequestException:
        return False


@pytest.fixture
def access(monkeypatch, guarded):
    """Every credential in the environment, where the CLI's flags put them."""
    _, authority = guarded
    monkeypatch.setenv(slo.CA_ENV, str(authority.ca_cert))
    monkeypatch.setenv(slo.CERT_ENV, str(authority.admin_cert))
    monkeypatch.setenv(slo.KEY_ENV, str(authority.admin_key))
    monkeypatch.setenv(slo.BASIC_ENV, "kilocard:s3cret")
    monkeypatch.setenv(slo.HEADERS_ENV, "X-Scope-OrgID: team-a")  # a tenant: Prometheus itself ignores it
    return monkeypatch


@pytest.mark.long(60)
def test_slo_probes_judge_through_mutual_tls_and_basic_auth_and_each_missing_credential_is_an_error(
        kube, testbed, pool, guarded, access):
    url, _ = guarded
    p = pool(2)
    deploy(kube, p, {MODEL: 2})
    cfg = {"kilocard_kubeconfig": str(testbed.paths.kubeconfig), "kilocard_prometheus_url": url}

    def judged(threshold: float) -> dict:
        return chaostoolkit.slo_under(MODEL, "ttft_p95", threshold, "replica", p.namespace, "10s", configuration=cfg)

    def green() -> bool:
        try:
            return judged(0.5)["verdict"] == "ok"
        except MetricNotFound:  # the new server has not scraped the new replicas yet
            return False

    # Green once the guarded Prometheus has scraped both replicas long enough for a rate.
    assert eventually(green, 90), judged(0.5)
    red = judged(0.1)  # the twin: under the healthy P95 (about 0.23 s), the worst replica is named
    assert red["verdict"] == "failed" and red["worst"].startswith(f"{MODEL}-"), red
    # Refused by the server: the probe raises (the run's "error"), it never judges from no data.
    for left_out, said in (((slo.BASIC_ENV,), "401"), ((slo.CERT_ENV, slo.KEY_ENV), "certificate|SSL|handshake")):
        with pytest.MonkeyPatch.context() as without:
            for name in left_out:
                without.delenv(name)
            with pytest.raises(ProbeError, match=said):
                judged(0.5)
