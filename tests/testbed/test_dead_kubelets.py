"""A lost node's kubelet is dead, as on a real cluster: nothing confirms its pods' termination.
A Deployment replica is replaced (ReplicaSets ignore terminating pods); a StatefulSet rank waits,
and its cross-node TP group stays incomplete, until PodGC removes the stuck pod because the node
is tainted out-of-service (non-graceful node shutdown)."""

from __future__ import annotations

import time
import uuid

import pytest

from chaos import ledger, plan, revert
from chaos.agent.client import AgentClient
from chaos.faults import Context
from chaos.kube import pod_ready
from chaos.vocabulary import OUT_OF_SERVICE_ANNOTATION, OUT_OF_SERVICE_TAINT
from probes import remediation, snapshot, tp_groups
from testbed import fleet, stages
from tests.testbed.helpers import wait_ready

pytestmark = pytest.mark.testbed
BIG, SMALL = "llama-3-405b", "llama-2-7b-fragile"


@pytest.mark.long(110)
def test_a_lost_nodes_statefulset_rank_waits_until_the_node_is_out_of_service(kube, pool, testbed, tmp_path):
    p = pool(7)  # two TP=16 groups on four nodes, the 7B replica on a fifth, two free
    fleet.deploy(kube, p.fleet(BIG, SMALL, replicas={SMALL: 1}), timeout=60, say=lambda _m: None)
    ranks = wait_ready(kube, p.namespace, BIG, 4)
    (small,) = wait_ready(kube, p.namespace, SMALL, 1)
    rank = next(x for x in ranks if x.metadata.name.endswith("-1"))
    lost = [rank.spec.node_name, small.spec.node_name]
    for node in lost:
        kube.patch_node(node, {"metadata": {"labels": {stages.LOST_LABEL: "true"}}})
    c = testbed.config
    evicted_within = c.tuning.node_monitor_grace_seconds + c.tuning.node_lease_seconds / 4 + c.unreachable_toleration_seconds + 20

    def rank_terminating(items):
        return any(x.metadata.uid == rank.metadata.uid and x.metadata.deletion_timestamp for x in items)

    kube.wait_until("pods", rank_terminating, timeout=evicted_within, namespace=p.namespace,
                    label_selector=f"kilocard.io/model={BIG}")
    # The Deployment replica is replaced on a live node.
    replaced = kube.wait_until("pods", lambda items: any(pod_ready(x) and x.metadata.uid != small.metadata.uid
                                                         for x in items), timeout=30, namespace=p.namespace,
                               label_selector=f"kilocard.io/model={SMALL}")
    assert {x.spec.node_name for x in replaced if pod_ready(x)} - set(lost)
    # The rank waits: for a whole minute its pod stays Terminating and the group incomplete.
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        kube.wait_until("pods", lambda items: not rank_terminating(items), timeout=60, namespace=p.namespace,
                        label_selector=f"kilocard.io/model={BIG}")
    assert time.monotonic() - started >= 59
    group = tp_groups.check(snapshot.fetch(kube, namespace=p.namespace), BIG, p.namespace)
    assert not group.ok, group.reason
    # The remediation probe's negative twin: without the out-of-service step it is red.
    unremediated = remediation.within(kube, rank.spec.node_name, (BIG,), budget=3, namespace=p.namespace,
                                      path="out-of-service", fault_at=time.time())
    assert not unremediated.ok and "not out of service" in unremediated.reason, unremediated.reason
    # The remediation, non-graceful node shutdown: the out-of-service fault lets PodGC remove the
    # stuck pod, the StatefulSet creates the rank again on a live node, and the probe turns green.
    ctx = Context(kube, AgentClient(kube), f"oos-{uuid.uuid4().hex[:6]}", say=lambda _m: None)
    book = ledger.Ledger(ctx.run_id, kube, tmp_path / "ledger")
    step = plan.inject(ctx, book, {"kind": "node-out-of-service", "nodes": [rank.spec.node_name],
                                          "ttl_seconds": 300})
    try:
        verdict = remediation.within(kube, rank.spec.node_name, (BIG,), budget=90, namespace=p.namespace,
                                     path="out-of-service", fault_at=step.records[0].applied_at)
    finally:
        assert revert.revert(ctx, book, step.records) == []
    assert verdict.ok, verdict.reason
    (new_rank,) = [x for x in kube.list_pods(p.namespace, f"kilocard.io/model={BIG}").items
                   if x.metadata.name == rank.metadata.name]
    assert new_rank.metadata.uid != rank.metadata.uid and new_rank.spec.node_name not in lost
    assert tp_groups.check(snapshot.fetch(kube, namespace=p.namespace), BIG, p.namespace).ok
    node = kube.read_node(rank.spec.node_name)
    assert OUT_OF_SERVICE_TAINT not in {t.key for t in node.spec.taints or []}
    assert OUT_OF_SERVICE_ANNOTATION not in (node.metadata.annotations or {})
