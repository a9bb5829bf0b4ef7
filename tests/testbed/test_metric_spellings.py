"""Both spellings of vLLM's metric names reach a real Prometheus, and the name resolver finds
each: plain text keeps `vllm:`, a negotiated OpenMetrics scrape stores `vllm_`."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_api_client import PrometheusConnect

from probes import metric_names
from testbed import fleet
from testbed.cluster import Testbed
from testbed.config import TestbedConfig
from tests.testbed.conftest import PORT_BASE
from tests.testbed.helpers import eventually

pytestmark = pytest.mark.testbed
TTFT = "vllm:time_to_first_token_seconds_bucket"


def test_plain_text_fleet_keeps_the_colon(testbed, kube, pool, prom):
    p = pool(1)
    fleet.deploy(kube, p.fleet("llama-2-7b-fragile", replicas={"llama-2-7b-fragile": 1}), timeout=60,
                 say=lambda _m: None)
    name = eventually(lambda: _resolve(prom, f'namespace="{p.namespace}"'), 15)
    assert name == TTFT


def test_openmetrics_fleet_lands_with_underscores_and_is_still_found(tmp_path: Path):
    tb = Testbed(TestbedConfig(nodes=1, port_base=PORT_BASE + 40, state_dir=tmp_path, openmetrics=True,
                               remediation=False).validate())
    tb.up(say=lambda _m: None, timeout=120)
    try:
        kube = tb.kube()
        objects = fleet.scaled(fleet.only(fleet.load("default", tb.config.card_resource), "llama-2-7b-fragile"),
                               {"llama-2-7b-fragile": 1})
        fleet.deploy(kube, objects, timeout=60, say=lambda _m: None)
        kube.close()
        prom = PrometheusConnect(tb.prometheus_url)
        name = eventually(lambda: _resolve(prom, ""), 15)
        assert name == "vllm_time_to_first_token_seconds_bucket"
        # The documented spelling finds nothing here: an empty answer, not "no traffic".
        assert prom.custom_query(f"count({{__name__=\"{TTFT}\"}})") == []
    finally:
        tb.down(say=lambda _m: None)


def test_missing_metric_is_an_error_naming_both_spellings(prom):
    with pytest.raises(metric_names.MetricNotFound, match="no series named vllm:nope_total or vllm_nope_total"):
        metric_names.resolve(prom, "vllm:nope_total")


def _resolve(prom, matchers):
    try:
        return metric_names.resolve(prom, TTFT, matchers)
    except metric_names.MetricNotFound:
        return None
