"""The node agent's allowlisted operations. Every command is an argument list for a binary resolved
once at start (never a shell string); every value in it passed the protocol's validation.

`Backends` offers the few operations the kinds are made of (a root qdisc, an nftables table of
our own, a DCGM field injection, a GPU drain, an NPU link down, stopping and starting the kubelet) and dispatches
each fault to its kind's module in chaos.agent.kinds, which says what to run to apply and to
revert it. A fault scoped to a network
namespace (`target.netns`, e.g. a pod's) runs its commands under `ip netns exec <ns>`.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from chaos.agent import kinds
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

    @classmethod
    def find(cls) -> Tools:
        return cls(*(shutil.which(b) for b in ("ip", "tc", "nft", "dcgmi", "nvidia-smi", "systemctl", "hccn_tool")))


Run = Callable[[list[str]], str]


def run(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if proc.returncode != 0:
        raise CommandFailed(argv, proc.stderr)
    return proc.stdout


class Backends:
    def __init__(self, tools: Tools, default_interface: str, runner: Run = run) -> None:
        self.tools = tools
        self.default_interface = default_interface
        self.run = runner

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

    def nft_table(self, fault: Any, chains: dict[str, list[str]]) -> None:
        """A table of the fault's own, with one chain per hook ("input", "output") ending in the
        given statement, on the interface and the fault's scope (cidrs, ports). Half-made: removed."""
        self._nft(fault, "add", "table", "inet", self._table(fault))
        try:
            for hook, verdict in chains.items():
                self._nft_rules(fault, hook, verdict)
        except BaseException:
            self.nft_revert(fault)
            raise

    def _nft_rules(self, fault: Any, hook: str, verdict: list[str]) -> None:
        table, chain = self._table(fault), hook
        self._nft(fault, "add", "chain", "inet", table, chain, f"{{ type filter hook {hook} priority 0 ; }}")
        iface = ["oifname" if hook == "output" else "iifname", self.interface(fault.target)]
        p = fault.params
        address = "daddr" if hook == "output" else "saddr"
        cidrs = p.get("cidrs") or [None]
        ports = p.get("ports") or []
        for cidr in cidrs:
            match = list(iface)
            if cidr:
                family = "ip6" if ":" in cidr else "ip"
                match += [family, address, cidr]
            if ports:
                port_dir = "dport" if hook == "output" else "sport"
                match += [p["protocol"], port_dir, "{ " + ", ".join(str(x) for x in ports) + " }"]
            self._nft(fault, "add", "rule", "inet", table, chain, *match, *verdict)

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

    # --- systemd ----------------------------------------------------------------------------------
    def kubelet(self, action: Literal["stop", "start"]) -> None:
        systemctl = self._need(self.tools.systemctl, "systemctl", "kubelet-stop")
        self.run([systemctl, action, "kubelet.service"])

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
