"""A probe whose source does not answer says so: a failed verdict, outcome "unknown", never a
pass; a source that answers no (bad PromQL, a 403) is still an error of its own."""

from __future__ import annotations

import inspect
import urllib.error

import pytest
import requests
from prometheus_api_client import PrometheusApiClientException

from chaos.errors import KubeError
from probes import chaostoolkit, metric_names, slo
from probes.errors import NoData


@pytest.mark.parametrize("exc, kind", [
    (requests.ConnectionError("refused"), NoData),
    (requests.Timeout("slow"), NoData),
    (PrometheusApiClientException("HTTP Status Code 503 (b'unavailable')"), NoData),
    (PrometheusApiClientException("HTTP Status Code 400 (b'parse error')"), slo.SloError),
    (urllib.error.HTTPError("http://p/api/v1/status/config", 404, "not found", {}, None), slo.SloError),
    (urllib.error.HTTPError("http://p/api/v1/status/config", 502, "bad gateway", {}, None), NoData),
    (urllib.error.URLError("refused"), NoData),
    (requests.exceptions.MissingSchema("no scheme"), slo.SloError),
])
def test_unanswered_is_no_data_and_answered_no_is_an_error(exc, kind):
    error = metric_names.query_failed("PromQL up", exc, slo.SloError)
    assert type(error) is kind and str(error).startswith("PromQL up failed: ")


class Down:
    def custom_query(self, query: str) -> None:
        raise requests.ConnectionError(f"{query}: connection refused")


def test_an_slo_probe_with_prometheus_down_is_unknown_not_a_pass(monkeypatch):
    monkeypatch.setattr(chaostoolkit, "_prom", lambda _cfg: Down())
    out = chaostoolkit.slo_under("llama-3-70b")
    assert out["verdict"] == "failed" and out["ok"] is False and out["outcome"] == "unknown"
    assert out["reason"].startswith("no data: PromQL count(") and out["reason"].endswith("cannot judge, not healthy")


def test_an_apiserver_gone_is_unknown_and_a_refusal_is_raised(monkeypatch):
    def gone(*_a, **_k):
        raise KubeError("list pods: connection refused")

    def refused(*_a, **_k):
        raise KubeError("list pods: 403 forbidden", status=403)

    monkeypatch.setattr(chaostoolkit, "_snapshot", gone)
    assert chaostoolkit.placement_holds("m")["outcome"] == "unknown"
    monkeypatch.setattr(chaostoolkit, "_snapshot", refused)
    with pytest.raises(KubeError, match="403"):
        chaostoolkit.placement_holds("m")


def test_the_wrapped_probes_keep_their_signatures_for_chaos_toolkit():
    params = inspect.signature(chaostoolkit.slo_recovered_within).parameters
    assert list(params)[:3] == ["model", "budget", "indicator"] and "configuration" in params
