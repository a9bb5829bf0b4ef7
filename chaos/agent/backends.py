"""The node agent's allowlisted operations. Every command is an argument list for a binary resolved
once at start (never a shell string); every value in it passed the protocol's validation.

`Backends` offers the few operations the kinds are made of (a root qdisc, an nftables table of
our own, a DCGM field injection, a GPU drain, an NPU link down, stopping and starting the kubelet,
freezing a pod's cgroup) and dispatches each fault to its kind's module in chaos.agent.kinds,
which says what to run to apply and to revert it, and how to read its effect back (`observe`).
A fault scoped to a network namespace (`target.netns`, e.g. a pod's) runs its commands under
`ip netns exec <ns>`.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from chaos.agent import cgroups, kinds
from chaos.agent.protocol import CONFIRMED, INCONCLUSIVE, MISMATCH
from chaos.agent.schema import FaultError

NETEM_MISSING = "Specified qdisc kind is unknown"


class CommandFailed(Exception):
    def __init__(self, argv: list[str], stderr: str) -> None:
        super().__init__(f"{' '.join(argv)}: {stderr.strip()}")
        self.stderr = stderr


@dataclass
class Tools:
    """Absolute paths of the binaries the agent may run (None: not on this node)."""

    ip: str | None
    tc: str | None
    nft: str | None
    dcgmi: str | None
    nvidia_smi: str | None
    systemctl: str | None = None  # the host's systemd, through its socket mounted into the agent
    hccn_tool: str | None = None  # Ascend's NPU network tool
    nvml: Any = None  # nvidia-ml-py's pynvml, initialised against the node's driver (libnvidia-ml)

    @classmethod
    def find(cls) -> Tools:
        return cls(*(shutil.which(b) for b in ("ip", "tc", "nft", "dcgmi", "nvidia-smi", "systemctl", "hccn_tool")),
                   nvml=_nvml())


def _nvml() -> Any:
    """pynvml, initialised; None where the package or the driver's library is missing (no NVIDIA card)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - ImportError, or NVMLError_LibraryNotFound/DriverNotLoaded: no NVML here
        return None
    return pynvml


Run = Callable[[list[str]], str]
Lookup = Callable[..., list[Any]]  # socket.getaddrinfo's shape


