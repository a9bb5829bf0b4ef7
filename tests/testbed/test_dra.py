"""Isolating one DRA-managed card with a DeviceTaintRule, end to end on the real control plane:
the scheduler allocates a device to a pod's ResourceClaim, the NoExecute rule makes the
controller manager evict that pod, and revert removes the rule."""

from __future__ import annotations

import uuid

import pytest

from chaos import ledger, plan, revert
from chaos.agent.client import AgentClient
from chaos.errors import NotFound
from chaos.faults import Context, dra_card_isolation
from chaos.kube import pod_ready
from testbed import fleet

pytestmark = pytest.mark.testbed


def test_device_taint_rule_evicts_the_pod_holding_the_card(kube, pool, tmp_path):
    p = pool(1)
    node = p.node_names[0]
    driver = f"{p.name}.gpu.kilocard.io"
    kube.apply({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": driver},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})
    kube.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{driver}"},
                "spec": {"driver": driver, "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": f"gpu-{i}"} for i in range(8)]}})
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": p.namespace}})
    kube.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": "card", "namespace": p.namespace},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]}}})
    kube.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vllm", "namespace": p.namespace},
                "spec": {"nodeSelector": {fleet.POOL_LABEL: p.name},
                         "tolerations": [{"key": fleet.POOL_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
                         "resourceClaims": [{"name": "gpu", "resourceClaimName": "card"}],
                         "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                                         "resources": {"claims": [{"name": "gpu"}]}}]}})
    (pod,) = kube.wait_until("pods", lambda items: any(pod_ready(x) for x in items), timeout=30, namespace=p.namespace)
    claim = kube.get_object("resource.k8s.io/v1", "ResourceClaim", "card", p.namespace)
    (allocated,) = claim.status.allocation.devices.results
    card = int(allocated.device.split("-")[1])

    ctx = Context(kube, AgentClient(kube), f"dra-{uuid.uuid4().hex[:6]}", say=lambda _m: None)
    book = ledger.Ledger(ctx.run_id, kube, tmp_path)
    try:
        injection = plan.inject(ctx, book, {"kind": "dra-card-isolate", "nodes": [node], "cards": [card],
                                              "driver": driver, "effect": "NoExecute", "ttl_seconds": 120})
        (record,) = injection.records
        assert record.state == "applied" and record.target["device"] == allocated.device
        rule = kube.get_object(dra_card_isolation.API_VERSION, "DeviceTaintRule", record.undo["name"])
        assert rule.spec.taint.effect == "NoExecute" and rule.spec.deviceSelector.pool == node
        kube.wait_until("pods", lambda items: pod.metadata.uid not in {x.metadata.uid for x in items}, timeout=30,
                        namespace=p.namespace)
        assert revert.revert(ctx, book, injection.records) == []
        with pytest.raises(NotFound):
            kube.get_object(dra_card_isolation.API_VERSION, "DeviceTaintRule", record.undo["name"])
    finally:
        for kind, name, ns in (("ResourceSlice", f"{node}-{driver}", None), ("DeviceClass", driver, None)):
            try:
                kube.delete_object("resource.k8s.io/v1", kind, name, ns)
            except NotFound:
                pass
