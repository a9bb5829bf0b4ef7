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


class FakeNvml:
    """pynvml's calls the throttle makes, over one card's state (no GPU here): the library
    boundary, as the runner above is for the command-line tools."""

    NVML_CLOCK_GRAPHICS = 0

    class NVMLError(Exception):
        pass

    def __init__(self, limit_mw=600_000):
        self.limit, self.default, self.low, self.high = limit_mw, 700_000, 200_000, 700_000
        self.locked, self.util, self.calls = None, 90, []

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"card{i}"

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h):
        return [self.low, self.high]

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return self.default

    def nvmlDeviceGetPowerManagementLimit(self, h):
        return self.limit

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        if not self.low <= mw <= self.high:
            raise self.NVMLError("Invalid Argument")
        self.calls.append(("power", h, mw))
        self.limit = mw

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980

    def nvmlDeviceSetGpuLockedClocks(self, h, low, high):
        self.calls.append(("lock", h, low, high))
        self.locked = high

    def nvmlDeviceResetGpuLockedClocks(self, h):
        self.calls.append(("reset", h))
        self.locked = None

    def nvmlDeviceGetClockInfo(self, h, kind):
        return min(1980, self.locked or 1980) if self.util else 345

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x4 if self.limit < self.default else 0

    def nvmlDeviceGetUtilizationRates(self, h):
        return type("Rates", (), {"gpu": self.util})()


def test_a_power_throttle_caps_the_limit_and_restores_the_one_read_before_exactly():
    nvml = FakeNvml(limit_mw=650_000)  # someone's own limit, not the default: it must come back
    b, _ = backends(nvml=nvml)
    f = fault("throttle", {"card": 2}, fraction=0.5)
    b.apply(f)
    assert nvml.limit == 350_000 and f.saved == {"power_limit_mw": 650_000}
    assert b.observe(f)[:2] == ("confirmed", "card 2: power limit 350 W (cap 350 W), clock event reasons 0x4")
    b.refresh(f)  # re-applied while active: the limit read first stays the one kept
    assert f.saved == {"power_limit_mw": 650_000}
    nvml.limit = 700_000  # lifted behind the agent's back
    assert b.observe(f)[0] == "mismatch"
    b.revert(f)
    assert nvml.limit == 650_000
    # Never under the card's minimum: the cap is clamped, not refused.
    low = fault("throttle", {"card": 0}, fraction=0.05)
    b.apply(low)
    assert nvml.limit == 200_000


def test_a_clock_throttle_locks_and_resets_and_an_idle_card_proves_nothing():
    nvml = FakeNvml()
    b, _ = backends(nvml=nvml)
    f = fault("throttle", {"card": 1}, fraction=0.6, via="clocks")
    b.apply(f)
    assert nvml.calls == [("lock", "card1", 1188, 1188)]
    assert b.observe(f)[0] == "confirmed"
    nvml.util = 0
    assert b.observe(f)[0] == "inconclusive"
    b.revert(f)
    assert nvml.calls[-1] == ("reset", "card1") and nvml.locked is None


def test_a_ramp_falls_from_full_speed_to_its_floor():
    from chaos.agent.kinds import throttle

    ramp = {"fraction": 0.4, "ramp_seconds": 100}
    assert [round(throttle.fraction_at(ramp, t), 3) for t in (-5, 0, 50, 100, 500)] == [1.0, 1.0, 0.7, 0.4, 0.4]
    assert throttle.fraction_at({"fraction": 0.4}, 0) == 0.4


def test_a_throttle_without_nvml_is_refused_and_nvmls_refusal_is_a_failed_command():
    from chaos.agent.backends import CommandFailed

    b, _ = backends()
    with pytest.raises(FaultError, match="needs NVML") as refused:
        b.apply(fault("throttle", {"card": 0}))
    assert refused.value.status == 501
    nvml = FakeNvml()
    nvml.low = 500_000  # a card whose constraints refuse the cap asked
    nvml.nvmlDeviceGetPowerManagementLimitConstraints = lambda h: [100_000, 700_000]
    b, _ = backends(nvml=nvml)
    with pytest.raises(CommandFailed, match="nvmlDeviceSetPowerManagementLimit.*Invalid Argument"):
        b.apply(fault("throttle", {"card": 0}, fraction=0.3))


