"""bandwidth (toolkit kind network-bandwidth): rate-limit an interface's egress.

    params   rate_mbit 0.001..10^7 (required)
    apply    tc qdisc replace dev IF root tbf rate <r>mbit burst <10 ms of traffic> latency 400ms
    revert   tc qdisc del dev IF root
    observe  the root qdisc is a tbf at that rate, and what passes it (its byte counter over 0.5 s) is not
             above it
One root qdisc per interface: it does not stack with another bandwidth or delay fault there.
"""

from __future__ import annotations

from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "bandwidth", "network-bandwidth", "node", "root-qdisc", False
DESCRIPTION = "Rate-limit an interface's egress on nodes (tc tbf)."


PARAMS = {"rate_mbit": schema.Param("number", "the egress rate, in Mbit/s", 0.001, 1e7, required=True, example=100)}
EXAMPLE = {"rate_mbit": 100}


def apply(fault: Any, host: Any) -> None:
    rate = float(fault.params["rate_mbit"])
    burst = max(1600, int(rate * 1250))  # 10 ms of traffic (Mbit/s x 1250 B), at least a packet
    host.tc(fault, "tbf", "rate", f"{rate:g}mbit", "burst", f"{burst}b", "latency", "400ms")


def revert(fault: Any, host: Any) -> None:
    host.tc_revert(fault)


def observe(fault: Any, host: Any) -> tuple[str, str]:
    return host.tc_observe(fault, "tbf", float(fault.params["rate_mbit"]))
