"""The node agent's allowlisted operations. Every command is an argument list for a binary resolved
once at start (never a shell string); every value in it passed the protocol's validation.

    bandwidth   tc qdisc replace dev IF root tbf rate <r>mbit ...        revert: tc qdisc del dev IF root
    delay       tc qdisc replace dev IF root netem delay <ms>ms ...     (refused where the kernel has no netem)
    loss        nft: table inet kilocard_<id>, output chain, `numgen random mod 1000000 < p x 10^4 drop`
    partition   nft: table inet kilocard_<id>, input and output chains, `drop`
                revert: nft delete table inet kilocard_<id>
    ecc, xid    dcgmi test --inject (field 311 volatile DBE / 310 SBE, 230 XID), re-injected every
                second while active, since the next real sample overwrites an injected one
    card-isolate  nvidia-smi drain -p <pci bus id> -m 1              revert: -m 0

A fault scoped to a network namespace (`target.netns`, e.g. a pod's) runs its commands under
`ip netns exec <ns>`.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chaos.agent.protocol import FaultError

ECC_FIELDS = {"dbe": 311, "sbe": 310}  # DCGM_FI_DEV_ECC_{DBE,SBE}_VOL_TOTAL
XID_FIELD = 230  # DCGM_FI_DEV_XID_ERRORS
NETEM_MISSING = "Specified qdisc kind is unknown"
LOSS_SCALE = 1_000_000


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

    @classmethod
    def find(cls) -> Tools:
        return cls(*(shutil.which(b) for b in ("ip", "tc", "nft", "dcgmi", "nvidia-smi")))


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
    def _tc(self, fault: Any, *qdisc: str) -> None:
        tc = self._need(self.tools.tc, "tc", fault.kind)
        argv = self._in_netns(fault.target, [tc, "qdisc", "replace", "dev", self.interface(fault.target), "root",
                                             *qdisc])
        try:
            self.run(argv)
        except CommandFailed as exc:
            if NETEM_MISSING in exc.stderr and qdisc[0] == "netem":
                raise FaultError("kind", "delay needs netem, which this kernel does not have (no sch_netem)",
                                 status=501) from None
            raise

    def _tc_revert(self, fault: Any) -> None:
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

    def _nft_revert(self, fault: Any) -> None:
        try:
            self._nft(fault, "delete", "table", "inet", self._table(fault))
        except CommandFailed as exc:
            if "No such file" not in exc.stderr:
                raise

    # --- dcgm / nvidia-smi -------------------------------------------------------------------------
    def dcgm_inject(self, fault: Any) -> None:
        """(Re-)inject the fault's DCGM field; called again every second while active."""
        dcgmi = self._need(self.tools.dcgmi, "dcgmi", fault.kind)
        card = str(fault.target["card"])
        if fault.kind == "ecc":
            field, value = ECC_FIELDS[fault.params.get("type", "dbe")], fault.params.get("count", 1)
        else:
            field, value = XID_FIELD, int(fault.params["xid"])
        self.run([dcgmi, "test", "--inject", "--gpuid", card, "-f", str(field), "-v", str(value)])

    def _dcgm_revert(self, fault: Any) -> None:
        dcgmi = self._need(self.tools.dcgmi, "dcgmi", fault.kind)
        field = ECC_FIELDS[fault.params.get("type", "dbe")] if fault.kind == "ecc" else XID_FIELD
        self.run([dcgmi, "test", "--inject", "--gpuid", str(fault.target["card"]), "-f", str(field), "-v", "0"])

    def _drain(self, fault: Any, mode: str) -> None:
        smi = self._need(self.tools.nvidia_smi, "nvidia-smi", fault.kind)
        bus = self.run([smi, "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", str(fault.target["card"])])
        self.run([smi, "drain", "-p", bus.strip(), "-m", mode])

    # --- dispatch ----------------------------------------------------------------------------------
    def apply(self, fault: Any) -> None:
        kind, p = fault.kind, fault.params
        if kind == "bandwidth":
            rate = f"{p['rate_mbit']:g}mbit"
            burst = f"{max(1600, int(p['rate_mbit'] * 1250))}b"  # 10 ms of traffic (Mbit/s x 1250 B), at least a packet
            self._tc(fault, "tbf", "rate", rate, "burst", burst, "latency", "400ms")
        elif kind == "delay":
            jitter = [f"{p['jitter_ms']:g}ms"] if p.get("jitter_ms") else []
            self._tc(fault, "netem", "delay", f"{p['ms']:g}ms", *jitter)
        elif kind in ("loss", "partition"):
            self._nft(fault, "add", "table", "inet", self._table(fault))
            try:
                if kind == "loss":
                    # In millionths, so 0.5 % is 5000 of 1000000 rather than int(0.5) = 0 of 100.
                    share = str(round(float(p["percent"]) * LOSS_SCALE / 100))
                    self._nft_rules(fault, "output", ["numgen", "random", "mod", str(LOSS_SCALE), "<", share, "drop"])
                else:
                    self._nft_rules(fault, "output", ["drop"])
                    self._nft_rules(fault, "input", ["drop"])
            except BaseException:
                self._nft_revert(fault)
                raise
        elif kind in ("ecc", "xid"):
            self.dcgm_inject(fault)
        elif kind == "card-isolate":
            self._drain(fault, "1")
        else:
            raise FaultError("kind", f"{kind} has no backend on this agent", status=501)

    def revert(self, fault: Any) -> None:
        if fault.kind in ("bandwidth", "delay"):
            self._tc_revert(fault)
        elif fault.kind in ("loss", "partition"):
            self._nft_revert(fault)
        elif fault.kind in ("ecc", "xid"):
            self._dcgm_revert(fault)
        elif fault.kind == "card-isolate":
            self._drain(fault, "0")
