"""The device-taint probe (probes/device_taints.py): its pure judge per card, the taints it reads
out of ResourceSlices, and its poll until decided."""

import pytest

from probes import device_taints as dt

T0 = 1_700_000_000.0
XID = dt.XidFault("gpu-001", 3, T0 + 0.4)


def taint(device="gpu-3", added=T0 + 2, effect="NoSchedule", node="gpu-001", value="79"):
    return dt.DeviceTaint(node, device, "gpu.nvidia.com/xid", value, effect, added)


def test_a_card_tainted_in_time_passes():
    v = dt.judge([taint()], [XID], budget=10, now=T0 + 30)
    assert v.ok and v.details["outcome"] == "tainted", v.reason
    (card,) = v.details["cards"]
    assert card["state"] == "tainted" and card["taint"] == "gpu.nvidia.com/xid=79:NoSchedule"
    assert card["seconds"] == pytest.approx(1.6)


def test_a_taint_stamped_in_the_fault_s_own_second_is_its_own():
    v = dt.judge([taint(added=T0)], [XID], budget=10, now=T0 + 5)  # timeAdded has whole seconds
    assert v.ok and v.details["cards"][0]["seconds"] == 0.0


def test_a_card_tainted_late_fails_naming_it():
    v = dt.judge([taint(added=T0 + 15)], [XID], budget=10, now=T0 + 30)
    assert not v.ok and v.details["outcome"] == "not_tainted"
    assert v.reason == ("1 of 1 cards under an XID not tainted within 10 s: node gpu-001 gpu-3 (card 3) tainted "
                        "gpu.nvidia.com/xid=79:NoSchedule 14.6 s after its XID fault")


def test_a_card_never_tainted_fails_with_the_time_since_its_fault():
    v = dt.judge([], [XID], budget=10, now=T0 + 12.4)
    assert not v.ok and v.details["outcome"] == "not_tainted"
    assert "node gpu-001 gpu-3 (card 3) not tainted 12.0 s after its XID fault" in v.reason


def test_not_yet_tainted_within_budget_is_pending_not_a_pass():
    v = dt.judge([], [XID], budget=10, now=T0 + 3)
    assert not v.ok and v.details["outcome"] == "pending" and "still within 10 s" in v.reason


def test_no_xid_fault_is_unknown_not_a_pass():
    v = dt.judge([taint()], [], budget=10, now=T0)
    assert not v.ok and v.details["outcome"] == "unknown" and "no card to judge" in v.reason


def test_a_taint_on_another_card_or_node_does_not_count():
    others = [taint(device="gpu-4"), taint(node="gpu-002")]
    v = dt.judge(others, [XID], budget=10, now=T0 + 20)
    assert not v.ok and v.details["outcome"] == "not_tainted" and v.details["cards"][0]["taints"] == []


def test_an_informational_taint_does_not_count_and_is_shown():
    v = dt.judge([taint(effect="None", value="43")], [XID], budget=10, now=T0 + 20)
    assert not v.ok and "(only gpu.nvidia.com/xid=43:None)" in v.reason


def test_a_taint_from_before_the_fault_cannot_be_told_from_its_own():
    v = dt.judge([taint(added=T0 - 60)], [XID], budget=10, now=T0 + 20)
    assert not v.ok and v.details["outcome"] == "unknown" and "since before its XID fault" in v.reason


def test_every_card_is_judged_and_one_late_card_fails_the_lot():
    second = dt.XidFault("gpu-001", 5, T0 + 0.4)
    v = dt.judge([taint(), taint(device="gpu-5", added=T0 + 30)], [XID, second], budget=10, now=T0 + 40)
    assert not v.ok and [c["state"] for c in v.details["cards"]] == ["tainted", "late"]
    assert v.reason.startswith("1 of 2 cards") and "gpu-5 (card 5)" in v.reason and "gpu-3" not in v.reason


def resource_slice(node, generation, devices):
    return {"spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                     "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                     "devices": devices}}


def test_taints_are_read_from_the_newest_generation_of_each_pool():
    tainted = {"name": "gpu-3", "taints": [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule",
                                            "timeAdded": "2023-11-14T22:13:22Z"}]}
    slices = [resource_slice("gpu-001", 2, [tainted, {"name": "gpu-4"}]),
              resource_slice("gpu-001", 1, [{**tainted, "name": "gpu-5"}]),  # being replaced
              resource_slice("gpu-002", 1, [{"name": "gpu-0"}])]
    assert dt.taints_of(slices) == [taint(added=T0 + 2)]


class Slices:
    """A Kube that lists one node's slices, untainted until `tainted_from` lists have been made."""

    def __init__(self, tainted_from):
        self.lists, self.tainted_from = 0, tainted_from

    def batch(self, fn, items):
        return [fn(x) for x in items]

    def list_resource_slices(self, driver, node):
        self.lists += 1
        devices = [{"name": "gpu-3", **({"taints": [{"key": "k", "effect": "NoExecute",
                                                    "timeAdded": "2023-11-14T22:13:22Z"}]}
                                        if self.lists >= self.tainted_from else {})}]
        return [resource_slice(node, 1, devices)]


def test_within_waits_while_pending_and_stops_once_decided(monkeypatch):
    clock = iter([T0 + 1, T0 + 1, T0 + 2, T0 + 2, T0 + 3])
    monkeypatch.setattr(dt.time, "time", lambda: next(clock))
    pauses = []
    monkeypatch.setattr(dt.time, "sleep", pauses.append)
    kube = Slices(tainted_from=3)
    v = dt.within(kube, [XID], 10, "gpu.nvidia.com")
    assert v.ok and kube.lists == 3 and pauses == [0.5, 1.0]
