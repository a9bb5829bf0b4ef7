"""Faults the node agent applies where they live (on the node, with its own TTL reaper): the
toolkit side of every kind in chaos.agent.kinds (one module each: its parameters, what the agent
runs to apply and revert it).

    card-isolate        take one card out of service (GPU drain; allocatable drops by one)
    gpu-ecc             double/single-bit ECC errors on a card (DCGM injection, re-injected while active)
    gpu-xid             an XID on a card
    gpu-throttle        the slow card: its power capped or clocks locked through NVML, undone exactly
    network-bandwidth   tbf rate limit        network-loss   nftables random drop
    network-partition   nftables drop         network-delay  netem delay (where the kernel has it)
    network-tcp-reset   nftables reject with tcp reset
    image-pull-failure  a registry outage: nftables refuses its resolved addresses (pulls fail)
    slow-weights        the pods' cgroup's reads capped (io.max / blkio): start-ups load slowly
    dns-failure         DNS queries dropped or refused (nftables, port 53): names stop resolving
    node-kubelet-stop   the kubelet stops: to the control plane, a lost machine
(rank-stall, chaos/faults/rank_stall.py, goes through the agent too, with pods for targets.)

The toolkit only speaks the agent protocol (chaos/agent/protocol.py): on the testbed the fleet
simulator answers for fake nodes; on a real cluster the agent DaemonSet does. The request is
validated here first, so bad input is refused before anything is recorded or sent; the plan then
checks the cards against the node, that its agent answers, and that no other open run holds a
target this kind cannot share.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from chaos.agent import kinds, protocol
from chaos.agent import schema as agent_schema
from chaos.agent.client import REVERT_PATIENCE_SECONDS, AgentError
from chaos.agent.protocol import CONFIRMED, INCONCLUSIVE, MISMATCH
from chaos.errors import SpecError, TargetConflict
from chaos.faults import Context, Disruption, Look
from chaos.faults._spec import ALLOW_EMPTY, CARD, CARD_RULE, CARDS, NODES, NODES_RULES, TTL, kind, nodes
from chaos.faults._spec import cards as indices
from chaos.fields import INTERFACE, NETNS, Schema, described, mapping, optional
from chaos.ledger import Record
from chaos.targets import NodeSelection, select_nodes
from chaos.vocabulary import card_resource_of

AGENT_KINDS = {fault: module.NAME for fault, module in sorted(kinds.BY_FAULT.items())}
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
    card_field: str = "cards"  # how the input named the cards, for error messages


def _schema(fault: str, module: ModuleType) -> Schema:
    """A fault kind's schema from its agent kind's: the nodes, the card(s) or the interface its
    target is, and the agent's parameters as the agent declares them."""
    declared: dict[str, agent_schema.Param] = module.PARAMS
    properties = {name: p.schema() for name, p in declared.items()}
    required = [name for name, p in declared.items() if p.required]
    # A parameter needed once another is a non-empty list (the ports' protocol).
    rules = [{"if": {"properties": {p.needed_by: {"minItems": 1}}, "required": [p.needed_by]},
              "then": {"required": [name], "properties": {name: properties[name]}}}
             for name, p in declared.items() if p.needed_by]
    example = module.EXAMPLE
    params = described({**mapping("params", "", properties, required, rules), "default": {}},
                       f"parameters of {module.NAME}" + ("" if properties else " (it takes none)"), None,
                       example or None)
    target: dict[str, Schema] = {}
    rule: list[Schema] = []
    sample: dict[str, Any] = {"nodes": ["worker-1"]}
    if module.TARGET == "card":
        target = {"card": CARD, "cards": CARDS}
        rule = [CARD_RULE]
        sample["cards"] = [0]
    elif module.TARGET == "node":
        target = {"interface": optional(described({"type": "string", "pattern": INTERFACE}, "the interface "
                                                  "(default: the node's own)", None, "eth0")),
                  "netns": optional(described({"type": "string", "pattern": NETNS}, "a network namespace on the "
                                              "node (a pod's) instead of the node's own", None, "cni-1234"))}
    return kind(fault, module.DESCRIPTION, {**NODES, **target, "params": params, "ttl_seconds": TTL,
                                             "allow_empty": ALLOW_EMPTY},
                ["ttl_seconds", *(["params"] if required else [])], [*NODES_RULES, *rule],
                {**sample, **({"params": example} if example else {}), "ttl_seconds": 300})


