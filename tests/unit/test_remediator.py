"""The remediator's decisions, against a stand-in for chaos.kube (its end-to-end behaviour runs on
the testbed in tests/testbed/test_fleet_simulator.py)."""

import json
import re

import pytest

from chaos.errors import TooManyRequests
from testbed import remediator as r


class FakeKube:
    """Nodes and pods as the API's plain JSON, as chaos.kube hands them over."""

    def __init__(self, names, pods=None, blocked=()):
        self.nodes = {n: {"metadata": {"name": n, "labels": {}, "annotations": {}}, "spec": {"taints": []}}
                      for n in names}
        self.pods = pods or {}
        self.blocked = set(blocked)
        self.evicted = []
        self.events = []
        self.statuses = []

    def list_nodes_raw(self, label_selector=None):
        """All nodes, or those whose label is in the set: "key in (a,b)", the remediator's one selector."""
        nodes = list(self.nodes.values())
        if label_selector is None:
            return nodes
        key, values = label_selector.split(" in ")
        wanted = set(values.strip("()").split(","))
        return [n for n in nodes if n["metadata"]["labels"].get(key) in wanted]

    def read_node_raw(self, name):
        return self.nodes[name]

    def patch_node(self, name, patch):
        node = self.nodes[name]
        spec, meta = patch.get("spec", {}), patch.get("metadata", {})
        node["spec"].update({k: v for k, v in spec.items() if k in ("unschedulable", "taints")})
        for key, value in meta.get("labels", {}).items():
            node["metadata"]["labels"][key] = value

    def update_node(self, name, change):
        patch = change(json.loads(json.dumps(self.nodes[name])))
        if patch is not None:
            self.patch_node(name, patch)

    def list_pods_raw(self, field_selector):
        node = field_selector.split("=", 1)[1]
        return [{"metadata": {"name": p, "namespace": "ns", "uid": f"uid-{p}"}} for p in self.pods.get(node, [])]

    def evict_pod(self, namespace, name):
        if name in self.blocked:
            raise TooManyRequests("blocked by PDB", 429)
        self.evicted.append(name)

    def record_event(self, kind, name, namespace, reason, message, component, uid=None):
        self.events.append((kind, name, reason))

    def patch_node_status(self, name, patch):
        self.statuses.append((name, patch["status"]["conditions"]))


class FakeProm:
    """The fatal cards (DBE ECC or critical XID); per check, the ECC ones or the XIDs given; the
    cards held back by a power or thermal reason (`held`: node, card, serving)."""

    def __init__(self, failing, label="Hostname", xids=(), held=()):
        self.failing, self.label, self.xids, self.held = failing, label, list(xids), list(held)

    def custom_query(self, query):
        if query == r.dcgm.XID_QUERY:
            return [{"metric": {self.label: node, "gpu": gpu, "err_code": xid}, "value": [0, "1"]}
                    for node, gpu, xid in self.xids]
        if query in (r.dcgm.SLOW_QUERY, r.dcgm.HELD_QUERY):
            return [{"metric": {self.label: node, "gpu": gpu}, "value": [0, "1"]} for node, gpu, serving in self.held
                    if serving or query == r.dcgm.HELD_QUERY]
        assert query in (r.dcgm.FATAL_QUERY, r.dcgm.DBE_QUERY), query
        return [{"metric": {self.label: node, "gpu": gpu}, "value": [0, "1"]} for node, gpu in self.failing]


def quarantined(kube):
    return sorted(n for n, node in kube.nodes.items() if node["spec"].get("unschedulable"))


def test_fatal_card_quarantines_and_drains_its_node_after_the_grace():
    kube = FakeKube(["a", "b", "c", "d"], pods={"a": ["p1", "p2"]}, blocked={"p2"})
    rem = r.Remediator(kube, FakeProm([("a", "3")]), for_seconds=0, say=lambda _m: None)
    rem.round()
    node = kube.nodes["a"]
    assert quarantined(kube) == ["a"]
    assert [(t["key"], t["value"], t["effect"]) for t in node["spec"]["taints"]] == [
        ("nvidia.com/gpu-error", "fatal", "NoSchedule")]
    assert kube.evicted == ["p1"]  # p2's PDB said no: it stays for the next round
    assert node["metadata"]["labels"][r.STATE_LABEL] == "draining"
    # What it did is in Events, as a postmortem reads it (kilocard record): not the blocked eviction.
    assert kube.events == [("Node", "a", "Quarantined"), ("Pod", "p1", "Evicted")]


