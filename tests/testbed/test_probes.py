"""Each probe on the real testbed, and its negative twin: a system that is NOT resilient, where
the probe must fail for the right reason."""

from __future__ import annotations

import time
import uuid

import pytest

from chaos import ledger, plan
from chaos.agent.client import AgentClient
from chaos.faults import Context
from chaos.kube import pod_ready
from probes import capacity, metric_names, placement, recovery, remediation, slo, snapshot, tp_groups
from probes.errors import NoData
from testbed import fleet, stages
from tests.testbed.helpers import agent_call, eventually, wait_ready

pytestmark = pytest.mark.testbed
BIG, FRAGILE = "llama-3-70b", "llama-2-7b-fragile"


@pytest.fixture
def ctx_factory(kube):
    def make(tmp_path):
        ctx = Context(kube, AgentClient(kube), f"probe-{uuid.uuid4().hex[:6]}", say=lambda _m: None)
        return ctx, ledger.Ledger(ctx.run_id, kube, tmp_path)

    return make


def snap(kube, namespace):
    return snapshot.fetch(kube, namespace=namespace)


def test_placement_passes_hardened_models_and_fails_the_fragile_one_in_tight_space(kube, pool):
    p = pool(4)
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 3}), timeout=60, say=lambda _m: None)
    s = snap(kube, p.namespace)
    assert placement.anti_affinity(s, BIG, namespace=p.namespace).ok
    # Negative twin: the spare node is the only room left, and the fragile model piles onto it.
    fleet.deploy(kube, p.fleet(FRAGILE, replicas={FRAGILE: 4}), timeout=60, say=lambda _m: None)
    after = snap(kube, p.namespace)
    verdict = placement.anti_affinity(after, FRAGILE, namespace=p.namespace)
    assert not verdict.ok and "4 replicas share one kubernetes.io/hostname domain" in verdict.reason


def test_tp_groups_whole_and_a_split_group_caught(kube, pool):
    p = pool(6)
    fleet.deploy(kube, p.fleet("llama-3-405b"), timeout=60, say=lambda _m: None)
    assert tp_groups.check(snap(kube, p.namespace), "llama-3-405b").ok
    # Negative twin: a TP=8 group run as two 4-card pods on two machines (fits one node, spans two).
    # Two TP=16 groups of two 8-card pods fill four of the six nodes: two stay free.
    free = sorted(set(p.node_names) - {x.node for x in snap(kube, p.namespace).pods})
    assert len(free) == 2, free
    for rank, node in enumerate(free):
        kube.apply({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"split-{rank}", "namespace": p.namespace, "labels": {
                        "kilocard.io/model": "split-model", "kilocard.io/tp-group": "split",
                        "kilocard.io/tp-size": "8", "apps.kubernetes.io/pod-index": str(rank)}},
                    "spec": {"nodeName": node, "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                                                               "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}})
    kube.wait_until("pods", lambda items: sum(pod_ready(x) for x in items) == 2, timeout=30,
                    namespace=p.namespace, label_selector="kilocard.io/model=split-model")
    verdict = tp_groups.check(snap(kube, p.namespace), "split-model")
    assert not verdict.ok and f"{p.namespace}/split: TP=8 fits one node but spans" in verdict.reason


