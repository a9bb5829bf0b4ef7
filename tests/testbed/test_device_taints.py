"""The device-taint probe on the testbed: an XID 79 through a fake node's agent makes the
simulator's DRA driver taint that card's device in the node's ResourceSlice within budget, and the
probe passes; the revert (a card reset) takes the taint away; on a node whose driver does not
react (label kilocard.io/dra-health=off), the same probe fails naming the card."""

from __future__ import annotations

import os
import uuid

import pytest

from chaos import ledger, plan, revert
from chaos.agent.client import AgentClient
from chaos.faults import Context
from probes import chaostoolkit, device_taints
from testbed import fleet, nodes
from testbed.simulator import dra
from tests.testbed.helpers import eventually

pytestmark = pytest.mark.testbed
BUDGET = 10.0
CARD = 3
TAINT = "gpu.nvidia.com/xid=79:NoSchedule"  # NVIDIA's driver's taint for a fatal XID


@pytest.fixture
def run(kube, testbed, tmp_path):
    """(context, ledger, probe configuration) of one run."""
    run_id = f"t-{uuid.uuid4().hex[:8]}"
    cfg = {"kilocard_kubeconfig": str(testbed.paths.kubeconfig), "kilocard_run_id": run_id,
           "kilocard_ledger_dir": str(tmp_path / "ledger")}
    ctx = Context(kube, AgentClient(kube), run_id, say=lambda _m: None)
    return ctx, ledger.Ledger(run_id, kube, tmp_path / "ledger"), cfg


def device_taints_on(kube, node):
    return [(t.device, str(t)) for t in device_taints.taints_of(kube.list_resource_slices(dra.DRIVER, node))]


def xid_79(ctx, book, node):
    return plan.inject(ctx, book, {"kind": "gpu-xid", "nodes": [node], "card": CARD, "params": {"xid": 79},
                                   "ttl_seconds": 120})


def test_an_xid_taints_its_device_within_budget_and_the_card_reset_clears_it(kube, pool, run):
    ctx, book, cfg = run
    node = pool(1).node_names[0]
    assert eventually(lambda: kube.list_resource_slices(dra.DRIVER, node), 15)  # its driver started
    fault = xid_79(ctx, book, node)
    try:
        verdict = chaostoolkit.devices_tainted_within(BUDGET, configuration=cfg)
        assert verdict["verdict"] == "ok" and verdict["outcome"] == "tainted", verdict["reason"]
        (card,) = verdict["cards"]
        assert (card["node"], card["device"], card["taint"]) == (node, f"gpu-{CARD}", TAINT)
        assert card["seconds"] <= BUDGET
        assert device_taints_on(kube, node) == [(f"gpu-{CARD}", TAINT)]
    finally:
        assert revert.revert(ctx, book, fault.records) == []
    assert eventually(lambda: device_taints_on(kube, node) == [], 10)
    after = chaostoolkit.devices_tainted_within(BUDGET, configuration=cfg)  # nothing left to judge
    assert after["verdict"] == "failed" and after["outcome"] == "unknown", after["reason"]


def test_a_driver_that_does_not_react_turns_the_same_probe_red_naming_the_card(kube, testbed, run):
    ctx, book, cfg = run
    name = f"d{os.getpid() % 1000}x{uuid.uuid4().hex[:4]}"
    manifest = nodes.node_manifest(0, testbed.config, prefix=name,
                                   extra_labels={fleet.POOL_LABEL: name, dra.HEALTH_LABEL: "off"})
    manifest["spec"]["taints"] = [{"key": fleet.POOL_LABEL, "value": name, "effect": "NoSchedule"}]
    node = manifest["metadata"]["name"]
    nodes.create_nodes(kube, [manifest])
    try:
        assert eventually(lambda: kube.list_resource_slices(dra.DRIVER, node), 15)  # labelled when it started
        fault = xid_79(ctx, book, node)
        try:
            verdict = chaostoolkit.devices_tainted_within(BUDGET, configuration=cfg)
        finally:
            assert revert.revert(ctx, book, fault.records) == []
        assert verdict["verdict"] == "failed" and verdict["outcome"] == "not_tainted", verdict["reason"]
        assert f"node {node} gpu-{CARD} (card {CARD}) not tainted" in verdict["reason"], verdict["reason"]
        (card,) = verdict["cards"]
        assert card["state"] == "untainted" and card["seconds"] >= BUDGET
        assert device_taints_on(kube, node) == []
    finally:
        nodes.delete_nodes(kube, [node])
