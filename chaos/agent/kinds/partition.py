"""partition (toolkit kind network-partition): drop an interface's traffic both ways.

    params   optional scope: cidrs, ports with protocol tcp|udp (none: everything)
    apply    nft: table inet kilocard_<id>, input and output chains, `drop`
    revert   nft delete table inet kilocard_<id>
    observe  the table and its drop rules are in the ruleset
"""

from __future__ import annotations

from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "partition", "network-partition", "node", None, False
DESCRIPTION = "Drop an interface's traffic both ways on nodes (nftables), optionally only to some destinations."


PARAMS = schema.SCOPE
EXAMPLE = {"cidrs": ["10.0.0.0/8"], "protocol": "tcp"}


def apply(fault: Any, host: Any) -> None:
    host.nft_table(fault, {"output": ["drop"], "input": ["drop"]})


def revert(fault: Any, host: Any) -> None:
    host.nft_revert(fault)


def observe(fault: Any, host: Any) -> tuple[str, str]:
    return host.nft_observe(fault, "drop")