def test_room_to_reschedule_predicts_the_real_scheduler_and_names_fragmentation(kube, pool):
    p = pool(4)
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 2}), timeout=60, say=lambda _m: None)
    before = capacity.room(snap(kube, p.namespace), BIG, namespace=p.namespace)
    assert before.ok, before.reason
    # Negative twin: batch jobs take 4 cards on each spare node. 8 cards are free, none can take a
    # TP=8 replica, and the real scheduler agrees once a replica's node is lost.
    victim = next(x for x in snap(kube, p.namespace).replicas(BIG))
    spares = sorted(set(p.node_names) - {x.node for x in snap(kube, p.namespace).replicas(BIG)})
    for i, node in enumerate(spares):
        kube.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"batch-{i}", "namespace": p.namespace},
                    "spec": {"nodeName": node, "containers": [{"name": "job", "image": "busybox",
                                                               "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}})
    verdict = capacity.room(snap(kube, p.namespace), BIG, losing_nodes=(victim.node,), namespace=p.namespace)
    assert not verdict.ok and "8 cards free on 2 eligible nodes but at most 4 on any one: fragmentation" in verdict.reason
    kube.patch_node(victim.node, {"spec": {"unschedulable": True}})
    kube.delete_pod(p.namespace, victim.name, grace_seconds=0)

    def unschedulable(items):
        return any(c.type == "PodScheduled" and c.reason == "Unschedulable"
                   for x in items for c in (x.status.conditions or []))

    kube.wait_until("pods", unschedulable, timeout=30, namespace=p.namespace, label_selector=f"kilocard.io/model={BIG}")
    stuck = capacity.room(snap(kube, p.namespace), BIG, losing_nodes=(), namespace=p.namespace)
    assert not stuck.ok and stuck.reason.startswith(f"{BIG}: now, ") and "fragmentation" in stuck.reason
    # One batch job ends: the probe now finds room, and the scheduler places the replacement there.
    kube.delete_pod(p.namespace, "batch-0", grace_seconds=0)  # grace 0: gone when the call returns
    fixed = capacity.room(snap(kube, p.namespace), BIG, losing_nodes=(), namespace=p.namespace)
    assert fixed.ok, fixed.reason
    if fixed.details["moves"]:  # else the scheduler was quicker than our snapshot: bound already
        assert fixed.details["moves"] == {stuck.details["unplaced"]: spares[0]}
    replicas = wait_ready(kube, p.namespace, BIG, 2)
    assert spares[0] in {x.spec.node_name for x in replicas}


def test_capacity_covers_demand_until_the_fleet_is_too_small(kube, pool):
    p = pool(2)
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 2}), timeout=60, say=lambda _m: None)
    s = snap(kube, p.namespace)
    modest = capacity.Demand(qps=10, prompt_tokens=1024, output_tokens=256, latency_seconds=2.0)
    assert capacity.fits(s, BIG, modest, namespace=p.namespace).ok
    # Negative twin: the load of a busy hour on two replicas.
    heavy = capacity.Demand(qps=1000, prompt_tokens=1024, output_tokens=256, latency_seconds=2.0)
    verdict = capacity.fits(s, BIG, heavy, namespace=p.namespace)
    assert not verdict.ok and "exceeds" in verdict.reason
    # A load the whole fleet carries (390 GiB of 640) no longer fits once one of two nodes is lost.
    edge = capacity.Demand(qps=400, prompt_tokens=1024, output_tokens=256, latency_seconds=2.0)
    assert capacity.fits(s, BIG, edge, namespace=p.namespace).ok
    assert not capacity.fits(s, BIG, edge, namespace=p.namespace, losing_nodes=(s.replicas(BIG)[0].node,)).ok


def test_slo_healthy_then_every_replica_killed(kube, pool, prom):
    p = pool(1)
    fleet.deploy(kube, p.fleet(FRAGILE, replicas={FRAGILE: 2}), timeout=60, say=lambda _m: None)
    query = eventually(lambda: _p95(prom, p.namespace), 15)
    assert eventually(lambda: slo.under(prom, query, 0.5).ok, 15)
    assert slo.has_ready_replicas(snap(kube, p.namespace), FRAGILE, p.namespace).ok
    assert slo.under(prom, slo.indicator(prom, "error_ratio", FRAGILE, p.namespace, window="3s"), 0.01).ok
    # Negative twin: no room and every replica killed.
    kube.patch_node(p.node_names[0], {"spec": {"unschedulable": True}})
    for x in wait_ready(kube, p.namespace, FRAGILE, 2):
        kube.delete_pod(p.namespace, x.metadata.name, grace_seconds=0)
    verdict = slo.has_ready_replicas(snap(kube, p.namespace), FRAGILE, p.namespace)
    assert not verdict.ok and verdict.reason == f"model {FRAGILE} has zero Ready replicas: every request fails"
    short = query.replace("[1m]", "[3s]")
    gone = eventually(lambda: not slo.under(prom, short, 0.5).ok, 15)
    assert gone and slo.under(prom, short, 0.5).reason.startswith("no samples")
    # At the gateway every request now fails: the error ratio says so, model by model.
    errors = slo.indicator(prom, "error_ratio", FRAGILE, p.namespace, window="3s")
    assert eventually(lambda: (slo.value(prom, errors.query) or 0) > 0.99, 15), slo.value(prom, errors.query)
    ratio = slo.under(prom, errors, 0.01)
    assert not ratio.ok and ratio.reason.endswith("above 0.01") and ratio.details["value"] > 0.99


