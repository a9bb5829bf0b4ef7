"""The simulator's DRA driver (testbed/simulator/dra.py) as pure state: the slices it publishes, the
taints a card's XID makes after its reaction time, and what it writes."""

from chaos.errors import Conflict
from probes import device_taints
from testbed.simulator import dra
from testbed.simulator.world import World

T0 = 1_700_000_000.0


def gpu_world(**nodes):
    w = World("nvidia.com/gpu")
    for name, health in (nodes or {"n0": True, "n1": True}).items():
        w.upsert_node(name, 8, uid=f"uid-{name}", dra_health=health)
    return w


def xid(w, node="n0", card=3, value=79):
    return w.add_fault(node, {"kind": "xid", "target": {"card": card}, "params": {"xid": value}, "ttl_seconds": 300})


def taints(slices):
    return [str(t) for t in device_taints.taints_of(body for _state, body in slices.values())]


def test_every_node_gets_a_slice_of_its_cards_owned_by_the_node():
    w, driver = gpu_world(), dra.Driver()
    slices = driver.react(w, T0)
    assert sorted(slices) == ["n0", "n1"]
    body = slices["n0"][1]
    assert body["metadata"]["name"] == "n0-gpu.nvidia.com"
    assert body["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "n0",
                                                    "uid": "uid-n0", "controller": True}]
    assert body["spec"]["driver"] == "gpu.nvidia.com" and body["spec"]["pool"]["name"] == "n0"
    devices = body["spec"]["devices"]
    assert [d["name"] for d in devices] == [f"gpu-{i}" for i in range(8)]
    assert devices[2]["attributes"]["uuid"] == {"string": w.cards[("n0", 2)].uuid}
    assert devices[2]["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}


def test_an_xid_taints_its_device_after_the_reaction_time_and_the_reset_clears_it():
    w, driver = gpu_world(), dra.Driver()
    driver.published = {node: state for node, (state, _body) in driver.react(w, T0).items()}
    f = xid(w)
    assert driver.react(w, T0 + 1) == {}  # the XID is noticed: no taint yet
    slices = driver.react(w, T0 + 2)
    assert sorted(slices) == ["n0"] and taints(slices) == ["gpu.nvidia.com/xid=79:NoSchedule"]
    (tainted,) = [d for d in slices["n0"][1]["spec"]["devices"] if "taints" in d]
    assert tainted["name"] == "gpu-3" and tainted["taints"][0]["timeAdded"] == "2023-11-14T22:13:22Z"
    driver.published["n0"] = slices["n0"][0]
    w.delete_fault("n0", f.id)
    slices = driver.react(w, T0 + 3)
    assert sorted(slices) == ["n0"] and taints(slices) == []


def test_one_taint_per_card_the_value_follows_the_xid_and_the_effect_only_escalates():
    old = dra.taint_for(79, None, T0)
    assert dra.taint_for(43, old, T0 + 5) == dra.Taint(43, "NoSchedule", T0)
    assert dra.taint_for(43, None, T0) == dra.Taint(43, "None", T0)  # an application error: informational


def test_health_off_for_the_driver_or_a_node_taints_nothing():
    w = gpu_world(n0=True, n1=False)
    xid(w, "n0")
    xid(w, "n1")
    assert taints(dra.Driver(health=False).react(w, T0 + 5)) == []
    driver = dra.Driver()
    driver.react(w, T0)
    slices = driver.react(w, T0 + 5)
    assert [t.node for t in device_taints.taints_of(body for _s, body in slices.values())] == ["n0"]


def test_a_lost_node_s_slice_is_left_alone_and_a_removed_node_forgotten():
    w, driver = gpu_world(), dra.Driver()
    driver.published = {node: state for node, (state, _body) in driver.react(w, T0).items()}
    w.upsert_node("n1", 8, lost=True, uid="uid-n1")
    xid(w, "n1")
    driver.react(w, T0)
    assert driver.react(w, T0 + 5) == {}
    w.remove_node("n1")
    driver.react(w, T0 + 6)
    assert sorted(driver.published) == ["n0"]


class Recorder:
    """A Kube whose creates answer `created` (None, or the error) per slice, recording applies."""

    def __init__(self, created):
        self.created, self.applied = created, []

    def send_all(self, what, requests):
        return [self.created for _ in requests]

    def apply(self, body):
        self.applied.append(body["metadata"]["name"])


def test_sync_creates_new_slices_and_applies_those_left_from_before_and_every_change():
    w = gpu_world()
    fresh, left = Recorder(None), Recorder(Conflict("exists", status=409))
    dra.Driver().sync(fresh, w, T0)
    assert fresh.applied == []
    driver = dra.Driver()
    driver.sync(left, w, T0)
    assert sorted(left.applied) == ["n0-gpu.nvidia.com", "n1-gpu.nvidia.com"] and sorted(driver.published) == [
        "n0", "n1"]
    xid(w)
    driver.sync(left, w, T0 + 1)
    driver.sync(left, w, T0 + 2)
    assert left.applied[2:] == ["n0-gpu.nvidia.com"]