def run(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if proc.returncode != 0:
        raise CommandFailed(argv, proc.stderr)
    return proc.stdout


class Backends:
    def __init__(self, tools: Tools, default_interface: str, runner: Run = run,
                 mountinfo: Path = cgroups.MOUNTINFO, lookup: Lookup = socket.getaddrinfo,
                 pods_cgroup: str | None = None, sys_block: Path = Path("/sys/block")) -> None:
        self.tools = tools
        self.default_interface = default_interface
        self.run = runner
        self.mountinfo = mountinfo
        self.lookup = lookup
        self.pods_cgroup = pods_cgroup  # the kubelet's parent cgroup of pods, where not kubepods(.slice)
        self.sys_block = sys_block

    def resolve(self, host: str, port: int) -> list[str]:
        """The addresses `host` resolves to on this node, as the container runtime would find them."""
        try:
            found = self.lookup(host, port, 0, socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise FaultError("params.registries", f"{host} does not resolve on this node ({exc})") from None
        return sorted({str(info[4][0]) for info in found})

    def _need(self, binary: str | None, name: str, kind: str) -> str:
        if binary is None:
            raise FaultError("kind", f"{kind} needs {name}, which this node does not have", status=501)
        return binary

    def _in_netns(self, target: dict[str, Any], argv: list[str]) -> list[str]:
        if target.get("netns"):
            return [self._need(self.tools.ip, "ip", "a network namespace"), "netns", "exec", target["netns"], *argv]
        return argv

    def interface(self, target: dict[str, Any]) -> str:
        return str(target.get("interface") or self.default_interface)

    # --- tc ----------------------------------------------------------------------------------------
    def tc(self, fault: Any, *qdisc: str) -> None:
        """Replace the interface's root qdisc."""
        tc = self._need(self.tools.tc, "tc", fault.kind)
        argv = self._in_netns(fault.target, [tc, "qdisc", "replace", "dev", self.interface(fault.target), "root",
                                             *qdisc])
        try:
            self.run(argv)
        except CommandFailed as exc:
            if NETEM_MISSING in exc.stderr and qdisc[0] == "netem":
                raise FaultError("kind", f"{fault.kind} needs netem, which this kernel does not have (no sch_netem)",
                                 status=501) from None
            raise

    def tc_observe(self, fault: Any, qdisc: str, rate_mbit: float | None = None) -> tuple[str, str]:
        """Is the interface's root qdisc of this kind (at this rate)? With a rate, the traffic that
        passes it is measured too (its byte counter over half a second): above the limit, it is not
        limiting."""
        tc = self._need(self.tools.tc, "tc", fault.kind)
        dev = self.interface(fault.target)

        def root() -> tuple[str, int]:
            shown = self.run(self._in_netns(fault.target, [tc, "-s", "qdisc", "show", "dev", dev]))
            line, _, rest = shown.partition("\n")
            sent = re.search(r"Sent (\d+) bytes", rest)
            return line, int(sent[1]) if sent else 0

        line, sent = root()
        if f"qdisc {qdisc} " not in line or " root " not in line:
            return MISMATCH, f"{dev}'s root qdisc is not {qdisc}: {line.strip() or 'none'}"
        if rate_mbit is None:
            return CONFIRMED, f"{dev}: {line.strip()}"
        shown_rate = re.search(r" rate (\d+(?:\.\d+)?)([KMGT]?)bit", line)
        mbit = float(shown_rate[1]) * {"": 1e-6, "K": 1e-3, "M": 1.0, "G": 1e3, "T": 1e6}[shown_rate[2]] if shown_rate \
            else None
        if mbit is None or abs(mbit - rate_mbit) > 0.01 * rate_mbit:
            return MISMATCH, f"{dev}'s root tbf is not at {rate_mbit:g} Mbit/s: {line.strip()}"
        time.sleep(0.5)
        measured = (root()[1] - sent) * 8 / 0.5 / 1e6
        if measured > 1.5 * rate_mbit:
            return MISMATCH, f"{dev}: {measured:.3g} Mbit/s pass its {rate_mbit:g} Mbit/s tbf"
        return CONFIRMED, f"{dev}: {line.strip()}; {measured:.3g} Mbit/s measured passing it"

    def tc_revert(self, fault: Any) -> None:
        tc = self._need(self.tools.tc, "tc", fault.kind)
        try:
            self.run(self._in_netns(fault.target, [tc, "qdisc", "del", "dev", self.interface(fault.target), "root"]))
        except CommandFailed as exc:
            if "No such file" not in exc.stderr and "Cannot find" not in exc.stderr:
                raise  # anything but "already gone"

    # --- nft ---------------------------------------------------------------------------------------
    def _table(self, fault: Any) -> str:
        return f"kilocard_{fault.id}"

    def _nft(self, fault: Any, *args: str) -> None:
        nft = self._need(self.tools.nft, "nft", fault.kind)
        self.run(self._in_netns(fault.target, [nft, *args]))

    def nft_table(self, fault: Any, chains: dict[str, list[str]], protocol: str | None = None,
                  both_ends: bool = False, scope: dict[str, Any] | None = None) -> None:
        """A table of the fault's own, with one chain per hook ("input", "output") ending in the
        given statement, on the interface and the fault's scope (cidrs, ports; `protocol` matched
        even without ports, as a TCP reset needs; `scope` instead of the fault's parameters when
        the kind works it out). Ports are the far end's (traffic to them on output, from them on
        input), or with `both_ends` either end's, so a node that listens on the port is hit as
        well as one that connects to it. Half-made: removed."""
        self._nft(fault, "add", "table", "inet", self._table(fault))
        try:
            for hook, verdict in chains.items():
                self._nft_rules(fault, hook, verdict, protocol, both_ends, fault.params if scope is None else scope)
        except BaseException:
            self.nft_revert(fault)
            raise

    def nft_observe(self, fault: Any, statement: str) -> tuple[str, str]:
        """Is the fault's table in the ruleset, with its statement in every chain?"""
        nft = self._need(self.tools.nft, "nft", fault.kind)
        try:
            listed = self.run(self._in_netns(fault.target, [nft, "list", "table", "inet", self._table(fault)]))
        except CommandFailed as exc:
            if "No such file" in exc.stderr:
                return MISMATCH, f"table inet {self._table(fault)} is not in the ruleset"
            raise
        chains = listed.count("hook ")
        rules = listed.count(statement)
        if chains and rules >= chains:
            return CONFIRMED, f"table inet {self._table(fault)}: {chains} chain(s), {rules} rule(s) '{statement}'"
        return MISMATCH, f"table inet {self._table(fault)} has {chains} chain(s) but {rules} rule(s) '{statement}'"

    def _nft_rules(self, fault: Any, hook: str, verdict: list[str], protocol: str | None, both_ends: bool,
                   p: dict[str, Any]) -> None:
        table, chain = self._table(fault), hook
        self._nft(fault, "add", "chain", "inet", table, chain, f"{{ type filter hook {hook} priority 0 ; }}")
        iface = ["oifname" if hook == "output" else "iifname", self.interface(fault.target)]
        address = "daddr" if hook == "output" else "saddr"
        cidrs = p.get("cidrs") or [None]
        ports = p.get("ports") or []
        far = "dport" if hook == "output" else "sport"
        ends = (far, "sport" if far == "dport" else "dport") if both_ends else (far,)
        if both_ends and ports:  # the RST a reject answers with leaves from the port: let it out
            self._nft(fault, "add", "rule", "inet", table, chain, *iface, "tcp", "flags", "&", "rst", "==", "rst",
                      "accept")
        for cidr in cidrs:
            match = list(iface)
            if cidr:
                family = "ip6" if ":" in cidr else "ip"
                match += [family, address, cidr]
            if not ports:
                self._nft(fault, "add", "rule", "inet", table, chain, *match,
                          *(["meta", "l4proto", protocol] if protocol else []), *verdict)
            for end in ends if ports else ():
                self._nft(fault, "add", "rule", "inet", table, chain, *match, p.get("protocol") or protocol, end,
                          "{ " + ", ".join(str(x) for x in ports) + " }", *verdict)

    def nft_revert(self, fault: Any) -> None:
        try:
            self._nft(fault, "delete", "table", "inet", self._table(fault))
        except CommandFailed as exc:
            if "No such file" not in exc.stderr:
                raise

    # --- dcgm / nvidia-smi -------------------------------------------------------------------------
    def dcgm_inject(self, fault: Any, field: int, value: int) -> None:
        dcgmi = self._need(self.tools.dcgmi, "dcgmi", fault.kind)
        self.run([dcgmi, "test", "--inject", "--gpuid", str(fault.target["card"]), "-f", str(field), "-v", str(value)])

    def drain(self, fault: Any, mode: str) -> None:
        smi = self._need(self.tools.nvidia_smi, "nvidia-smi", fault.kind)
        bus = self.run([smi, "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", str(fault.target["card"])])
        self.run([smi, "drain", "-p", bus.strip(), "-m", mode])

    def npu_link(self, fault: Any, down: bool) -> None:
        if fault.params.get("type", "chip") != "network":
            raise FaultError("params.type", "no tool injects a chip fault into an Ascend NPU's DCMI on a real node; "
                                            "send it through ClusterD (npu-fault via: clusterd)", status=501)
        tool = self._need(self.tools.hccn_tool, "hccn_tool", fault.kind)
        chip = str(fault.target["card"])
        self.run([tool, "-i", chip, "-link", "-s", "down"] if down else [tool, "-i", chip, "-cfg", "recovery"])

    # --- NVML ------------------------------------------------------------------------------------
    def _nvml(self, fault: Any, call: str, *args: Any) -> Any:
        """One NVML call on the fault's card; NVML's refusal is a failed command, as a tool's is."""
        nvml = self._need(self.tools.nvml, "NVML (the driver's libnvidia-ml and nvidia-ml-py)", fault.kind)
        try:
            card = nvml.nvmlDeviceGetHandleByIndex(int(fault.target["card"]))
            return getattr(nvml, call)(card, *args)
        except nvml.NVMLError as exc:
            raise CommandFailed(["nvml", call, f"card {fault.target['card']}", *map(str, args)], str(exc)) from None

    def _cap(self, fault: Any, fraction: float) -> int:
        """The power limit (mW) or graphics clock (MHz) that keeps `fraction` of the card's speed."""
        if fault.params.get("via", "power") == "power":
            low, _high = self._nvml(fault, "nvmlDeviceGetPowerManagementLimitConstraints")
            return max(int(low), int(fraction * self._nvml(fault, "nvmlDeviceGetPowerManagementDefaultLimit")))
        top = self._nvml(fault, "nvmlDeviceGetMaxClockInfo", self.tools.nvml.NVML_CLOCK_GRAPHICS)
        return max(1, int(fraction * top))

    def nvml_throttle(self, fault: Any, fraction: float) -> None:
        """Cap the card at `fraction` of its speed. The power limit in force is read once, at the
        first apply, and kept with the fault (the agent's state file keeps it across a restart)."""
        cap = self._cap(fault, fraction)
        if fault.params.get("via", "power") == "power":
            if "power_limit_mw" not in fault.saved:
                fault.saved["power_limit_mw"] = int(self._nvml(fault, "nvmlDeviceGetPowerManagementLimit"))
            self._nvml(fault, "nvmlDeviceSetPowerManagementLimit", cap)
        else:
            self._nvml(fault, "nvmlDeviceSetGpuLockedClocks", cap, cap)

    def nvml_unthrottle(self, fault: Any) -> None:
        if fault.params.get("via", "power") == "power":
            if "power_limit_mw" in fault.saved:  # else the apply changed nothing
                self._nvml(fault, "nvmlDeviceSetPowerManagementLimit", fault.saved["power_limit_mw"])
        else:
            self._nvml(fault, "nvmlDeviceResetGpuLockedClocks")

    def nvml_throttled(self, fault: Any, fraction: float) -> tuple[str, str]:
        """The card's limit (or clock) read back against the cap, with NVML's clock event reasons."""
        nvml, cap = self.tools.nvml, self._cap(fault, fraction)
        reasons = self._nvml(fault, "nvmlDeviceGetCurrentClocksEventReasons"
                             if hasattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons")
                             else "nvmlDeviceGetCurrentClocksThrottleReasons")
        where = f"card {fault.target['card']}"
        if fault.params.get("via", "power") == "power":
            limit = int(self._nvml(fault, "nvmlDeviceGetPowerManagementLimit"))
            shown = f"{where}: power limit {limit / 1000:g} W (cap {cap / 1000:g} W), clock event reasons {reasons:#x}"
            return (CONFIRMED if limit <= cap else MISMATCH), shown
        clock = int(self._nvml(fault, "nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_GRAPHICS))
        shown = f"{where}: graphics clock {clock} MHz (cap {cap} MHz), clock event reasons {reasons:#x}"
        if clock > cap * 1.02:
            return MISMATCH, shown
        if self._nvml(fault, "nvmlDeviceGetUtilizationRates").gpu == 0:
            return INCONCLUSIVE, shown + "; the card is idle, and an idle card's clock is low anyway"
        return CONFIRMED, shown

    # --- reads capped --------------------------------------------------------------------------
    def _pods_root(self) -> cgroups.IoCgroup:
        names = (self.pods_cgroup,) if self.pods_cgroup else cgroups.PODS_ROOTS
        root = cgroups.pods_root(names, self.mountinfo)
        if root is None:
            raise FaultError("kind", f"no pods' cgroup ({' or '.join(names)}) below a hierarchy with the io or "
                                     "blkio controller on this node", status=501)
        return root

    def _devices(self, fault: Any) -> list[str]:
        return list(fault.params.get("devices") or []) or cgroups.disks(self.sys_block)

    def _capped_groups(self, root: cgroups.IoCgroup) -> list[cgroups.IoCgroup]:
        """Where a cap must be written: v2's io.max holds for the whole subtree, so the root alone;
        v1's blkio throttle holds only for a cgroup's own processes, so every cgroup below it."""
        if root.version == 2:
            return [root]
        return [cgroups.IoCgroup(Path(directory), 1) for directory, _dirs, _files in os.walk(root.path)]

    def io_throttle(self, fault: Any, bytes_per_second: int) -> None:
        """Cap the reads of every pod on the node from the devices. Each cgroup's caps in force are
        read the first time it is capped and kept with the fault (restored exactly on revert); on
        cgroup v1 the agent re-applies while active, so a pod started since is capped too (before
        its container reads its weights: its image is pulled first). Half-made: undone."""
        root, devices = self._pods_root(), self._devices(fault)
        if not devices:
            raise FaultError("params.devices", "this node has no disk to cap: name the devices (MAJ:MIN)")
        saved = fault.saved.setdefault("caps_before", {})
        try:
            for group in self._capped_groups(root):
                key = str(group.path.relative_to(root.path))
                try:
                    if key not in saved:
                        before = group.read_caps()
                        saved[key] = {d: before.get(d) for d in devices}
                    for device in devices:
                        group.cap(device, bytes_per_second)
                except FileNotFoundError:
                    continue  # a pod that ended meanwhile: nothing to cap
        except OSError as exc:
            self.io_unthrottle(fault)
            raise FaultError("params.devices", f"{root.path}: {exc}", status=500) from None

    def io_unthrottle(self, fault: Any) -> None:
        saved = fault.saved.get("caps_before") or {}
        if not saved:
            return  # the apply changed nothing
        root = self._pods_root()
        for key, caps in saved.items():
            group = cgroups.IoCgroup(root.path / key, root.version)
            for device, before in caps.items():
                try:
                    group.cap(device, before)
                except FileNotFoundError:
                    break  # the pod ended: its cgroup went with it
                except OSError as exc:
                    if exc.errno != errno.ENODEV:  # a device gone since: nothing left to lift
                        raise

    def io_throttled(self, fault: Any, bytes_per_second: int) -> tuple[str, str]:
        root = self._pods_root()
        # The devices the apply capped (kept with what each cgroup held before), else the ones it would.
        devices = sorted({d for caps in (fault.saved.get("caps_before") or {}).values() for d in caps}) \
            or self._devices(fault)
        groups = self._capped_groups(root)
        wrong = []
        for group in groups:
            try:
                caps = group.read_caps()
            except FileNotFoundError:
                continue
            wrong += [f"{group.path} {d} {caps.get(d) or 'uncapped'}" for d in devices
                      if caps.get(d) != bytes_per_second]
        where = f"{root.path} (cgroup v{root.version}, {len(groups)} cgroup(s))"
        if wrong:
            return MISMATCH, f"{where}: not held at {bytes_per_second} B/s: {'; '.join(wrong[:5])}"
        return CONFIRMED, f"{where}: reads of {', '.join(devices)} held at {bytes_per_second} B/s"

    # --- cgroups ---------------------------------------------------------------------------------
    def _cgroup(self, fault: Any) -> cgroups.Cgroup | None:
        return cgroups.find(fault.target["pod_uid"], fault.target.get("container_id"), self.mountinfo)

    def stall(self, fault: Any, stalled: bool) -> None:
        """Freeze (or thaw) the target's cgroup, or SIGSTOP (SIGCONT) every process in it. Gone
        on revert: reverted (the container restarted); gone on apply: refused, nothing to stall."""
        group = self._cgroup(fault)
        if group is None:
            if not stalled:
                return
            container = fault.target.get("container_id")
            raise FaultError("target", f"no cgroup for pod {fault.target['pod_uid']}"
                                       f"{' container ' + container if container else ''} on this node", status=404)
        if stalled and os.getpid() in group.procs():
            raise FaultError("target", f"cgroup {group.path} holds this agent: frozen, nothing would thaw it",
                             status=403)
        freeze = fault.params.get("method", "freeze") == "freeze"
        try:
            if freeze:
                group.freeze(stalled)
            elif stalled and not cgroups.signal_all(group, signal.SIGSTOP):
                raise FaultError("target", f"cgroup {group.path} has no process to stop", status=409)
            elif not stalled:
                cgroups.signal_all(group, signal.SIGCONT)
        except FileNotFoundError:  # the container ended meanwhile: nothing left to stall, or to thaw
            if stalled:
                raise FaultError("target", f"cgroup {group.path} went away", status=404) from None
        except OSError as exc:
            if stalled:  # half-made: undone before it is refused, so nothing stays stopped unrecorded
                self.stall(fault, stalled=False)
            raise FaultError("target", f"cgroup {group.path}: {exc}", status=500) from None

    def stalled(self, fault: Any) -> tuple[str, str]:
        group = self._cgroup(fault)
        if group is None:
            return MISMATCH, "the cgroup is gone (the container ended or restarted)"
        if fault.params.get("method", "freeze") == "freeze":
            state = group.frozen()
            where = f"{group.path} (cgroup v{group.version})"
            if state == "frozen":
                return CONFIRMED, f"{where} is frozen"
            if state == "freezing":
                return INCONCLUSIVE, f"{where} is still freezing"
            return MISMATCH, f"{where} is not frozen"
        states = {pid: s for pid in group.procs() if (s := cgroups.stopped(pid)) is not None}  # exited: not counted
        running = sorted(pid for pid, s in states.items() if not s)
        if not states:
            return MISMATCH, f"{group.path} holds no process"
        if running:
            return MISMATCH, f"{len(running)} of {len(states)} process(es) in {group.path} run (pid {running[0]})"
        return CONFIRMED, f"all {len(states)} process(es) in {group.path} are stopped"

    # --- systemd ----------------------------------------------------------------------------------
    def kubelet(self, action: Literal["stop", "start"]) -> None:
        systemctl = self._need(self.tools.systemctl, "systemctl", "kubelet-stop")
        self.run([systemctl, action, "kubelet.service"])

    def kubelet_stopped(self) -> tuple[str, str]:
        """Stopped only when systemd says so: a bus it cannot reach, or no such unit, tells nothing."""
        systemctl = self._need(self.tools.systemctl, "systemctl", "kubelet-stop")
        state = self.run([systemctl, "show", "--property", "ActiveState", "--value", "kubelet.service"]).strip()
        if state in ("inactive", "failed"):
            return CONFIRMED, f"kubelet.service is {state}"
        if state in ("active", "activating", "reloading"):
            return MISMATCH, f"kubelet.service is {state}"
        return INCONCLUSIVE, f"kubelet.service's state is {state or 'not known'}"

    # --- dispatch ----------------------------------------------------------------------------------
    def apply(self, fault: Any) -> None:
        kinds.get(fault.kind).apply(fault, self)

    def refresh(self, fault: Any) -> None:
        """Re-apply what fades while active (a DCGM injection the next real sample overwrites)."""
        kind = kinds.get(fault.kind)
        if kind.REFRESH:
            kind.apply(fault, self)

    def revert(self, fault: Any) -> None:
        kinds.get(fault.kind).revert(fault, self)

    def observe(self, fault: Any) -> tuple[str, str, bool]:
        """Read the fault's effect back: (confirmed | mismatch | inconclusive, evidence, final: no
        read-back exists, so asking again tells nothing more)."""
        kind = kinds.get(fault.kind)
        if not hasattr(kind, "observe"):
            return INCONCLUSIVE, f"{fault.kind} has no read-back on a node", True
        try:
            status, evidence = kind.observe(fault, self)
            return str(status), str(evidence), False
        except (CommandFailed, FaultError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
            return INCONCLUSIVE, f"could not read {fault.kind} back: {exc}", False
