"""The SLO probes against PromQL servers reached and labelled the production way, each a real
binary from Debian's packages scraping the testbed's fleet, the engines scraped as a
ServiceMonitor scrapes an exporter (each series' replica in exported_pod and exported_namespace):

- Prometheus behind its own web configuration: HTTPS only, a client certificate its CA signed
  (mutual TLS) and basic auth;
- VictoriaMetrics, the second PromQL server: HTTPS and basic auth (its client-certificate check is
  in the enterprise edition only);
- Prometheus behind prom-label-proxy, the tenant gate of a multi-tenant Prometheus: every query
  gets its tenant's label matcher from the X-Scope-OrgID header, a query without one is refused.

Green and red (the twin: a threshold under the healthy P95, the worst replica named, never the
exporter) with every credential given; each credential left out is refused by the server and
raised as the probe's error, never judged."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import pytest
import requests
import yaml

from probes import chaostoolkit, slo
from probes.errors import ProbeError
from probes.metric_names import MetricNotFound
from testbed import build, pki, prometheus
from tests.testbed.helpers import deploy, eventually

pytestmark = pytest.mark.testbed
MODEL = "llama-3-70b"
USER, PASSWORD = "kilocard", "s3cret"


@dataclass(frozen=True)
class Guarded:
    url: str
    authority: pki.Pki
    mutual_tls: bool  # asks for a client certificate


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def production_shaped(config: dict) -> dict:
    """The testbed's scrape configuration as a ServiceMonitor writes it for an exporter that speaks
    for other pods: the target's own namespace and pod as labels, honor_labels off. The server keeps
    the exposition's (the replica's) as exported_namespace and exported_pod. Scraping only."""
    for job in config["scrape_configs"]:
        if job["job_name"] == "vllm":
            job["honor_labels"] = False
            for target in job["static_configs"]:
                target["labels"] = {"namespace": "monitoring", "pod": "engine-exporter-0"}
    scraping = {k: v for k, v in config["global"].items() if k != "evaluation_interval"}  # no rules here
    return {"global": scraping, "scrape_configs": config["scrape_configs"]}


def _prometheus(here: Path, config: Path, authority: pki.Pki, port: int) -> list[str]:
    web = here / "web.yaml"
    web.write_text(yaml.safe_dump({
        "tls_server_config": {"cert_file": str(authority.apiserver_cert), "key_file": str(authority.apiserver_key),
                              "client_auth_type": "RequireAndVerifyClientCert",
                              "client_ca_file": str(authority.ca_cert)},
        "basic_auth_users": {USER: bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt()).decode()}}))
    return [prometheus.binary(), f"--config.file={config}", f"--storage.tsdb.path={here / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", f"--web.config.file={web}", "--log.level=warn"]


def _victoria_metrics(here: Path, config: Path, authority: pki.Pki, port: int) -> list[str]:
    binary = shutil.which("victoria-metrics")
    assert binary, "victoria-metrics is not installed: ./bootstrap installs Debian's package"
    # Its default makes the last 30 s of samples invisible to queries; a probe wants them.
    return [binary, f"-promscrape.config={config}", f"-storageDataPath={here / 'data'}",
            f"-httpListenAddr=127.0.0.1:{port}", "-tls", f"-tlsCertFile={authority.apiserver_cert}",
            f"-tlsKeyFile={authority.apiserver_key}", f"-httpAuth.username={USER}", f"-httpAuth.password={PASSWORD}",
            "-search.latencyOffset=1s", "-search.disableCache", "-loggerLevel=WARN"]


SERVERS = {"prometheus": (_prometheus, True), "victoria-metrics": (_victoria_metrics, False)}


@pytest.fixture(scope="module", params=list(SERVERS))
def guarded(request, testbed, tmp_path_factory) -> Iterator[Guarded]:
    command, mutual = SERVERS[request.param]
    here = tmp_path_factory.mktemp(request.param)
    authority = pki.ensure(here / "pki", "127.0.0.1")
    config = here / "scrape.yaml"
    config.write_text(yaml.safe_dump(production_shaped(yaml.safe_load(testbed.paths.prometheus_config.read_text()))))
    port = free_port()
    found = Guarded(f"https://127.0.0.1:{port}", authority, mutual)
    log = (here / "server.log").open("w")
    proc = subprocess.Popen(command(here, config, authority, port), stdout=log, stderr=log)
    try:
        assert eventually(lambda: _answers(found), 60), (here / "server.log").read_text()
        yield found
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        shutil.rmtree(here / "data", ignore_errors=True)


def _answers(server: Guarded) -> bool:
    try:
        return requests.get(f"{server.url}/api/v1/query", params={"query": "1"}, verify=str(server.authority.ca_cert),
                            auth=(USER, PASSWORD), cert=(str(server.authority.admin_cert),
                                                         str(server.authority.admin_key)), timeout=5).ok
    except requests.RequestException:
        return False


@pytest.fixture
def access(monkeypatch, guarded):
    """Every credential in the environment, where the CLI's flags put them; verification on."""
    for name in (slo.INSECURE_ENV, slo.TOKEN_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(slo.CA_ENV, str(guarded.authority.ca_cert))
    monkeypatch.setenv(slo.CERT_ENV, str(guarded.authority.admin_cert))
    monkeypatch.setenv(slo.KEY_ENV, str(guarded.authority.admin_key))
    monkeypatch.setenv(slo.BASIC_ENV, f"{USER}:{PASSWORD}")
    monkeypatch.setenv(slo.HEADERS_ENV, "X-Scope-OrgID: team-a")  # a tenant: neither server enforces one
    return monkeypatch


def tenanted(config: dict, tenant: str) -> dict:
    """The testbed's scrape configuration with every engine series labelled with its tenant, as a
    multi-tenant Prometheus's relabelling writes it. Scraping only."""
    for job in config["scrape_configs"]:
        if job["job_name"] == "vllm":
            for target in job["static_configs"]:
                target["labels"] = {**(target.get("labels") or {}), "tenant": tenant}
    scraping = {k: v for k, v in config["global"].items() if k != "evaluation_interval"}
    return {"global": scraping, "scrape_configs": config["scrape_configs"]}


@pytest.fixture(scope="module")
def tenant_gate(testbed, tmp_path_factory) -> Iterator[str]:
    """A Prometheus holding team-a's series, reached only through prom-label-proxy (built from its
    Go module the first time it is needed): the URL of the gate."""
    here = tmp_path_factory.mktemp("tenants")
    config = here / "scrape.yaml"
    config.write_text(yaml.safe_dump(tenanted(yaml.safe_load(testbed.paths.prometheus_config.read_text()), "team-a")))
    upstream, gate = free_port(), free_port()
    proxy = build.ensure(build.PROM_LABEL_PROXY, say=lambda _m: None) / "prom-label-proxy"
    log = (here / "server.log").open("w")
    procs = [subprocess.Popen([prometheus.binary(), f"--config.file={config}", f"--storage.tsdb.path={here / 'data'}",
                               f"--web.listen-address=127.0.0.1:{upstream}", "--log.level=warn"],
                              stdout=log, stderr=log),
             subprocess.Popen([str(proxy), f"-insecure-listen-address=127.0.0.1:{gate}",
                               f"-upstream=http://127.0.0.1:{upstream}", "-label=tenant",
                               "-header-name=X-Scope-OrgID"], stdout=log, stderr=log)]
    url = f"http://127.0.0.1:{gate}"

    def answers() -> bool:
        try:
            return requests.get(f"{url}/api/v1/query", params={"query": "1"}, headers={"X-Scope-OrgID": "team-a"},
                                timeout=5).ok
        except requests.RequestException:
            return False
    try:
        assert eventually(answers, 60), (here / "server.log").read_text()
        yield url
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        log.close()
        shutil.rmtree(here / "data", ignore_errors=True)


@pytest.mark.long(60)
def test_the_tenant_header_reaches_a_multi_tenant_gate_another_tenant_sees_nothing_and_none_is_refused(
        kube, testbed, pool, tenant_gate, monkeypatch):
    for name in (slo.INSECURE_ENV, slo.TOKEN_ENV, slo.BASIC_ENV, slo.CA_ENV, slo.CERT_ENV, slo.KEY_ENV):
        monkeypatch.delenv(name, raising=False)
    p = pool(2)
    deploy(kube, p, {MODEL: 2})
    # The gate serves queries only, not Prometheus's configuration: the scrape interval is given.
    interval = slo.seconds(yaml.safe_load(testbed.paths.prometheus_config.read_text())["global"]["scrape_interval"])
    cfg = {"kilocard_kubeconfig": str(testbed.paths.kubeconfig), "kilocard_prometheus_url": tenant_gate,
           "kilocard_scrape_interval": interval}

    def judged(tenant: str | None, threshold: float) -> dict:
        if tenant is None:
            monkeypatch.delenv(slo.HEADERS_ENV, raising=False)
        else:
            monkeypatch.setenv(slo.HEADERS_ENV, f"X-Scope-OrgID: {tenant}")
        return chaostoolkit.slo_under(MODEL, "ttft_p95", threshold, "replica", p.namespace, "10s", configuration=cfg)

    def green() -> bool:
        try:
            return judged("team-a", 0.5)["verdict"] == "ok"
        except MetricNotFound:  # not scraped long enough for a rate yet
            return False

    assert eventually(green, 90), judged("team-a", 0.5)
    red = judged("team-a", 0.1)  # the twin: the worst replica named, read through the gate
    assert red["verdict"] == "failed" and red["worst"].startswith(f"{MODEL}-"), red
    # Another tenant's view holds none of these series: no data, never a healthy verdict.
    with pytest.raises(MetricNotFound):
        judged("team-b", 0.5)
    # No tenant at all: the gate refuses the query, and the probe raises it, never judges.
    with pytest.raises(ProbeError, match="400|tenant|X-Scope-OrgID"):
        judged(None, 0.5)


@pytest.mark.long(60)
def test_slo_probes_judge_through_tls_and_basic_auth_by_exported_labels_and_each_missing_credential_is_an_error(
        kube, testbed, pool, guarded, access):
    p = pool(2)
    deploy(kube, p, {MODEL: 2})
    cfg = {"kilocard_kubeconfig": str(testbed.paths.kubeconfig), "kilocard_prometheus_url": guarded.url}

    def judged(threshold: float) -> dict:
        return chaostoolkit.slo_under(MODEL, "ttft_p95", threshold, "replica", p.namespace, "10s", configuration=cfg)

    def green() -> bool:
        try:
            return judged(0.5)["verdict"] == "ok"
        except MetricNotFound:  # the new server has not scraped the new replicas yet
            return False

    # Green once the server has scraped both replicas long enough for a rate.
    assert eventually(green, 90), judged(0.5)
    red = judged(0.1)  # the twin: under the healthy P95 (about 0.23 s), the worst replica is named
    assert red["verdict"] == "failed" and red["worst"].startswith(f"{MODEL}-"), red
    assert set(red["values"]) == {pod["metadata"]["name"] for pod in kube.list_pods_raw(p.namespace)}, red  # each apart
    # Refused by the server: the probe raises (the run's "error"), it never judges from no data.
    refusals = [((slo.BASIC_ENV,), "401"), ((slo.CA_ENV,), "certificate verify failed")]
    if guarded.mutual_tls:
        refusals.append(((slo.CERT_ENV, slo.KEY_ENV), "certificate|SSL|handshake"))
    for left_out, said in refusals:
        with pytest.MonkeyPatch.context() as without:
            for name in left_out:
                without.delenv(name)
            with pytest.raises(ProbeError, match=said):
                judged(0.5)
