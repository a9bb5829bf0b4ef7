from pathlib import Path

import pytest

from chaos import routers
from chaos.errors import SpecError
from testbed import fleet, nodes
from testbed.config import TestbedConfig


def config(**kw):
    return TestbedConfig(state_dir=Path("/x"), advertise_address="10.255.255.1", **kw)


def test_node_carries_topology_and_cards():
    n = nodes.node_manifest(17, config())
    labels = n["metadata"]["labels"]
    assert n["metadata"]["name"] == labels["kubernetes.io/hostname"] == "gpu-017"
    assert labels["topology.kubernetes.io/zone"] == "zone-0"
    assert labels[nodes.RACK_LABEL] == "rack-01"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert n["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert n["metadata"]["annotations"][nodes.KWOK_ANNOTATION] == "fake"


def test_non_nvidia_cards_get_no_nvidia_labels():
    n = nodes.node_manifest(0, config(card_resource="huawei.com/Ascend910", card_product="Ascend910B", cards_per_node=16))
    assert n["status"]["capacity"]["huawei.com/Ascend910"] == "16"
    assert "nvidia.com/gpu" not in n["status"]["capacity"]
    assert not [k for k in n["metadata"]["labels"] if k.startswith("nvidia.com/")]
    assert n["metadata"]["labels"][nodes.PRODUCT_LABEL] == "Ascend910B"


def workload(objects, name):
    return next(o for o in objects if o["metadata"]["name"] == name)


def test_default_fleet_shape():
    objects = fleet.load("default", "nvidia.com/gpu")
    big = workload(objects, "llama-3-70b")
    spec = big["spec"]["template"]["spec"]
    assert big["spec"]["replicas"] >= 8
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == "kubernetes.io/hostname"
    assert any(o["kind"] == "PodDisruptionBudget" for o in objects)
    small = workload(objects, "llama-2-7b")
    assert small["spec"]["replicas"] >= 64
    assert small["spec"]["template"]["spec"]["topologySpreadConstraints"][0]["topologyKey"] == nodes.RACK_LABEL
    groups = [o for o in objects if o["kind"] == "StatefulSet"]
    assert groups and all(g["spec"]["replicas"] == 2 and
                          g["spec"]["template"]["metadata"]["labels"]["kilocard.io/tp-size"] == "16" for g in groups)
    fragile = workload(objects, "llama-2-7b-fragile")
    assert "affinity" not in fragile["spec"]["template"]["spec"]
    # Every replica carries the model shape the capacity probes need; the endpoint picker serves none.
    for o in objects:
        if o["kind"] in ("Deployment", "StatefulSet") and o["metadata"]["name"] != "llama-3-8b-long-epp":
            labels = o["spec"]["template"]["metadata"]["labels"]
            assert {"kilocard.io/model", "kilocard.io/layers", "kilocard.io/kv-heads", "kilocard.io/head-dim",
                    "kilocard.io/dtype", "kilocard.io/tp-size"} <= set(labels)
    long = workload(objects, "llama-3-8b-long")  # its KV cache fixed by its engine's arguments
    assert "--num-gpu-blocks-override" in long["spec"]["template"]["spec"]["containers"][0]["args"]
    assert fleet.expected_pods(objects) == 8 + 64 + 2 * 2 + 8 + 4 + 1  # the last: llama-3-8b-long's endpoint picker
    # The picker, as chaos.routers reads its pod: failing open, in front of llama-3-8b-long alone.
    epp = next(o for o in objects if o["metadata"]["name"] == "llama-3-8b-long-epp")
    picker = routers.router_of({"metadata": {**epp["spec"]["template"]["metadata"], "name": "epp-0",
                                             "namespace": "kilocard-fleet"}, "spec": epp["spec"]["template"]["spec"]})
    assert picker is not None and (picker.shape, picker.failure_mode) == (routers.PICKER, routers.FAIL_OPEN)
    assert picker.finds("kilocard-fleet", long["spec"]["template"]["metadata"]["labels"])
    assert not picker.finds("kilocard-fleet", fragile["spec"]["template"]["metadata"]["labels"])


def test_fleet_follows_the_card_resource():
    objects = fleet.load("default", "huawei.com/Ascend910", namespace="npu")
    limits = workload(objects, "llama-3-70b")["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"huawei.com/Ascend910": "8"}
    assert fleet.namespace_of(objects) == "npu"


def test_reshaping_for_tests():
    objects = fleet.scaled(fleet.only(fleet.load("default", "nvidia.com/gpu"), "llama-3-70b"), {"llama-3-70b": 3})
    assert [o["kind"] for o in objects] == ["Namespace", "Deployment", "PodDisruptionBudget"]
    assert fleet.expected_pods(objects) == 3
    spec = workload(fleet.pinned(objects, "p1"), "llama-3-70b")["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {fleet.POOL_LABEL: "p1"}
    assert {"key": fleet.POOL_LABEL, "operator": "Equal", "value": "p1", "effect": "NoSchedule"} in spec["tolerations"]


def test_unknown_fleet_and_model():
    with pytest.raises(SpecError, match="unknown fleet 'nope'"):
        fleet.load("nope", "nvidia.com/gpu")
    with pytest.raises(SpecError, match="no such model in the fleet: gpt-9"):
        fleet.only(fleet.load("default", "nvidia.com/gpu"), "gpt-9")
