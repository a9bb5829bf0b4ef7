"""dns-block (toolkit kind dns-failure): the node (or a pod) can no longer resolve names, as when
CoreDNS is overloaded or unreachable, or the node's resolver fails: every new connection made by
name fails (an image pull, a model download, a client reaching a Service by its name), while
connections already open, and traffic addressed by IP, go on.

    params   cidrs: only queries to these resolvers (default: every destination); answer: drop
             (default: the query times out, as a resolver that does not answer makes it, 5 s per
             try) | reject (refused at once, as a resolver that is down)
    apply    nft: table inet kilocard_<id>, an output chain `meta l4proto { tcp, udp } th dport 53
             drop` (or `reject`), on the interface (in a pod's network namespace, given `netns`)
    revert   nft delete table inet kilocard_<id>
    observe  the table and its rules are in the ruleset
"""

from __future__ import annotations

from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "dns-block", "dns-failure", "node", None, False
FIT = True  # the engines it runs keep serving: their clients reach them by address, through Services
DESCRIPTION = ("Make names unresolvable on nodes or in a pod's network namespace (DNS queries, UDP and TCP "
               "port 53, dropped or refused by nftables): new connections made by name fail.")
ANSWERS = ("drop", "reject")
QUERIES = ["meta", "l4proto", "{ tcp, udp }", "th", "dport", "53"]

PARAMS = {
    "cidrs": schema.Param("cidrs", "only queries to these resolvers (default: every destination)",
                          example=["10.96.0.10/32"]),
    "answer": schema.Param("choice", "what a query gets: no answer (it times out) or refused at once",
                           choices=ANSWERS, default=ANSWERS[0]),
}
EXAMPLE = {"cidrs": ["10.96.0.10/32"], "answer": "drop"}


def apply(fault: Any, host: Any) -> None:
    host.nft_table(fault, {"output": [*QUERIES, fault.params.get("answer", ANSWERS[0])]},
                   scope={"cidrs": fault.params.get("cidrs") or []})


def revert(fault: Any, host: Any) -> None:
    host.nft_revert(fault)


def observe(fault: Any, host: Any) -> tuple[str, str]:
    return host.nft_observe(fault, f"th dport 53 {fault.params.get('answer', ANSWERS[0])}")
