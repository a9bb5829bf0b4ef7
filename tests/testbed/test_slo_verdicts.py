"""The field account's ECC story judged by the user-facing SLO probe, on the real control plane and
the real Prometheus: the sick replica's breach is in the verdict's series, then the recovery after
remediation; with remediation off the same probe fails naming the replica; a probe started right
after a fault never passes before the fault could show, and a fault that never hurts is "no impact
observed", not a pass."""

from __future__ import annotations

import time
import uuid

import pytest

from chaos import ledger, plan, revert
from chaos.agent.client import AgentClient
from chaos.faults import Context
from probes import recovery, slo
from testbed import fleet
from tests.testbed.helpers import eventually, wait_ready

pytestmark = pytest.mark.testbed
BIG, SMALL = "llama-3-70b", "llama-2-7b-fragile"
OPT_OUT = "k8saas.nvidia.com/ManagedByNVSentinel"
WINDOW = "5s"


def experiment(testbed, run_id, ledger_dir, node, model, namespace, **probe):
    """ECC on one card of `node`, then the SLO probe, through chaostoolkit-lib: the probe reads the
    fault's apply time from the run's ledger."""
    return {
        "title": "one sick card", "description": "the field account's ECC story",
        "configuration": {"kilocard_run_id": run_id, "kilocard_kubeconfig": str(testbed.paths.kubeconfig),
                          "kilocard_ledger_dir": str(ledger_dir), "kilocard_prometheus_url": testbed.prometheus_url},
        "method": [
            {"type": "action", "name": "ecc", "provider": {
                "type": "python", "module": "chaos.actions", "func": "inject_ecc",
                "arguments": {"nodes": [node], "cards": [3], "ttl_seconds": 300}}},
            {"type": "probe", "name": "slo", "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"},
             "provider": {"type": "python", "module": "probes.chaostoolkit", "func": "slo_recovered_within",
                          "arguments": {"model": model, "namespace": namespace, "window": WINDOW, **probe}}},
        ],
        "rollbacks": [{"type": "action", "name": "revert", "provider": {
            "type": "python", "module": "chaos.actions", "func": "revert_faults"}}],
    }


def run(testbed, tmp_path, node, model, namespace, **probe):
    from chaoslib.experiment import run_experiment

    run_id = f"slo-{uuid.uuid4().hex[:6]}"
    journal = run_experiment(experiment(testbed, run_id, tmp_path / "ledger", node, model, namespace, **probe),
                             settings={"runtime": {"rollbacks": {"strategy": "always"}}})
    applied = journal["run"][0]
    assert applied["status"] == "succeeded", applied
    assert journal["rollbacks"][0]["status"] == "succeeded", journal["rollbacks"]
    (record,) = [r for r in ledger.read_disk(tmp_path / "ledger" / f"{run_id}.jsonl")]
    assert record.state == "reverted"
    return journal["run"][1]["output"], record.applied_at


def serving(prom, model, namespace, replicas):
    """Wait until Prometheus has every replica's P95 (new replicas need a few scrapes for a rate)."""
    def every_replica():
        try:
            return len(slo.values(prom, slo.indicator(prom, "ttft_p95", model, namespace, WINDOW))) == replicas
        except slo.metric_names.MetricNotFound:
            return False

    assert eventually(every_replica, 20)


