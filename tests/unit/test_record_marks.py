"""A remediator's marks as `record` reads them: the health conditions NVIDIA NVSentinel's platform
connector writes on a node (one fault per failure its message lists), DRA device taints (a
DeviceTaintRule's, a driver's in its ResourceSlice), the state and cordon time it leaves on the
node; and one fault seen by several sources kept once."""

from __future__ import annotations

from typing import Any

from chaos import record
from chaos.record import Sighting

T0 = 1_800_000_000.0


def _iso(at: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node(name: str, conditions: list[dict[str, Any]] = (), labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": _iso(T0 - 999)}, *conditions]}}


def _condition(kind: str, message: str, at: float, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": f"{kind}IsNotHealthy", "message": message,
            "lastTransitionTime": _iso(at)}


def test_a_health_condition_is_one_fault_per_failure_it_lists_on_the_card_it_names() -> None:
    # NVSentinel's format: "ErrorCode:<code> GPU:<i> PCI:<bus> GPU_UUID:<id> <text> Recommended Action=<a>;"
    two = ("ErrorCode:DCGM_FR_VOLATILE_DBE_DETECTED GPU:3 PCI:0000:18:00.0 GPU_UUID:GPU-a1 volatile DBE "
           "Recommended Action=RESTART_VM;ErrorCode:DCGM_FR_VOLATILE_DBE_DETECTED GPU:5 PCI:0000:2a:00.0 "
           "Recommended Action=RESTART_VM;")
    nodes = [_node("gpu-1", [_condition("GpuMemWatch", two, T0 + 4)]),
             _node("gpu-2", [_condition("SysLogsXIDError", "ErrorCode:79 GPU:0 fell off the bus "
                                        "Recommended Action=RESTART_BM;", T0 + 9)])]
    found, skipped = record.faults_from_conditions(nodes, record.CONDITION_FAULTS, T0, T0 + 60)
    assert skipped == []
    assert [(s.name, s.fault, s.start, s.end) for s in found] == [
        ("node condition GpuMemWatch", {"kind": "gpu-ecc", "nodes": ["gpu-1"], "card": 3,
                                        "params": {"type": "dbe", "speed": 0.5}}, T0 + 4, None),
        ("node condition GpuMemWatch", {"kind": "gpu-ecc", "nodes": ["gpu-1"], "card": 5,
                                        "params": {"type": "dbe", "speed": 0.5}}, T0 + 4, None),
        ("node condition SysLogsXIDError", {"kind": "gpu-xid", "nodes": ["gpu-2"], "card": 0, "xid": 79}, T0 + 9, None)]


def test_healthy_old_unknown_or_cardless_conditions_are_not_faults_and_the_cardless_say_why() -> None:
    nodes = [_node("gpu-1", [_condition("GpuMemWatch", "No Health Failures", T0 + 4, status="False"),
                             _condition("GpuPcieWatch", "ErrorCode:DCGM_FR_PCI GPU:1 Recommended Action=NONE;", T0)]),
             _node("gpu-2", [_condition("GpuMemWatch", "ErrorCode:DCGM_FR_VOLATILE_DBE_DETECTED GPU:2 x;", T0 - 30)]),
             _node("gpu-3", [_condition("SysLogsXIDError", "ErrorCode:48 PCI:0001:00:00 GPU_UUID:GPU-9 kernel: "
                                        "NVRM: Xid 48 Recommended Action=RESTART_BM;", T0 + 1)])]
    found, skipped = record.faults_from_conditions(nodes, record.CONDITION_FAULTS, T0, T0 + 60)
    assert found == []
    (why,) = skipped
    assert why.startswith("node gpu-3 condition SysLogsXIDError: no label 'GPU' to fill the fault with"), why


def _slice(node: str, devices: list[dict[str, Any]], driver: str = "gpu.nvidia.com") -> dict[str, Any]:
    return {"spec": {"driver": driver, "pool": {"name": f"pool-{node}"}, "nodeName": node, "devices": devices}}


def test_device_taints_are_faults_on_their_cards_by_key_else_the_card_taken_away() -> None:
    slices = [_slice("gpu-7", [{"name": "gpu-1", "taints": [
        {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule", "timeAdded": _iso(T0 + 2)},
        {"key": "gpu.nvidia.com/xid", "value": "13", "effect": "None", "timeAdded": _iso(T0 + 2)}]}])]
    rules = [{"metadata": {"name": "by-hand"}, "spec": {
                 "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "pool-gpu-7", "device": "gpu-4"},
                 "taint": {"key": "ops.example.com/broken", "effect": "NoExecute", "timeAdded": _iso(T0 + 5)}}},
             {"metadata": {"name": "kilocard's", "labels": {"kilocard.io/run-id": "run-x"}}, "spec": {
                 "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "gpu-7", "device": "gpu-2"},
                 "taint": {"key": "kilocard.io/isolated", "effect": "NoSchedule", "timeAdded": _iso(T0 + 5)}}},
             {"metadata": {"name": "earlier"}, "spec": {
                 "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "pool-gpu-7", "device": "gpu-6"},
                 "taint": {"key": "x/y", "effect": "NoSchedule", "timeAdded": _iso(T0 - 100)}}},
             {"metadata": {"name": "nameless"}, "spec": {
                 "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "pool-gpu-7", "device": "mig-a"},
                 "taint": {"key": "x/y", "effect": "NoSchedule", "timeAdded": _iso(T0 + 1)}}}]
    found, skipped = record.faults_from_device_taints(rules, slices, record.DEVICE_TAINT_FAULTS, T0, T0 + 60)
    assert [(s.fault, s.start) for s in found] == [
        ({"kind": "dra-card-isolate", "nodes": ["gpu-7"], "cards": [4], "driver": "gpu.nvidia.com",
          "effect": "NoExecute", "device_name": "gpu-{card}"}, T0 + 5),
        ({"kind": "gpu-xid", "nodes": ["gpu-7"], "card": 1, "xid": 79}, T0 + 2)]  # the informational one is not
    assert skipped == ["device taint x/y on gpu.nvidia.com/pool-gpu-7/mig-a: no node and card index to replay it on"]


def test_one_fault_seen_by_an_alert_and_a_condition_is_one_fault_from_the_first_sight() -> None:
    ecc = {"kind": "gpu-ecc", "nodes": ["gpu-1"], "card": 3, "params": {"type": "dbe", "speed": 0.5}}
    other = {**ecc, "card": 4}
    found = record.merged([Sighting("GpuDoubleBitEccErrors", ecc, T0 + 1, T0 + 40),
                           Sighting("node condition GpuMemWatch", ecc, T0 + 0.5, None),
                           Sighting("GpuDoubleBitEccErrors", other, T0 + 2, T0 + 10),
                           Sighting("GpuDoubleBitEccErrors", other, T0 + 30, T0 + 50)])  # again, after it ended
    assert [(s.name, s.fault["card"], s.start, s.end) for s in found] == [
        ("node condition GpuMemWatch, GpuDoubleBitEccErrors", 3, T0 + 0.5, None),
        ("GpuDoubleBitEccErrors", 4, T0 + 2, T0 + 10), ("GpuDoubleBitEccErrors", 4, T0 + 30, T0 + 50)]


def test_the_remediation_is_the_nodes_cordoned_in_the_range_with_the_state_they_are_in() -> None:
    state = "dgxc.nvidia.com/nvsentinel-state"
    nodes = [_node("gpu-1", labels={state: "drain-succeeded", record.CORDON_TIMESTAMP: "2027-01-15T08-00-12Z"}),
             _node("gpu-2", labels={state: "quarantined", record.CORDON_TIMESTAMP: "2020-01-01T00-00-00Z"}),
             _node("gpu-3", labels={state: "quarantined"}), _node("gpu-4")]
    start = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    assert record.remediation(nodes, start, start + 60) == [
        {"node": "gpu-1", "cordoned": start + 12, "state": "drain-succeeded"}]
    data = record.timeline("t", [Sighting("x", {"kind": "node-kubelet-stop", "nodes": ["gpu-1"]}, start + 2, start + 20)],
                           [], [], {}, remediated=record.remediation(nodes, start, start + 60))
    assert data["recorded"]["remediation"] == [{"node": "gpu-1", "cordoned": 10.0, "state": "drain-succeeded"}]
