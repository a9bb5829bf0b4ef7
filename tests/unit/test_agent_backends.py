"""The agent's GPU backends build these exact argument lists (no GPU here to run them on), and
refuse clearly on a node without the tools. The network backends run for real in tests/netns."""

import pytest

from chaos.agent.backends import Backends, Tools
from chaos.agent.protocol import Fault, FaultError, validate


def fault(kind, target, **params):
    return Fault.create("n", validate({"kind": kind, "target": target, "params": params, "ttl_seconds": 60}))


def backends(**tools):
    calls = []

    def runner(argv):
        calls.append(argv)
        return "00000000:18:00.0\n" if "--query-gpu=pci.bus_id" in argv else ""

    paths = {"ip": None, "tc": None, "nft": None, "dcgmi": None, "nvidia_smi": None, **tools}
    return Backends(Tools(**paths), "eth0", runner), calls


def test_ecc_is_injected_by_field_id_and_cleared_on_revert():
    b, calls = backends(dcgmi="/usr/bin/dcgmi")
    f = fault("ecc", {"card": 3}, count=2)
    b.apply(f)
    b.revert(f)
    assert calls == [["/usr/bin/dcgmi", "test", "--inject", "--gpuid", "3", "-f", "311", "-v", "2"],
                     ["/usr/bin/dcgmi", "test", "--inject", "--gpuid", "3", "-f", "311", "-v", "0"]]


def test_xid_and_card_drain():
    b, calls = backends(dcgmi="/d", nvidia_smi="/s")
    b.apply(fault("xid", {"card": 1}, xid=79))
    b.apply(fault("card-isolate", {"card": 5}))
    assert calls == [["/d", "test", "--inject", "--gpuid", "1", "-f", "230", "-v", "79"],
                     ["/s", "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", "5"],
                     ["/s", "drain", "-p", "00000000:18:00.0", "-m", "1"]]


def test_network_commands_in_a_pods_namespace():
    b, calls = backends(ip="/ip", tc="/tc")
    b.apply(fault("bandwidth", {"netns": "pod-ns", "interface": "eth1"}, rate_mbit=100))
    assert calls == [["/ip", "netns", "exec", "pod-ns", "/tc", "qdisc", "replace", "dev", "eth1", "root", "tbf",
                      "rate", "100mbit", "burst", "125000b", "latency", "400ms"]]


@pytest.mark.parametrize("kind, target, params, tool", [
    ("ecc", {"card": 0}, {}, "dcgmi"), ("card-isolate", {"card": 0}, {}, "nvidia-smi"),
    ("loss", {}, {"percent": 5}, "nft"), ("bandwidth", {}, {"rate_mbit": 1}, "tc")])
def test_missing_tools_are_a_clear_501(kind, target, params, tool):
    b, calls = backends()
    with pytest.raises(FaultError) as err:
        b.apply(fault(kind, target, **params))
    assert err.value.status == 501 and f"needs {tool}" in str(err.value)
    assert calls == []
