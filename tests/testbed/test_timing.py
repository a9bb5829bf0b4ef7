"""Replicas take time, as in production (compressed by the `default` profile): a 70B replica is
Ready after its image pull, weight loading and warm-up; a deleted one keeps its cards while it
drains, so a replacement that needs them waits; the recovery timeline shows every phase."""

from __future__ import annotations

import time

import pytest

from chaos.kube import pod_ready
from probes import recovery
from testbed import fleet, timing
from tests.testbed.helpers import wait_ready

pytestmark = pytest.mark.testbed
BIG = "llama-3-70b"


@pytest.mark.long(55)
def test_a_70b_replica_starts_in_its_computed_time_and_drains_before_its_cards_are_reused(kube, pool):
    p = pool(1)  # one 8-card node: the replacement needs the cards the deleted replica holds
    objects = timing.stamp(p.fleet(BIG, replicas={BIG: 1}), "default")
    template = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]
    start = timing.ready_after(template["metadata"]["labels"], "default")
    drain = timing.drain(template["metadata"]["labels"]) / timing.DEFAULT_FACTOR
    assert 20 < start < 30 and 5 < drain < 8  # 70B: about 4 min and 1 min in production

    with recovery.Recorder(kube, p.namespace, [BIG]) as recorder:
        fleet.deploy(kube, objects, timeout=60, say=lambda _m: None)
        (first,) = wait_ready(kube, p.namespace, BIG, 1)
        fault_at = time.time()
        kube.core.delete_namespaced_pod(first.metadata.name, p.namespace)
        # While it drains, the old pod is Terminating on the node and the replacement is Pending.
        time.sleep(drain / 2)
        pods = kube.list_pods(p.namespace, f"kilocard.io/model={BIG}").items
        assert any(x.metadata.uid == first.metadata.uid and x.metadata.deletion_timestamp for x in pods)
        assert all(not x.spec.node_name for x in pods if x.metadata.uid != first.metadata.uid)
        kube.wait_until("pods", lambda items: any(pod_ready(x) and x.metadata.uid != first.metadata.uid
                                                  for x in items), timeout=start + drain + 30,
                        namespace=p.namespace, label_selector=f"kilocard.io/model={BIG}")

    # The first start, from scheduling to Ready, took the computed time (within 10 %).
    phases = {(e.uid, e.phase): e.at for e in recorder.events}
    first_start = phases[(first.metadata.uid, "ready")] - phases[(first.metadata.uid, "scheduled")]
    assert abs(first_start - start) <= 0.1 * start, (first_start, start)

    (replica,) = recovery.timeline(recorder.events, fault_at)["replicas"]
    # Drained for its drain time, holding the cards: the replacement was scheduled only then.
    assert abs(replica["gone"] - replica["deleted"] - drain) <= max(1.0, 0.1 * drain), replica
    assert replica["created"] < replica["gone"] <= replica["scheduled"], replica
    # Then the image pull (Running, not Ready) and the weights and warm-up (Ready).
    pull = timing.startup(template["metadata"]["labels"]).pull / timing.DEFAULT_FACTOR
    assert replica["scheduled"] + 0.9 * pull <= replica["started"] < replica["ready"], replica
    assert abs(replica["ready"] - replica["scheduled"] - start) <= 0.1 * start, replica
    assert recovery.within(recorder.events, fault_at, budget=drain + start + 5, expected=1).ok
    short = recovery.within(recorder.events, fault_at, budget=start, expected=1)
    assert not short.ok and "over the" in short.reason  # a budget that forgets the start-up fails
