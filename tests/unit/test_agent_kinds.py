"""The agent fault kinds: one module each, found through one registry by the protocol, the node
agent, the toolkit and the fleet simulator alike."""

import pytest

from chaos.agent import kinds
from chaos.agent.backends import Backends, Tools
from chaos.agent.protocol import Fault, FaultError, validate
from chaos.agent.schema import Param, check
from chaos.agent.server import Store
from chaos.faults import agent_faults
from testbed.simulator.effects import EFFECTS


def test_every_kind_module_is_complete_and_known_everywhere():
    for name, module in kinds.REGISTRY.items():
        assert module.NAME == name and module.TARGET in kinds.TARGET_KEYS and isinstance(module.REFRESH, bool)
        assert callable(module.apply) and callable(module.revert)
        assert all(isinstance(p, Param) for p in module.PARAMS.values()), name
        if module.FAULT:  # the toolkit's schema and docs are made from the declaration and its example
            assert check(dict(module.EXAMPLE), module.PARAMS) == module.EXAMPLE, name
    assert set(agent_faults.SCHEMAS) == set(kinds.BY_FAULT)
    assert set(EFFECTS) == set(kinds.REGISTRY)  # the simulator models every kind


@pytest.mark.parametrize("body, field", [
    ({"kind": "loss", "params": {"percnt": 5}, "ttl_seconds": 5}, "params.percnt"),
    ({"kind": "card-isolate", "target": {"card": 0}, "params": {"speed": 1}, "ttl_seconds": 5}, "params.speed"),
    ({"kind": "ecc", "target": {"card": 0, "interface": "eth0"}, "ttl_seconds": 5}, "target"),
    ({"kind": ["ecc"], "ttl_seconds": 5}, "kind"),
    ({"kind": "partition", "params": {"protocol": "icmp"}, "ttl_seconds": 5}, "params.protocol"),
    ({"kind": "kubelet-stop", "target": {"interface": "eth0"}, "ttl_seconds": 5}, "target"),
])
def test_a_kind_refuses_what_it_does_not_know(body, field):
    with pytest.raises(FaultError) as err:
        validate(body)
    assert err.value.field == field


def test_slots_decide_what_stacks():
    assert not kinds.stackable("card-isolate", {"card": 2}, "card-isolate", {"card": 2})
    assert kinds.stackable("card-isolate", {"card": 2}, "card-isolate", {"card": 3})
    assert kinds.stackable("ecc", {"card": 2}, "ecc", {"card": 2})
    assert not kinds.stackable("bandwidth", {"interface": "eth0"}, "delay", {"interface": "eth0"})
    assert kinds.stackable("bandwidth", {"interface": "eth0"}, "delay", {"interface": "eth1"})
    assert kinds.stackable("loss", {}, "partition", {})
    assert not kinds.stackable("kubelet-stop", {}, "kubelet-stop", {})  # one dead kubelet per node
    assert kinds.stackable("kubelet-stop", {}, "partition", {})


def recording_backends():
    calls = []

    def runner(argv):
        calls.append(argv)
        return ""

    return Backends(Tools("/ip", "/tc", "/nft", "/dcgmi", "/smi"), "eth0", runner), calls


def test_packet_loss_keeps_its_fractions():
    b, calls = recording_backends()
    b.apply(Fault.create("n", validate({"kind": "loss", "params": {"percent": 0.5}, "ttl_seconds": 5})))
    (rule,) = [c for c in calls if "rule" in c]
    assert rule[-7:] == ["numgen", "random", "mod", "1000000", "<", "5000", "drop"]


def test_the_agent_answers_a_retried_create_with_the_fault_it_made():
    b, calls = recording_backends()
    store = Store(b, "n", frozenset(kinds.REGISTRY), None)
    body = {"kind": "bandwidth", "params": {"rate_mbit": 10}, "ttl_seconds": 60, "run_id": "r"}
    status, first = store.add(body, "r/f1")
    assert status == 201
    assert store.add(body, "r/f1") == (200, first)  # the retry: nothing applied twice
    assert len([c for c in calls if "replace" in c]) == 1
    with pytest.raises(FaultError) as err:  # a second root qdisc on eth0 (another key) cannot stack
        store.add({**body, "kind": "delay", "params": {"ms": 5}}, "r/f2")
    assert err.value.status == 409 and f"({first['id']}, run r)" in str(err.value)


def test_only_fading_faults_are_refreshed():
    b, calls = recording_backends()
    b.refresh(Fault.create("n", validate({"kind": "ecc", "target": {"card": 1}, "ttl_seconds": 5})))
    b.refresh(Fault.create("n", validate({"kind": "bandwidth", "params": {"rate_mbit": 1}, "ttl_seconds": 5})))
    assert calls == [["/dcgmi", "test", "--inject", "--gpuid", "1", "-f", "311", "-v", "1"]]


def test_a_kubelet_stop_is_systemctl_stop_and_start_of_the_kubelet():
    calls = []
    b = Backends(Tools("/ip", "/tc", "/nft", "/dcgmi", "/smi", "/bin/systemctl"), "eth0", lambda argv: calls.append(argv))
    f = Fault.create("n", validate({"kind": "kubelet-stop", "ttl_seconds": 60}))
    b.apply(f)
    b.revert(f)
    assert calls == [["/bin/systemctl", "stop", "kubelet.service"], ["/bin/systemctl", "start", "kubelet.service"]]
    without = Backends(Tools("/ip", "/tc", "/nft", None, None), "eth0", lambda argv: calls.append(argv))
    with pytest.raises(FaultError, match="kubelet-stop needs systemctl"):
        without.apply(f)


@pytest.mark.parametrize("params, message", [
    ({"xid": 1.5}, "params.xid: expected an integer from 1 to 1000, got 1.5"),  # once accepted by the agent alone
    ({}, "params.xid: required"),
    ({"xid": 79, "speed": float("nan")}, "params.speed: expected a number from 0 to 1, got nan"),
    ({"xid": 79, "sped": 1}, "params.sped: unknown parameter; expected xid, speed"),
])
def test_an_xid_request_is_checked_by_its_one_declaration(params, message):
    with pytest.raises(FaultError) as err:
        validate({"kind": "xid", "target": {"card": 0}, "params": params, "ttl_seconds": 5})
    assert str(err.value) == message


@pytest.mark.parametrize("kind, params, message", [
    ("loss", {"percent": 5, "ports": [80]}, "params.protocol: ports need a protocol: 'tcp' or 'udp'"),
    ("loss", {"percent": 5, "protocol": "icmp"}, "params.protocol: expected 'tcp' or 'udp', got 'icmp'"),
    ("loss", {"percent": 5, "cidrs": ["10.0.0.0/33"]}, "params.cidrs: not a CIDR: '10.0.0.0/33'"),
    ("loss", {"percent": 5, "ports": [0]}, "params.ports: expected a list of ports 1-65535, got [0]"),
    ("tcp-reset", {"protocol": "udp"}, "params.protocol: a TCP reset needs TCP: expected 'tcp', got 'udp'"),
    ("ecc", {"count": 10**6 + 1}, "params.count: expected an integer from 1 to 1000000, got 1000001"),
    ("ecc", {"type": "mbe"}, "params.type: expected 'dbe' or 'sbe', got 'mbe'"),
])
def test_scope_and_choices_say_what_they_expect(kind, params, message):
    target = {"card": 0} if kinds.get(kind).TARGET == "card" else {}
    with pytest.raises(FaultError) as err:
        validate({"kind": kind, "target": target, "params": params, "ttl_seconds": 5})
    assert str(err.value) == message
