import socket
from pathlib import Path

import pytest

from chaos.errors import SpecError
from testbed.config import Ports, TestbedConfig, rack_of, taken_ports, zone_of


def config(**kw):
    return TestbedConfig(state_dir=Path("/nonexistent"), advertise_address="10.255.255.1", **kw)


def test_defaults_are_a_thousand_cards():
    c = config().validate()
    assert (c.nodes, c.cards_per_node, c.cards) == (128, 8, 1024)
    assert c.card_resource == "nvidia.com/gpu"


@pytest.mark.parametrize(
    "field, value, flag",
    [("nodes", 0, "--nodes"), ("nodes", -3, "--nodes"), ("cards_per_node", 1.5, "--cards-per-node"),
     ("cards_per_node", "8", "--cards-per-node"), ("cards_per_node", 65, "--cards-per-node"),
     ("nodes", True, "--nodes")],
)
def test_impossible_sizes_name_the_flag(field, value, flag):
    with pytest.raises(SpecError, match=f"^{flag}: expected an integer from 1 to"):
        config(**{field: value}).validate()


@pytest.mark.parametrize("resource", ["nvidia.com/gpu", "huawei.com/Ascend910", "amd.com/gpu", "example.com/npu-x_1"])
def test_extended_resources_accepted(resource):
    assert config(card_resource=resource).validate().card_resource == resource


@pytest.mark.parametrize("resource", ["gpu", "nvidia.com/", "/gpu", "kubernetes.io/gpu", "NVIDIA.COM/gpu", "a b/gpu"])
def test_bad_card_resource_is_refused(resource):
    with pytest.raises(SpecError, match="^--card-resource: expected an extended resource name"):
        config(card_resource=resource).validate()


def test_topology_assignment():
    c = config(nodes_per_rack=16, racks_per_zone=2)
    assert [rack_of(i, c) for i in (0, 15, 16, 127)] == [0, 0, 1, 7]
    assert [zone_of(i, c) for i in (0, 31, 32, 127)] == [0, 0, 1, 3]


def test_taken_port_is_named():
    # Find a stretch of free ports, then occupy the second one (etcd's client port).
    base = next(b for b in range(30000, 60000, 97) if taken_ports(Ports(b)) == [])
    with socket.socket() as s:
        s.bind(("127.0.0.1", base + 1))
        s.listen()
        assert taken_ports(Ports(base)) == [f"port {base + 1} (etcd client)"]
        assert taken_ports(Ports(base + 1)) == [f"port {base + 1} (kube-apiserver)"]


def test_config_round_trips_through_json():
    c = config(nodes=3, card_resource="huawei.com/Ascend910")
    assert TestbedConfig.from_json(c.to_json()) == c