def test_a_pull_block_refuses_the_registrys_addresses_as_resolved_once_and_deletes_only_its_table():
    looked_up = []

    def lookup(host, port, family, kind):
        looked_up.append((host, port))
        return {"registry-1.docker.io": [(2, 1, 6, "", ("198.51.100.7", port)), (10, 1, 6, "", ("2001:db8::7", port, 0, 0))],
                "harbor.internal": [(2, 1, 6, "", ("10.1.2.3", port))]}[host]

    calls = []
    b = Backends(Tools(ip=None, tc=None, nft="/nft", dcgmi=None, nvidia_smi=None), "eth0",
                 lambda argv: calls.append(argv) or "", lookup=lookup)
    f = fault("pull-block", {}, registries=["docker.io", "harbor.internal:5000"])
    b.apply(f)
    b.apply(f)  # re-applied after an agent restart: the addresses kept, not looked up again
    assert looked_up == [("registry-1.docker.io", 443), ("harbor.internal", 5000)]
    assert f.saved["addresses"] == {"docker.io": ["198.51.100.7", "2001:db8::7"], "harbor.internal:5000": ["10.1.2.3"]}
    table = f"kilocard_{f.id}"
    rules = [c for c in calls[:5] if c[1:3] == ["add", "rule"]]
    assert [r[r.index("daddr") - 1:] for r in rules] == [
        ["ip", "daddr", "10.1.2.3/32", "tcp", "dport", "{ 443, 5000 }", "reject", "with", "tcp", "reset"],
        ["ip", "daddr", "198.51.100.7/32", "tcp", "dport", "{ 443, 5000 }", "reject", "with", "tcp", "reset"],
        ["ip6", "daddr", "2001:db8::7/128", "tcp", "dport", "{ 443, 5000 }", "reject", "with", "tcp", "reset"]]
    assert all(r[:6] == ["/nft", "add", "rule", "inet", table, "output"] and "oifname" in r for r in rules)
    calls.clear()
    b.revert(f)
    assert calls == [["/nft", "delete", "table", "inet", table]]


def test_a_registry_that_does_not_resolve_is_refused_naming_it():
    def lookup(host, port, family, kind):
        raise OSError(-2, "Name or service not known")

    b = Backends(Tools(ip=None, tc=None, nft="/nft", dcgmi=None, nvidia_smi=None), "eth0", lambda argv: "",
                 lookup=lookup)
    with pytest.raises(FaultError) as refused:
        b.apply(fault("pull-block", {}, registries=["nvcr.io"]))
    assert refused.value.field == "params.registries" and "nvcr.io does not resolve" in str(refused.value)


def test_cgroup_v2_caps_are_read_and_written_as_io_max_says_and_only_disks_are_capped_by_default(tmp_path):
    from chaos.agent import cgroups

    mount = tmp_path / "cgroup"
    (mount / "kubepods.slice").mkdir(parents=True)
    (mount / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"30 23 0:26 / {mount} rw,nosuid - cgroup2 cgroup2 rw\n")
    root = cgroups.pods_root(mountinfo=mountinfo)
    assert root == cgroups.IoCgroup(mount / "kubepods.slice", 2)
    (root.path / "io.max").write_text("259:0 rbps=150000000 wbps=max riops=max wiops=max\n8:0 rbps=max wbps=10\n")
    assert root.read_caps() == {"259:0": 150_000_000}
    root.cap("8:0", 4_000_000)
    assert (root.path / "io.max").read_text() == "8:0 rbps=4000000"  # the kernel merges it into its table
    root.cap("8:0", None)
    assert (root.path / "io.max").read_text() == "8:0 rbps=max"
    block = tmp_path / "block"
    for name, dev in (("nvme0n1", "259:0"), ("sda", "8:0"), ("loop3", "7:3"), ("ram0", "1:0"), ("dm-0", "253:0")):
        (block / name).mkdir(parents=True)
        (block / name / "dev").write_text(dev + "\n")
    assert cgroups.disks(block) == ["253:0", "259:0", "8:0"]


def test_slow_weights_caps_the_pods_root_once_on_v2_and_restores_what_it_found(tmp_path):
    mount = tmp_path / "cgroup"
    (mount / "kubepods" / "pod1").mkdir(parents=True)
    (mount / "cgroup.controllers").write_text("io\n")
    io_max = mount / "kubepods" / "io.max"
    io_max.write_text("259:0 rbps=9000000 wbps=max riops=max wiops=max\n")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"30 23 0:26 / {mount} rw - cgroup2 cgroup2 rw\n")
    b = Backends(Tools(ip=None, tc=None, nft=None, dcgmi=None, nvidia_smi=None), "eth0", lambda argv: "",
                 mountinfo=mountinfo)
    f = fault("io-throttle", {}, rate_mbps=150, devices=["259:0"])
    b.apply(f)
    assert io_max.read_text() == "259:0 rbps=150000000" and not (mount / "kubepods" / "pod1" / "io.max").exists()
    assert f.saved["caps_before"] == {".": {"259:0": 9_000_000}}
    io_max.write_text("259:0 rbps=150000000 wbps=max riops=max wiops=max\n")  # as the kernel shows it
    assert b.observe(f)[0] == "confirmed"
    b.revert(f)
    assert io_max.read_text() == "259:0 rbps=9000000"


def test_a_dns_failure_drops_port_53_over_udp_and_tcp_to_its_resolvers_only():
    b, calls = backends(nft="/nft", ip="/ip")
    f = fault("dns-block", {"netns": "pod-ns"}, cidrs=["10.96.0.10/32"], answer="reject")
    b.apply(f)
    rule = calls[-1]
    assert rule[:5] == ["/ip", "netns", "exec", "pod-ns", "/nft"], rule  # in the pod's namespace
    assert rule[-10:] == ["ip", "daddr", "10.96.0.10/32", "meta", "l4proto", "{ tcp, udp }", "th", "dport", "53",
                          "reject"], rule
    b, calls = backends(nft="/nft")
    b.apply(fault("dns-block", {}))
    assert calls[-1][-7:] == ["meta", "l4proto", "{ tcp, udp }", "th", "dport", "53", "drop"], calls[-1]
