"""tcp-reset (toolkit kind network-tcp-reset): answer an interface's TCP traffic with resets, both
ways, optionally only to some destinations: established connections see ECONNRESET, new ones are
refused, as when a peer's NIC or switch drops its state under a TP group's collectives.

    params   optional scope: cidrs, ports (TCP, at either end: the node that listens is hit as well as
             the one that connects)
    apply    nft: table inet kilocard_<id>, input and output chains, `meta l4proto tcp reject with
             tcp reset` (the kernel's RST, sent to the local socket on output)
    revert   nft delete table inet kilocard_<id>
    observe  the table and its reject rules are in the ruleset
"""

from __future__ import annotations

from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "tcp-reset", "network-tcp-reset", "node", None, False
DESCRIPTION = ("Answer an interface's TCP traffic with resets, both ways, on nodes (nftables `reject with tcp "
               "reset`): established connections see ECONNRESET, new ones are refused.")
VERDICT = ["reject", "with", "tcp", "reset"]


PARAMS = {
    "cidrs": schema.SCOPE["cidrs"],
    "ports": schema.Param("ports", "only TCP traffic to and from these ports", example=[29500]),
    "protocol": schema.Param("choice", "TCP (a reset is TCP's)", choices=("tcp",), default="tcp",
                             why="a TCP reset needs TCP"),
}
EXAMPLE = {"cidrs": ["10.0.0.0/8"], "ports": [29500]}


def apply(fault: Any, host: Any) -> None:
    host.nft_table(fault, {"output": VERDICT, "input": VERDICT}, protocol="tcp", both_ends=True)


def revert(fault: Any, host: Any) -> None:
    host.nft_revert(fault)


def observe(fault: Any, host: Any) -> tuple[str, str]:
    return host.nft_observe(fault, "reject with tcp reset")
