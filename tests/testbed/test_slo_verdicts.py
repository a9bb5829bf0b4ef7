"""The SLO probe on the real control plane and the real Prometheus: a probe started right after a
fault never passes before the fault could show, a fault that never hurts is "no impact observed",
not a pass, and the probe finds whichever engine serves the model. The ECC story itself (breach,
remediation, recovery; and without remediation, failure naming the replica) is S3 of the catalog,
through the runner (tests/testbed/test_catalog.py)."""

from __future__ import annotations

import time
import uuid

import pytest

from chaos import ledger, plan, revert
from chaos.agent.client import AgentClient
from chaos.faults import Context
from probes import slo
from testbed import fleet

pytestmark = pytest.mark.testbed
SMALL = "llama-2-7b-fragile"
WINDOW = "5s"


def test_a_probe_started_at_the_fault_never_passes_blind_and_no_impact_is_not_a_pass(kube, pool, prom, tmp_path):
    p = pool(1)
    fleet.deploy(kube, p.fleet(SMALL, replicas={SMALL: 2}), timeout=60, say=lambda _m: None, prometheus=p.prometheus)
    ctx = Context(kube, AgentClient(kube), f"blind-{uuid.uuid4().hex[:6]}", say=lambda _m: None)
    book = ledger.Ledger(ctx.run_id, kube, tmp_path / "ledger")
    # Single-bit ECC errors on a card no replica uses: a fault that lands and hurts nobody (not even
    # through the remediator, which acts on double-bit errors only).
    fault = plan.inject(ctx, book, {"kind": "gpu-ecc", "nodes": [p.node_names[0]], "card": 7,
                                    "params": {"type": "sbe"}, "ttl_seconds": 120})
    (record,) = fault.records
    ind = slo.indicator(prom, "ttft_p95", SMALL, p.namespace, WINDOW)
    blind = slo.seconds(WINDOW) + 1.0
    try:
        steady = slo.recovered_within(prom, ind, record.applied_at, slo.Recovery(0.5, 30, 5, blind, False))
        decided_at = time.time()
        expected = slo.recovered_within(prom, ind, record.applied_at, slo.Recovery(0.5, 20, 5, blind, True))
    finally:
        assert revert.revert(ctx, book, fault.records) == []
    assert steady.ok and steady.details["outcome"] == "held", steady.reason
    assert steady.details["recovered_after_seconds"] >= blind and decided_at >= record.applied_at + blind + 5
    assert not expected.ok and expected.details["outcome"] == "no_impact", expected.reason
    assert expected.reason.startswith("no impact observed: under 0.5 from 0 to 20 s after the fault")


def test_the_probe_finds_whichever_engine_serves_the_model(kube, pool, prom):
    p = pool(1)
    objects = p.fleet(SMALL, replicas={SMALL: 2})
    for o in objects:
        if o["kind"] == "Deployment":
            o["spec"]["template"]["metadata"]["labels"]["kilocard.io/engine"] = "sglang"
    fleet.deploy(kube, objects, timeout=60, say=lambda _m: None, prometheus=p.prometheus)
    ind = slo.indicator(prom, "ttft_p95", SMALL, p.namespace, WINDOW)
    assert "rate(sglang:time_to_first_token_seconds_bucket{" in ind.query
    assert "sglang:inter_token_latency_seconds_bucket" in slo.indicator(prom, "itl_p95", SMALL, p.namespace).query
    verdict = slo.under(prom, ind, 0.5)
    assert verdict.ok and len(verdict.details["values"]) == 2, verdict.reason
