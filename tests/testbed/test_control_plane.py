"""Real Kubernetes behaviour on the testbed's control plane: controllers, scheduler, taint-based
eviction and PodDisruptionBudgets, each observed through the API."""

from __future__ import annotations

import time

import pytest

from chaos.errors import TooManyRequests
from chaos.kube import node_ready, pod_ready
from testbed import fleet, stages
from tests.testbed.helpers import per_node, ready_pods, wait_ready, workload

pytestmark = pytest.mark.testbed
BIG = "llama-3-70b"  # TP=8, required anti-affinity, PDB
FRAGILE = "llama-2-7b-fragile"  # TP=1, no anti-affinity


def test_deleted_pod_is_recreated_and_placed_honouring_anti_affinity(kube, pool):
    p = pool(4)
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 3}), timeout=60, say=lambda _m: None)
    before = wait_ready(kube, p.namespace, BIG, 3)
    assert max(per_node(before).values()) == 1
    victim = before[0]
    kube.delete_pod(p.namespace, victim.metadata.name, grace_seconds=0)

    def replaced(pods):
        ready = [x for x in pods if pod_ready(x)]
        return len(ready) == 3 and victim.metadata.uid not in {x.metadata.uid for x in ready}

    after = [x for x in kube.wait_until("pods", replaced, timeout=60, namespace=p.namespace,
                                        label_selector=f"kilocard.io/model={BIG}") if pod_ready(x)]
    new = [x for x in after if x.metadata.uid not in {b.metadata.uid for b in before}]
    assert len(new) == 1
    # The ReplicaSet made it (controller), the scheduler bound it (nodeName set by binding).
    assert new[0].metadata.owner_references[0].kind == "ReplicaSet"
    assert new[0].spec.node_name in p.node_names
    assert max(per_node(after).values()) == 1, per_node(after)


def test_required_anti_affinity_leaves_an_extra_replica_pending(kube, pool):
    p = pool(2)
    objects = p.fleet(BIG, replicas={BIG: 3})
    for o in objects:
        kube.apply(o)
    wait_ready(kube, p.namespace, BIG, 2)

    def unschedulable(pods):
        return any(
            c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
            for x in pods for c in (x.status.conditions or []))

    pods = kube.wait_until("pods", unschedulable, timeout=30, namespace=p.namespace)
    pending = [x for x in pods if not x.spec.node_name]
    assert len(pending) == 1
    assert max(per_node([x for x in pods if x.spec.node_name]).values()) == 1


def test_cordoned_node_gets_no_new_pods(kube, pool):
    p = pool(2)
    cordoned, open_node = p.node_names
    kube.patch_node(cordoned, {"spec": {"unschedulable": True}})
    fleet.deploy(kube, p.fleet(FRAGILE, replicas={FRAGILE: 6}), timeout=60, say=lambda _m: None)
    placed = per_node(ready_pods(kube, p.namespace, FRAGILE))
    assert placed == {open_node: 6}
    # Uncordoned, the node takes pods again: the cordon, not the node, kept them away.
    kube.patch_node(cordoned, {"spec": {"unschedulable": False}})
    kube.apply(workload(p.fleet(FRAGILE, replicas={FRAGILE: 12}), FRAGILE))
    placed = per_node(wait_ready(kube, p.namespace, FRAGILE, 12))
    assert placed[cordoned] >= 4 and placed[open_node] <= 8


def test_not_ready_node_is_tainted_and_its_pods_evicted_and_rescheduled(kube, pool, testbed):
    tolerate = testbed.config.not_ready_toleration_seconds
    p = pool(3)
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 2}), timeout=60, say=lambda _m: None)
    before = wait_ready(kube, p.namespace, BIG, 2)
    victim = before[0]
    node = victim.spec.node_name
    (free,) = set(p.node_names) - {x.spec.node_name for x in before}

    started = time.monotonic()
    kube.patch_node(node, {"metadata": {"labels": {stages.NOT_READY_LABEL: "true"}}})
    try:
        def tainted(items):
            n = items[0]
            return not node_ready(n) and any(
                t.key == "node.kubernetes.io/not-ready" and t.effect == "NoExecute" for t in (n.spec.taints or []))

        kube.wait_until("nodes", tainted, timeout=30, label_selector=f"kubernetes.io/hostname={node}")
        tainted_after = time.monotonic() - started

        def rescheduled(pods):
            ready = [x for x in pods if pod_ready(x)]
            return len(ready) == 2 and victim.metadata.uid not in {x.metadata.uid for x in pods}

        pods = kube.wait_until("pods", rescheduled, timeout=tolerate + 45, namespace=p.namespace,
                               label_selector=f"kilocard.io/model={BIG}")
        evicted_after = time.monotonic() - started
    finally:
        kube.patch_node(node, {"metadata": {"labels": {stages.NOT_READY_LABEL: None}}})

    assert tainted_after < 10
    # Evicted only once the default toleration (added to every pod by admission) ran out.
    tolerations = {t.key: t.toleration_seconds for t in victim.spec.tolerations}
    assert tolerations["node.kubernetes.io/not-ready"] == tolerate
    assert tolerate - 1 <= evicted_after <= tolerate + 15, evicted_after
    replacement = [x for x in pods if x.metadata.uid not in {b.metadata.uid for b in before}]
    assert [x.spec.node_name for x in replacement] == [free]
    # Label removed, kwok's node-initialize stage makes the node Ready again.
    kube.wait_until("nodes", lambda items: node_ready(items[0]), timeout=30,
                    label_selector=f"kubernetes.io/hostname={node}")


