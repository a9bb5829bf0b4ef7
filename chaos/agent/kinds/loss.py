"""loss (toolkit kind network-loss): drop a share of an interface's egress packets.

    params   percent 0..100 (required; fractions kept: 0.5 % is 5000 in a million), and optional
             scope: cidrs, ports with protocol tcp|udp
    apply    nft: table inet kilocard_<id>, output chain, `numgen random mod 1000000 < p x 10^4 drop`
    revert   nft delete table inet kilocard_<id>
    observe  the table and its drop rule are in the ruleset
"""

from __future__ import annotations

from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "loss", "network-loss", "node", None, False
DESCRIPTION = "Drop a share of an interface's egress packets on nodes (nftables)."
SCALE = 1_000_000


PARAMS = {"percent": schema.Param("number", "the share of packets dropped, in percent", 0, 100, required=True,
                                example=5), **schema.SCOPE}
EXAMPLE = {"percent": 5, "ports": [8000], "protocol": "tcp"}


def apply(fault: Any, host: Any) -> None:
    share = str(round(float(fault.params["percent"]) * SCALE / 100))
    host.nft_table(fault, {"output": ["numgen", "random", "mod", str(SCALE), "<", share, "drop"]})


def revert(fault: Any, host: Any) -> None:
    host.nft_revert(fault)


def observe(fault: Any, host: Any) -> tuple[str, str]:
    return host.nft_observe(fault, "drop")