def test_a_slow_card_waits_its_longer_grace_stays_quarantined_while_drained_and_idle_and_is_released_when_free():
    kube = FakeKube(["a", "b", "c", "d"], pods={"a": ["p1"]})
    prom = FakeProm([], held=[("a", "3", True)])
    clock = [1000.0]
    rem = r.Remediator(kube, prom, for_seconds=0, say=lambda _m: None, slow_for_seconds=30)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(r.time, "monotonic", lambda: clock[0])
        rem.round()
        assert quarantined(kube) == []  # a loss of speed waits longer than a fatal error
        clock[0] += 30
        rem.round()
        assert quarantined(kube) == ["a"] and kube.evicted == ["p1"]
        assert kube.events[0] == ("Node", "a", "Quarantined")
        assert kube.nodes["a"]["metadata"]["labels"]["k8saas.nvidia.com/cordon-reason"] == "slow-card"
        prom.held = [("a", "3", False)]  # drained: idle, still held back
        rem.round()
        assert quarantined(kube) == ["a"]
        prom.held = []  # the cap lifted
        rem.round()
        assert quarantined(kube) == []
    # Off: a slow card is no reason.
    kube = FakeKube(["a", "b"])
    off = r.Remediator(kube, FakeProm([], held=[("a", "3", True)]), for_seconds=0, say=lambda _m: None,
                       slow_cards=False, slow_for_seconds=0)
    off.round()
    assert quarantined(kube) == []


def test_a_blip_shorter_than_the_grace_is_ignored():
    kube = FakeKube(["a", "b"])
    rem = r.Remediator(kube, FakeProm([("a", "0")]), for_seconds=60, say=lambda _m: None)
    rem.round()
    assert quarantined(kube) == []


def test_circuit_breaker_stops_quarantining_past_half_the_nodes():
    kube = FakeKube(["a", "b", "c", "d"])
    said = []
    rem = r.Remediator(kube, FakeProm([("a", "0"), ("b", "1"), ("c", "2")]), for_seconds=0, say=said.append)
    rem.round()
    assert quarantined(kube) == ["a", "b"]
    assert said[-1] == "circuit breaker open: 2/4 nodes quarantined; not quarantining c"


def test_opted_out_nodes_are_left_alone_and_healed_nodes_released():
    kube = FakeKube(["a", "b", "c"])
    kube.nodes["a"]["metadata"]["labels"][r.OPT_OUT_LABEL] = "false"
    prom = FakeProm([("a", "0"), ("b", "0")], label="hostname")  # newer dcgm-exporter label
    rem = r.Remediator(kube, prom, for_seconds=0, say=lambda _m: None)
    rem.round()
    assert quarantined(kube) == ["b"]
    prom.failing = []
    rem.round()
    assert quarantined(kube) == [] and kube.nodes["b"]["spec"]["taints"] == []
    assert kube.nodes["b"]["metadata"]["labels"][r.STATE_LABEL] == "remediation-succeeded"


def test_health_conditions_are_written_at_once_as_nvsentinel_writes_them_and_cleared_when_healthy():
    kube = FakeKube(["a", "b"])
    prom = FakeProm([("a", "3"), ("a", "1")], xids=[("b", "0", "79")])
    rem = r.Remediator(kube, prom, for_seconds=60, say=lambda _m: None)  # long before its quarantine
    rem.round()
    assert quarantined(kube) == []
    written = {(name, c["type"]): c for name, conditions in kube.statuses for c in conditions}
    mem, xid = written["a", "GpuMemWatch"], written["b", "SysLogsXIDError"]
    assert (mem["status"], mem["reason"]) == ("True", "GpuMemWatchIsNotHealthy")
    assert mem["message"] == ("ErrorCode:DCGM_FR_VOLATILE_DBE_DETECTED GPU:1 volatile double-bit ECC errors "
                              "Recommended Action=RESTART_VM;ErrorCode:DCGM_FR_VOLATILE_DBE_DETECTED GPU:3 volatile "
                              "double-bit ECC errors Recommended Action=RESTART_VM;")
    assert xid["message"] == "ErrorCode:79 GPU:0 XID 79 Recommended Action=RESTART_BM;"
    kube.statuses.clear()
    rem.round()
    assert kube.statuses == []  # unchanged: not written again
    prom.failing, prom.xids = [("a", "3")], []
    rem.round()
    assert [(n, c["type"], c["status"], c["message"][:28]) for n, cs in kube.statuses for c in cs] == [
        ("a", "GpuMemWatch", "True", "ErrorCode:DCGM_FR_VOLATILE_D"),
        ("b", "SysLogsXIDError", "False", "No Health Failures")]


def test_a_quarantine_carries_nvsentinels_cordon_labels_and_the_release_lifts_them():
    kube = FakeKube(["a", "b", "c"])
    prom = FakeProm([("a", "0")])
    rem = r.Remediator(kube, prom, for_seconds=0, say=lambda _m: None)
    rem.round()
    labels = kube.nodes["a"]["metadata"]["labels"]
    assert labels["k8saas.nvidia.com/cordon-by"] == "kilocard-remediator"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ", labels["k8saas.nvidia.com/cordon-timestamp"]), labels
    prom.failing = []
    rem.round()
    assert all(labels.get(k) is None for k in r.CORDON_LABELS) and labels[r.STATE_LABEL] == "remediation-succeeded"