def test_bad_slo_inputs_fail_rather_than_pass(prom):
    with pytest.raises(metric_names.MetricNotFound):
        slo.p95_ttft(prom, "no-such-model")
    with pytest.raises(slo.SloError, match="failed"):
        slo.value(prom, "sum(rate(")
    with pytest.raises(NoData, match="failed"):  # nobody answers: no data, which the probes say as "unknown"
        slo.value(slo.connect("http://127.0.0.1:9"), "up")


def _p95(prom, namespace):
    try:
        return slo.p95_ttft(prom, FRAGILE, namespace)
    except metric_names.MetricNotFound:
        return None


def test_recovery_timeline_from_watch_events(ctx_factory, kube, pool, tmp_path):
    p = pool(3)
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 2}), timeout=60, say=lambda _m: None)
    with recovery.Recorder(kube, p.namespace, [BIG]) as recorder:
        fault_at = time.time()
        ctx, book = ctx_factory(tmp_path)
        plan.inject(ctx, book, {"kind": "pod-kill", "namespace": p.namespace,
                                  "label_selector": f"kilocard.io/model={BIG}", "count": 1})
        wait_ready(kube, p.namespace, BIG, 2)
        kube.wait_until("pods", lambda items: sum(pod_ready(x) for x in items) == 2, timeout=30, namespace=p.namespace)
    verdict = recovery.within(recorder.events, fault_at, budget=10, expected=1)
    assert verdict.ok, verdict
    (replica,) = verdict.details["replicas"]
    assert 0 <= replica["deleted"] <= replica["created"] <= replica["scheduled"] <= replica["ready"] < 10
    assert replica["node"] in p.node_names
    # The API's own timestamps (whole seconds) agree with the arrival times.
    for e in recorder.events:
        if e.api_at is not None:
            assert -1.5 <= e.at - e.api_at <= 2.0, e


def test_recovery_budget_shorter_than_a_node_loss(ctx_factory, kube, pool, testbed):
    p = pool(3)
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 1}), timeout=60, say=lambda _m: None)
    (victim,) = wait_ready(kube, p.namespace, BIG, 1)
    with recovery.Recorder(kube, p.namespace, [BIG]) as recorder:
        fault_at = time.time()
        kube.patch_node(victim.spec.node_name, {"metadata": {"labels": {stages.NOT_READY_LABEL: "true"}}})
        try:
            kube.wait_until("pods", lambda items: any(pod_ready(x) and x.metadata.uid != victim.metadata.uid
                                                      for x in items), timeout=60, namespace=p.namespace)
        finally:
            kube.patch_node(victim.spec.node_name, {"metadata": {"labels": {stages.NOT_READY_LABEL: None}}})
    tolerate = testbed.config.not_ready_toleration_seconds
    assert recovery.within(recorder.events, fault_at, budget=tolerate + 15, expected=1).ok
    short = recovery.within(recorder.events, fault_at, budget=5, expected=1)
    assert not short.ok and "over the 5 s budget" in short.reason  # eviction waits out the toleration


