"""Faults the node agent applies where they live (on the node, with its own TTL reaper):

    card-isolate        take one card out of service (GPU drain; allocatable drops by one)
    gpu-ecc             double/single-bit ECC errors on a card (DCGM injection, re-injected while active)
    gpu-xid             an XID on a card
    network-bandwidth   tbf/htb rate limit        network-loss   nftables random drop
    network-partition   nftables drop             network-delay  netem delay (where the kernel has it)

The toolkit only speaks the agent protocol (chaos/agent/protocol.py): on the testbed the fleet
simulator answers for fake nodes; on a real cluster the agent DaemonSet does. The request is
validated here first, so bad input is refused before anything is recorded or sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chaos.agent import protocol
from chaos.errors import SpecError
from chaos.faults import Context
from chaos.faults._spec import Fields
from chaos.targets import NodeSelection, select_nodes

AGENT_KINDS = {
    "card-isolate": "card-isolate",
    "gpu-ecc": "ecc",
    "gpu-xid": "xid",
    "network-bandwidth": "bandwidth",
    "network-loss": "loss",
    "network-partition": "partition",
    "network-delay": "delay",
}
KINDS = tuple(AGENT_KINDS)
REVERTIBLE = True


@dataclass(frozen=True)
class Spec:
    kind: str
    nodes: NodeSelection
    cards: tuple[int, ...] | None
    interface: str | None
    netns: str | None  # a network namespace on the node (a pod's), instead of the node's own
    params: dict[str, Any]
    ttl_seconds: float
    allow_empty: bool


def parse(raw: Any, where: str) -> Spec:
    f = Fields(raw, where)
    kind = f.str("kind", choices=KINDS)
    agent_kind = AGENT_KINDS[kind]
    selection = f.nodes()
    cards: tuple[int, ...] | None = None
    interface = netns = None
    if protocol.KINDS[agent_kind]["target"] == "card":
        if f.has("card") == f.has("cards"):
            raise f._fail("card", "a card index, or a list of them as 'cards' (one of the two)", raw.get("card"))
        cards = (f.int("card", high=1023),) if f.has("card") else tuple(_card_list(f))
    else:
        interface = f.str("interface", None)
        netns = f.str("netns", None)
    params = raw.get("params", {})
    f.seen.add("params")
    spec = Spec(kind=kind, cards=cards, interface=interface, netns=netns, params=params, ttl_seconds=f.ttl(),
                allow_empty=f.bool("allow_empty"), nodes=selection)
    f.done()
    for target in _agent_targets(spec):  # the agent's own rules, checked before anything is sent
        try:
            protocol.validate(_body(spec, target, "check"))
        except protocol.FaultError as exc:
            raise SpecError(f"{where}.{exc}") from None
    return spec


def _card_list(f: Fields) -> list[int]:
    value = f.raw["cards"]
    f.seen.add("cards")
    if not isinstance(value, list) or not value or not all(isinstance(c, int) and not isinstance(c, bool)
                                                           and 0 <= c <= 1023 for c in value):
        raise f._fail("cards", "a non-empty list of card indices", value)
    return sorted(set(value))


def _agent_targets(spec: Spec) -> list[dict[str, Any]]:
    if spec.cards is not None:
        return [{"card": c} for c in spec.cards]
    return [{k: v for k, v in (("interface", spec.interface), ("netns", spec.netns)) if v}]


def _body(spec: Spec, target: dict[str, Any], run_id: str) -> dict[str, Any]:
    return {"kind": AGENT_KINDS[spec.kind], "target": target, "params": spec.params,
            "ttl_seconds": spec.ttl_seconds, "run_id": run_id}


def targets(ctx: Context, spec: Spec) -> list[dict[str, Any]]:
    nodes = select_nodes(ctx.kube, spec.nodes, spec.kind)
    return [{"node": node, **t} for node in nodes for t in _agent_targets(spec)]


def prepare(ctx: Context, spec: Spec, target: dict[str, Any]) -> dict[str, Any]:
    agent_target = {k: v for k, v in target.items() if k != "node"}
    return {"node": target["node"], "endpoint": ctx.agents.endpoint(target["node"]),
            "agent_kind": AGENT_KINDS[spec.kind], "target": agent_target, "run_id": ctx.run_id, "agent_id": None}


def apply(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> dict[str, Any]:
    created = ctx.agents.create(undo["endpoint"], undo["agent_kind"], undo["target"], spec.params,
                                spec.ttl_seconds, ctx.run_id)
    return {**undo, "agent_id": created["id"], "expires_at": created.get("expires_at")}


def revert(ctx: Context, undo: dict[str, Any]) -> None:
    if undo.get("agent_id"):
        ctx.agents.delete(undo["endpoint"], undo["agent_id"])
        return
    # The runner died between asking and hearing back: find the fault by what it was.
    for fault in ctx.agents.list(undo["endpoint"]):
        if (fault.get("run_id"), fault.get("kind"), fault.get("target")) == (
                undo["run_id"], undo["agent_kind"], undo["target"]):
            ctx.agents.delete(undo["endpoint"], fault["id"])