def test_ecc_story_breach_then_recovery_after_remediation(testbed, kube, pool, prom, tmp_path):
    p = pool(3)
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 2}), timeout=60, say=lambda _m: None)
    victim, healthy = wait_ready(kube, p.namespace, BIG, 2)
    serving(prom, BIG, p.namespace, 2)
    with recovery.Recorder(kube, p.namespace, f"kilocard.io/model={BIG}") as recorder:
        verdict, fault_at = run(testbed, tmp_path, victim.spec.node_name, BIG, p.namespace, deadline=90, hold=10)
    assert verdict["verdict"] == "ok", verdict["reason"]
    assert verdict["outcome"] == "recovered" and verdict["fault_at"] == fault_at
    sick, well = victim.metadata.name, healthy.metadata.name
    assert verdict["worst"] == sick and verdict["peak"] > 0.5
    series = verdict["series"]
    assert all(fault_at <= s["at"] for s in series) and [s["at"] for s in series] == sorted(s["at"] for s in series)
    breached = [s for s in series if s["values"].get(sick, 0) > 0.5]
    assert breached and all(s["values"].get(well, 0) < 0.5 for s in series)  # one sick replica, named
    blind = slo.seconds(WINDOW) + 1.0  # the testbed scrapes every second
    assert verdict["blind_until"] == blind
    assert blind <= verdict["recovered_after"] and verdict["breach_after"] < verdict["recovered_after"]
    # The recovery is the remediator's: the victim was evicted and replaced before the SLO came back.
    whole = recovery.with_slo(recorder.events, fault_at, budget=90, expected=1, slo_verdict=slo.Verdict(
        True, verdict["reason"], {"recovered_after": verdict["recovered_after"]}))
    assert whole.ok, whole.reason
    (replaced,) = whole.details["replicas"]
    assert replaced["pod"] == sick and replaced["ready"] <= verdict["recovered_after"] + 1
    # Negative twin on the same measurements: a budget shorter than the measured recovery fails.
    samples = [slo.Sample(s["at"], s["values"]) for s in series]
    short = slo.Recovery(0.5, deadline=verdict["recovered_after"] + 10 - 2, hold=10, blind=blind)
    too_short = slo.judge(samples, fault_at, short, final=True)
    assert not too_short.ok and too_short.details["outcome"] == "not_recovered"
    assert f"worst {sick}" in too_short.reason


def test_without_remediation_the_probe_fails_and_names_the_replica(testbed, kube, pool, prom, tmp_path):
    p = pool(3)
    for n in p.node_names:  # NVSentinel's opt-out label: the remediator leaves these nodes alone
        kube.patch_node(n, {"metadata": {"labels": {OPT_OUT: "false"}}})
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 2}), timeout=60, say=lambda _m: None)
    victim, _ = wait_ready(kube, p.namespace, BIG, 2)
    serving(prom, BIG, p.namespace, 2)
    verdict, _ = run(testbed, tmp_path, victim.spec.node_name, BIG, p.namespace, deadline=40, hold=10)
    assert verdict["verdict"] == "failed" and verdict["outcome"] == "not_recovered", verdict["reason"]
    assert verdict["reason"].startswith("not recovered within 40 s (never back under 0.5)")
    assert f"{victim.metadata.name} last at" in verdict["reason"] and verdict["worst"] == victim.metadata.name


def test_a_probe_started_at_the_fault_never_passes_blind_and_no_impact_is_not_a_pass(kube, pool, prom, tmp_path):
    p = pool(1)
    fleet.deploy(kube, p.fleet(SMALL, replicas={SMALL: 2}), timeout=60, say=lambda _m: None)
    wait_ready(kube, p.namespace, SMALL, 2)
    serving(prom, SMALL, p.namespace, 2)
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
    assert steady.details["recovered_after"] >= blind and decided_at >= record.applied_at + blind + 5
    assert not expected.ok and expected.details["outcome"] == "no_impact", expected.reason
    assert expected.reason.startswith("no impact observed: under 0.5 for 20 s after the fault")


def test_the_probe_finds_whichever_engine_serves_the_model(kube, pool, prom):
    p = pool(1)
    objects = p.fleet(SMALL, replicas={SMALL: 2})
    for o in objects:
        if o["kind"] == "Deployment":
            o["spec"]["template"]["metadata"]["labels"]["kilocard.io/engine"] = "sglang"
    fleet.deploy(kube, objects, timeout=60, say=lambda _m: None)
    wait_ready(kube, p.namespace, SMALL, 2)
    serving(prom, SMALL, p.namespace, 2)
    ind = slo.indicator(prom, "ttft_p95", SMALL, p.namespace, WINDOW)
    assert "rate(sglang:time_to_first_token_seconds_bucket{" in ind.query
    assert "sglang:inter_token_latency_seconds_bucket" in slo.indicator(prom, "itl_p95", SMALL, p.namespace).query
    verdict = slo.under(prom, ind, 0.5)
    assert verdict.ok and len(verdict.details["values"]) == 2, verdict.reason