def test_eviction_blocked_by_pdb_returns_429(kube, pool):
    p = pool(2)
    # Three replicas, room for two (required anti-affinity): the PDB's maxUnavailable of 1 is
    # used up by the Pending one, so no voluntary disruption is allowed.
    for o in p.fleet(BIG, replicas={BIG: 3}):
        kube.apply(o)
    ready = wait_ready(kube, p.namespace, BIG, 2)
    kube.wait_until("poddisruptionbudgets",
                    lambda items: bool(items) and items[0].status.expected_pods == 3
                    and items[0].status.disruptions_allowed == 0,
                    timeout=30, namespace=p.namespace)
    with pytest.raises(TooManyRequests) as blocked:
        kube.evict_pod(p.namespace, ready[0].metadata.name)
    assert blocked.value.status == 429
    assert "disruption budget" in str(blocked.value)
    assert kube.read_pod(p.namespace, ready[0].metadata.name).metadata.deletion_timestamp is None

    # With the third replica gone the budget allows one disruption, and the same call succeeds.
    kube.apply(workload(p.fleet(BIG, replicas={BIG: 2}), BIG))
    kube.wait_until("poddisruptionbudgets",
                    lambda items: items[0].status.expected_pods == 2 and items[0].status.disruptions_allowed == 1,
                    timeout=30, namespace=p.namespace)
    kube.evict_pod(p.namespace, ready[0].metadata.name)
    kube.wait_until("pods", lambda pods: ready[0].metadata.uid not in {x.metadata.uid for x in pods},
                    timeout=30, namespace=p.namespace)


def test_fragile_fleet_colocates_replicas_when_space_is_tight(kube, pool):
    p = pool(4)
    # Fill three nodes with TP=8 replicas: one node keeps free cards.
    for o in p.fleet(BIG, replicas={BIG: 3}):
        kube.apply(o)
    placed = per_node(wait_ready(kube, p.namespace, BIG, 3))
    (spare,) = set(p.node_names) - set(placed)

    fleet.deploy(kube, p.fleet(FRAGILE, replicas={FRAGILE: 4}), timeout=60, say=lambda _m: None)
    # Every replica on one machine: one node loss takes the whole model down.
    assert per_node(ready_pods(kube, p.namespace, FRAGILE)) == {spare: 4}


def test_lost_node_is_tainted_unreachable_and_its_pods_replaced(kube, pool, testbed):
    """A lost node's kubelet is dead: its Lease lapses, the controller manager marks it Unknown
    after the grace period and taints it unreachable, and evicts its pods once their toleration
    runs out; nothing confirms the eviction, so the pod stays Terminating while the ReplicaSet
    replaces it elsewhere."""
    c = testbed.config
    p = pool(2)
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 1}), timeout=60, say=lambda _m: None)
    (victim,) = wait_ready(kube, p.namespace, BIG, 1)
    node = victim.spec.node_name
    started = time.monotonic()
    kube.patch_node(node, {"metadata": {"labels": {stages.LOST_LABEL: "true"}}})

    def unreachable(items):
        return any(t.key == "node.kubernetes.io/unreachable" and t.effect == "NoExecute"
                   for t in (items[0].spec.taints or []))

    lease_renewal = c.tuning.node_lease_seconds / 4
    kube.wait_until("nodes", unreachable, timeout=c.tuning.node_monitor_grace_seconds + lease_renewal + 20,
                    label_selector=f"kubernetes.io/hostname={node}")
    tainted_after = time.monotonic() - started
    pods = kube.wait_until(
        "pods", lambda items: any(pod_ready(x) and x.metadata.uid != victim.metadata.uid for x in items),
        timeout=c.unreachable_toleration_seconds + 30, namespace=p.namespace,
        label_selector=f"kilocard.io/model={BIG}")
    (replacement,) = [x for x in pods if pod_ready(x) and x.metadata.uid != victim.metadata.uid]
    replaced_after = time.monotonic() - started
    assert replacement.spec.node_name != node
    assert c.tuning.node_monitor_grace_seconds - 1 <= tainted_after <= c.tuning.node_monitor_grace_seconds + lease_renewal + 5
    assert 0 <= replaced_after - tainted_after - c.unreachable_toleration_seconds <= 10, (tainted_after, replaced_after)
    assert kube.read_pod(p.namespace, victim.metadata.name).metadata.deletion_timestamp is not None  # Terminating