SCHEMAS = {fault: _schema(fault, module) for fault, module in sorted(kinds.BY_FAULT.items())}


def build(values: dict[str, Any], where: str) -> Spec:
    card_field, cards = indices(values) if "cards" in values else ("cards", None)
    spec = Spec(kind=values["kind"], cards=cards, interface=values.get("interface"), netns=values.get("netns"),
                params=values["params"], ttl_seconds=values["ttl_seconds"], allow_empty=values["allow_empty"],
                nodes=nodes(values), card_field=card_field)
    for target in _agent_targets(spec):  # the agent's own rules, checked before anything is sent
        try:
            protocol.validate(_body(spec, target, "check"))
        except protocol.FaultError as exc:
            raise SpecError(f"{where}.{exc}") from None
    return spec


def _agent_targets(spec: Spec) -> list[dict[str, Any]]:
    if spec.cards is not None:
        return [{"card": c} for c in spec.cards]
    return [{k: v for k, v in (("interface", spec.interface), ("netns", spec.netns)) if v}]


def _body(spec: Spec, target: dict[str, Any], run_id: str) -> dict[str, Any]:
    return {"kind": AGENT_KINDS[spec.kind], "target": target, "params": spec.params,
            "ttl_seconds": spec.ttl_seconds, "run_id": run_id}


def targets(ctx: Context, spec: Spec, where: str) -> list[dict[str, Any]]:
    nodes = select_nodes(ctx.kube, spec.nodes, where, ctx.run_id)
    return [{"node": node, **t} for node in nodes for t in _agent_targets(spec)]


def check(ctx: Context, spec: Spec, found: list[dict[str, Any]], where: str,
          earlier: list[tuple[str, Record]]) -> None:
    """What only the cluster knows: the cards exist on each node, each node's agent answers, and
    neither another open run nor an earlier entry of this plan holds a target this kind cannot
    share."""
    nodes = sorted({t["node"] for t in found})
    if spec.cards is not None:
        check_cards(ctx, nodes, spec.cards, f"{where}.{spec.card_field}")
    places = [(t["node"], {k: v for k, v in t.items() if k != "node"}) for t in found]
    check_held(ctx, AGENT_KINDS[spec.kind], places, where, earlier)


def check_held(ctx: Context, kind: str, places: list[tuple[str, dict[str, Any]]], where: str,
               earlier: list[tuple[str, Record]]) -> None:
    """Each node's agent answers, and neither another open run nor an earlier entry of this plan
    holds a place (node, agent target) that a fault of agent kind `kind` cannot share."""
    nodes = sorted({node for node, _ in places})
    held = dict(zip(nodes, ctx.kube.batch(lambda n: reachable(ctx, n, where), nodes), strict=True))
    for entry, r in earlier:  # this plan's own, as the agent will hold them
        if r.undo.get("agent_kind") and r.undo.get("node") in held:
            held[r.undo["node"]].append({"kind": r.undo["agent_kind"], "target": r.undo["target"], "entry": entry})
    for node, place in places:
        for other in held[node]:
            if not kinds.stackable(kind, place, other["kind"], other.get("target") or {}):
                if "entry" in other:
                    raise TargetConflict(f"{where}: {node} {json.dumps(place)} cannot stack with "
                                         f"{other['entry']} of this plan ({other['kind']} on the same target)")
                raise TargetConflict(
                    f"{where}: {node} {json.dumps(place)} is held by run {other.get('run_id') or '?'} "
                    f"({other['kind']}, fault {other['id']}, until {other.get('expires_at')}); "
                    "wait for it, or 'kilocard recover --run' it")


def check_cards(ctx: Context, nodes: list[str], cards: tuple[int, ...], where: str) -> None:
    """Every node has every card: its capacity of the card resource (given, else the node's own,
    so a fleet mixing GPU and NPU nodes checks each by its kind)."""
    listed = {n["metadata"]["name"]: n for n in ctx.kube.list_nodes_raw()}
    for node in nodes:
        resource = ctx.card_resource or card_resource_of([listed[node]] if node in listed else [])
        have = int(((listed.get(node, {}).get("status") or {}).get("capacity") or {}).get(resource, 0))
        wrong = [c for c in cards if c >= have]
        if wrong:
            has = f"has cards 0-{have - 1}" if have else "has no cards"
            raise SpecError(f"{where}: node {node} {has} ({resource or 'no card resource'}), got {wrong[0]}")


