"""The Ascend side of the fleet simulator (testbed/simulator/ascend.py) as pure state: the device
plugin's view, ClusterD's intake and npu-exporter; and the agent's real-node npu-fault commands."""

import pytest

from chaos import mindx
from chaos.agent.backends import Backends, Tools
from chaos.agent.protocol import Fault, FaultError, validate
from testbed.simulator import ascend
from testbed.simulator.world import World
from tests.unit.sim_helpers import pod, quantile
from tests.unit.test_sim_world import run

R = "huawei.com/Ascend910"


def npu_pod(name, node, model, cards):
    p = pod(name, node, model, cards)
    p["spec"]["containers"][0]["resources"]["limits"] = {R: str(cards)}
    return p


def ascend_world(*pods):
    w = World(R, "Ascend910B3", accelerator="ascend")
    for i in range(2):
        w.upsert_node(f"n{i}", 8)
    for p in pods:
        w.upsert_pod(p)
    return w


def p95(w, key):
    s = w.series[key]
    return quantile(0.95, s.engine.ttft_buckets, s.ttft_buckets, s.ttft_count)


def exported(w, name, node):
    """chip id -> value of one npu-exporter metric on one node, from the rendered text."""
    found = {}
    for line in ascend.NpuRenderer(w).render().splitlines():
        if line.startswith(name + "{") and f'node="{node}"' in line:
            chip = line.split('id="', 1)[1].split('"', 1)[0]
            found[chip] = int(line.rsplit(" ", 1)[1])
    return found


def test_the_plugin_reports_every_chip_and_annotates_what_it_mounted():
    w = ascend_world(npu_pod("big", "n0", "llama-3-70b", 8))
    actions = w.take_actions()
    assert ("device-info", "n0", None) in actions and ("device-info", "n1", None) in actions
    chips = ",".join(f"Ascend910-{i}" for i in range(8))
    assert ("annotate", "ns", ("big", {mindx.POD_CHIPS_ANNOTATION: chips})) in actions
    info = ascend.device_info(w, "n0")
    assert info.healthy == tuple(f"Ascend910-{i}" for i in range(8)) and not info.unhealthy and not info.faults


def test_an_npu_fault_lowers_allocatable_evicts_nothing_slows_the_group_and_shows_everywhere():
    w = ascend_world(npu_pod("big", "n0", "llama-3-70b", 8), npu_pod("other", "n1", "llama-3-70b", 8))
    run(w, 10)
    w.take_actions()
    f = w.add_fault("n0", {"kind": "npu-fault", "target": {"card": 3}, "params": {"code": "80E18402"},
                           "ttl_seconds": 300})
    actions = w.take_actions()
    assert ("allocatable", "n0", 7) in actions and not [a for a in actions if a[0] == "delete-pod"]
    info = ascend.device_info(w, "n0")
    assert info.unhealthy == ("Ascend910-3",) and "Ascend910-3" not in info.healthy
    (fault,) = info.faults
    assert (fault.npu_name, fault.level, fault.codes, fault.fault_type) == (
        "Ascend910-3", "SeparateNPU", ("80E18402",), "CardUnhealthy")
    assert exported(w, "npu_chip_info_health_status", "n0") == {str(i): 0 if i == 3 else 1 for i in range(8)}
    assert exported(w, "npu_chip_info_error_code", "n0") == {"3": 0x80E18402}  # absent on healthy chips
    assert exported(w, "npu_chip_info_health_status", "n1") == {str(i): 1 for i in range(8)}
    w.series.clear()
    run(w, 30)
    assert p95(w, "ns/uid-big") / p95(w, "ns/uid-other") == pytest.approx(3.0, rel=0.2)  # as ECC on a GPU
    w.delete_fault("n0", f.id)
    assert ("allocatable", "n0", 8) in w.take_actions() and not ascend.device_info(w, "n0").faults


def test_a_chip_fault_the_plugin_does_not_isolate_keeps_the_chip_offered():
    w = ascend_world()
    w.add_fault("n0", {"kind": "npu-fault", "target": {"card": 1}, "ttl_seconds": 300,
                       "params": {"code": "80E18401", "level": "NotHandleFault", "speed": 0.7}})
    assert w.allocatable["n0"] == 8 and w.cards[("n0", 1)].speed == 0.7
    assert ascend.device_info(w, "n0").faults[0].level == "NotHandleFault"


def test_manual_separation_takes_chips_out_until_the_configmap_lets_them_go():
    w = ascend_world(npu_pod("small", "n0", "llama-2-7b", 1))
    w.take_actions()
    w.separate("n0", {0, 1, 5})
    actions = w.take_actions()
    assert ("allocatable", "n0", 5) in actions and not [a for a in actions if a[0] == "delete-pod"]
    assert ascend.device_info(w, "n0").unhealthy == ("Ascend910-0", "Ascend910-1", "Ascend910-5")
    w.upsert_pod(npu_pod("next", "n0", "llama-2-7b", 1))
    assert w.pod_on_card("n0", 0).name == "small"  # still there: the plugin evicts nothing
    assert w.pod_on_card("n0", 1) is None and w.pod_on_card("n0", 2).name == "next"  # never a separated chip
    w.separate("n0", set())
    assert ("allocatable", "n0", 8) in w.take_actions()


def public(assertion, code="220001001", devices=(3,)):
    return {"faults": [mindx.npu_public_fault("f-00000001", "NPU", code, 1, assertion, [("n0", list(devices))], "")]}


def test_clusterds_intake_acts_on_occur_and_recover_and_discards_what_it_does_not_list():
    w = ascend_world()
    ascend.take_public_fault(w, public("occur"))
    ascend.take_public_fault(w, public("occur"))  # the same message again (a re-list): one fault
    assert len(w.faults) == 1 and w.allocatable["n0"] == 7
    ascend.take_public_fault(w, public("recover"))
    assert not w.faults and w.allocatable["n0"] == 8
    with pytest.raises(ValueError, match="code 100000001"):
        ascend.take_public_fault(w, public("occur", "100000001"))
    assert not w.faults


def test_the_agent_brings_a_chips_link_down_on_a_real_node_and_refuses_a_chip_fault():
    calls = []
    b = Backends(Tools("/ip", "/tc", "/nft", None, None, None, "/usr/bin/hccn_tool"), "eth0", calls.append)
    body = {"kind": "npu-fault", "target": {"card": 2}, "params": {"code": "81078603", "type": "network"},
            "ttl_seconds": 5}
    f = Fault.create("n", validate(body))
    b.apply(f)
    b.revert(f)
    assert calls == [["/usr/bin/hccn_tool", "-i", "2", "-link", "-s", "down"],
                     ["/usr/bin/hccn_tool", "-i", "2", "-cfg", "recovery"]]
    with pytest.raises(FaultError) as refused:
        b.apply(Fault.create("n", validate({**body, "params": {"code": "80E18402"}})))
    assert refused.value.status == 501 and "ClusterD" in str(refused.value)
    with pytest.raises(FaultError, match="params.code"):
        validate({**body, "params": {"code": "0x80e18402"}})
