"""delay (toolkit kind network-delay): delay an interface's egress packets, with optional jitter.

    params   ms 0..60000 (required), jitter_ms 0..60000
    apply    tc qdisc replace dev IF root netem delay <ms>ms [<jitter>ms]; a kernel without netem
             (sch_netem) is refused with 501, never faked
    revert   tc qdisc del dev IF root
    observe  the root qdisc is a netem
One root qdisc per interface: it does not stack with another bandwidth or delay fault there.
"""

from __future__ import annotations

from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "delay", "network-delay", "node", "root-qdisc", False
DESCRIPTION = "Delay an interface's egress packets on nodes (tc netem, where the kernel has it)."


PARAMS = {
    "ms": schema.Param("number", "the delay, in milliseconds", 0, 60_000, required=True, example=200),
    "jitter_ms": schema.Param("number", "random variation of the delay, in milliseconds", 0, 60_000, example=20),
}
EXAMPLE = {"ms": 200, "jitter_ms": 20}


def apply(fault: Any, host: Any) -> None:
    p = fault.params
    jitter = [f"{float(p['jitter_ms']):g}ms"] if p.get("jitter_ms") else []
    host.tc(fault, "netem", "delay", f"{float(p['ms']):g}ms", *jitter)


def revert(fault: Any, host: Any) -> None:
    host.tc_revert(fault)


def observe(fault: Any, host: Any) -> tuple[str, str]:
    return host.tc_observe(fault, "netem")