def reachable(ctx: Context, node: str, where: str) -> list[dict[str, Any]]:
    """The node's agent answers; returns the faults it holds."""
    try:
        return ctx.agents.list(ctx.agents.endpoint(node))
    except AgentError as exc:
        raise SpecError(f"{where}: the agent of node {node} does not answer ({exc})") from None


def prepare(ctx: Context, spec: Spec, target: dict[str, Any], fault_id: str) -> dict[str, Any]:
    undo = undo_for(ctx, AGENT_KINDS[spec.kind], target["node"], {k: v for k, v in target.items() if k != "node"})
    if getattr(kinds.get(undo["agent_kind"]), "EVICTS", None) == "cards":  # card-isolate: allocatable drops
        undo["allocatable_before"] = _allocatable(ctx, target["node"])
    return undo


def _allocatable(ctx: Context, node: str) -> int:
    raw = ctx.kube.read_node_raw(node)
    resource = ctx.card_resource or card_resource_of([raw])
    return int(((raw.get("status") or {}).get("allocatable") or {}).get(resource, 0))


def undo_for(ctx: Context, agent_kind: str, node: str, agent_target: dict[str, Any]) -> dict[str, Any]:
    """What `apply` and `revert` need of a fault the agent of `node` will hold (also npu-fault's agent path)."""
    return {"node": node, "endpoint": ctx.agents.endpoint(node), "agent_kind": agent_kind, "target": agent_target,
            "run_id": ctx.run_id, "agent_id": None}


def disrupts(spec: Spec, target: dict[str, Any]) -> Disruption:
    """The kind says what it drives off (`EVICTS`: a drained card's pod, a dead kubelet's node)."""
    card = target.get("card")
    return Disruption(node=target["node"], cards=() if card is None else (int(card),),
                      evicts=getattr(kinds.get(AGENT_KINDS[spec.kind]), "EVICTS", "none"))


def apply(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> dict[str, Any]:
    # The idempotency key makes a POST retried after a lost reply return the fault it created.
    created = ctx.agents.create(undo["endpoint"], undo["agent_kind"], undo["target"], spec.params,
                                spec.ttl_seconds, ctx.run_id, key=f"{ctx.run_id}/{undo['fault_id']}")
    return {**undo, "agent_id": created["id"], "expires_at": created.get("expires_at")}


def verify(ctx: Context, spec: Any, target: dict[str, Any], undo: dict[str, Any]) -> Look:
    """The agent's read-back of its fault (a qdisc, an nft table, a frozen cgroup; on the testbed
    the fake node's state); for a card taken out of service, also the node's allocatable as the
    apiserver has it, which must have dropped below what it was before."""
    if not undo.get("agent_id"):
        return Look(INCONCLUSIVE, "the agent's fault id is unknown (its reply was lost)", True)
    status, evidence, final = ctx.agents.observe(undo["endpoint"], undo["agent_id"])
    if "allocatable_before" not in undo or status == MISMATCH:
        return Look(status, evidence, final)
    node, before, now = undo["node"], int(undo["allocatable_before"]), _allocatable(ctx, undo["node"])
    if now >= before:
        return Look(MISMATCH, f"node {node}'s allocatable cards are still {now} (were {before}); agent: {evidence}")
    return Look(CONFIRMED, f"node {node}'s allocatable cards dropped from {before} to {now}; agent: {evidence}")


def revert(ctx: Context, undo: dict[str, Any]) -> None:
    if undo.get("agent_id"):
        ctx.agents.delete(undo["endpoint"], undo["agent_id"])
        return
    # The runner died between asking and hearing back: find the fault by what it was.
    for fault in ctx.agents.list(undo["endpoint"], patience=REVERT_PATIENCE_SECONDS):
        if (fault.get("run_id"), fault.get("kind"), fault.get("target")) == (
                undo["run_id"], undo["agent_kind"], undo["target"]):
            ctx.agents.delete(undo["endpoint"], fault["id"])