def test_remediation_happens_within_budget_and_not_when_switched_off(kube, pool):
    p = pool(3)
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 2}), timeout=60, say=lambda _m: None)
    victim, _ = wait_ready(kube, p.namespace, BIG, 2)
    injected = time.time()
    status, fault = agent_call(kube, victim.spec.node_name, "POST", "/v1/faults",
                               {"kind": "ecc", "target": {"card": 2}, "ttl_seconds": 300})
    try:
        verdict = remediation.within(kube, victim.spec.node_name, (BIG,), budget=45, namespace=p.namespace,
                                     fault_at=injected)
        assert verdict.ok, verdict.reason
    finally:
        agent_call(kube, victim.spec.node_name, "DELETE", f"/v1/faults/{fault['id']}")

    # Negative twin: the remediator is switched off for this pool (opt-out label).
    q = pool(3)
    for n in q.node_names:
        kube.patch_node(n, {"metadata": {"labels": {"k8saas.nvidia.com/ManagedByNVSentinel": "false"}}})
    fleet.deploy(kube, q.fleet(BIG, replicas={BIG: 2}), timeout=60, say=lambda _m: None)
    victim, _ = wait_ready(kube, q.namespace, BIG, 2)
    injected = time.time()
    status, fault = agent_call(kube, victim.spec.node_name, "POST", "/v1/faults",
                               {"kind": "ecc", "target": {"card": 2}, "ttl_seconds": 300})
    try:
        verdict = remediation.within(kube, victim.spec.node_name, (BIG,), budget=15, namespace=q.namespace,
                                     fault_at=injected)
        assert not verdict.ok and "is not quarantined" in verdict.reason, verdict.reason
    finally:
        agent_call(kube, victim.spec.node_name, "DELETE", f"/v1/faults/{fault['id']}")


def test_probes_as_chaostoolkit_steady_state(kube, pool, testbed):
    from chaoslib.experiment import run_experiment

    p = pool(4)
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 3}), timeout=60, say=lambda _m: None)

    def experiment(model):
        return {
            "title": f"{model} placement", "description": "kilocard probes as a steady-state hypothesis",
            "configuration": {"kilocard_kubeconfig": str(testbed.paths.kubeconfig)},
            "steady-state-hypothesis": {"title": "replicas spread", "probes": [{
                "type": "probe", "name": "placement", "tolerance": {"type": "regex", "target": "verdict",
                                                                    "pattern": "^ok$"},
                "provider": {"type": "python", "module": "probes.chaostoolkit", "func": "placement_holds",
                             "arguments": {"model": model, "namespace": p.namespace}}}]},
            "method": [],
        }

    good = run_experiment(experiment(BIG))
    assert good["steady_states"]["before"]["steady_state_met"] is True
    fleet.deploy(kube, p.fleet(FRAGILE, replicas={FRAGILE: 4}), timeout=60, say=lambda _m: None)
    bad = run_experiment(experiment(FRAGILE))
    assert bad["steady_states"]["before"]["steady_state_met"] is False
    assert bad["steady_states"]["before"]["probes"][0]["output"]["verdict"] == "failed"


def test_recovery_times_agree_with_the_audit_log_within_a_quarter_of_a_second(ctx_factory, kube, pool, testbed,
                                                                            tmp_path):
    from testbed import audit

    p = pool(3)
    fleet.deploy(kube, p.fleet(FRAGILE, replicas={FRAGILE: 4}), timeout=60, say=lambda _m: None)
    with recovery.Recorder(kube, p.namespace, [FRAGILE]) as recorder:
        fault_at = time.time()
        ctx, book = ctx_factory(tmp_path)
        plan.inject(ctx, book, {"kind": "pod-kill", "namespace": p.namespace,
                                  "label_selector": f"kilocard.io/model={FRAGILE}", "count": 3, "grace_seconds": 0})
        kube.wait_until("pods", lambda items: sum(pod_ready(x) for x in items) == 4 and len(items) == 4, timeout=30,
                        namespace=p.namespace)
        time.sleep(0.5)  # let the last watch events arrive
    writes = audit.pod_writes(testbed.paths.audit_log, p.namespace)
    truth = {"deleted": ("delete", ""), "scheduled": ("create", "binding"), "ready": ("patch", "status")}
    compared = 0
    for event in recorder.events:
        if event.phase not in truth:
            continue  # a create by generateName has no name in the audit log
        verb, sub = truth[event.phase]
        write = audit.first(writes, verb, event.pod, sub, after=fault_at - 1)
        assert write is not None, event
        # The mean error is 0.028 s (docs/performance.md); three testbeds on two cores delay a watch event more.
        assert abs(event.at - write.at) <= 0.25, (event, write)
        compared += 1
    assert compared >= 3 * 3  # three victims deleted; three replacements scheduled and Ready
    assert recovery.within(recorder.events, fault_at, budget=10, expected=3).ok
