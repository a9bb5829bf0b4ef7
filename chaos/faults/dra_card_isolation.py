"""dra-card-isolate: isolate cards where the cluster allocates them with Dynamic Resource
Allocation, through the API alone: one `DeviceTaintRule` (resource.k8s.io/v1beta2) per card,
selecting driver, pool and device. NoSchedule keeps new claims off the card; NoExecute also makes
the controller manager evict the pods whose claims hold it. Revert deletes the rule.

Devices are named as the drivers name them: node-local drivers use the node name as the pool and
`gpu-<index>` as the device (NVIDIA's DRA driver); both are fields for other drivers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from chaos.agent.protocol import CONFIRMED, MISMATCH
from chaos.errors import NotFound
from chaos.faults import Context, Disruption, Look
from chaos.faults._spec import ALLOW_EMPTY, CARDS, EFFECT, NODES, NODES_RULES, TTL, kind, nodes
from chaos.fields import CARD_PATTERN, described, text
from chaos.targets import NodeSelection, select_nodes
from chaos.vocabulary import DRA_DRIVER, ISOLATION_TAINT, RUN_LABEL

SCHEMAS = {"dra-card-isolate": kind(
    "dra-card-isolate", "Isolate cards the cluster allocates with Dynamic Resource Allocation: one DeviceTaintRule per "
    "card (NoExecute also evicts the pods whose claims hold it).",
    {**NODES, "cards": CARDS,
     "device_name": described({"type": "string", "minLength": 1, "pattern": CARD_PATTERN},
                              "the device's name in its pool, {card} standing for the index", "gpu-{card}", None),
     "driver": text("the DRA driver", DRA_DRIVER), "effect": EFFECT, "ttl_seconds": TTL, "allow_empty": ALLOW_EMPTY},
    ["cards", "ttl_seconds"], NODES_RULES, {"nodes": ["worker-1"], "cards": [0], "ttl_seconds": 300})}
REVERTIBLE = True
API_VERSION = "resource.k8s.io/v1beta2"


@dataclass(frozen=True)
class Spec:
    kind: str
    nodes: NodeSelection
    cards: tuple[int, ...]
    driver: str
    device_name: str
    effect: str
    ttl_seconds: float
    allow_empty: bool


def build(values: dict[str, Any], where: str) -> Spec:
    return Spec(kind=values["kind"], nodes=nodes(values), cards=tuple(values["cards"]), driver=values["driver"],
                device_name=values["device_name"], effect=values["effect"], ttl_seconds=values["ttl_seconds"],
                allow_empty=values["allow_empty"])


def targets(ctx: Context, spec: Spec, where: str) -> list[dict[str, Any]]:
    nodes = select_nodes(ctx.kube, spec.nodes, where, ctx.run_id)
    return [{"node": n, "card": c, "driver": spec.driver, "pool": n, "device": spec.device_name.format(card=c)}
            for n in nodes for c in spec.cards]


def prepare(ctx: Context, spec: Spec, target: dict[str, Any], fault_id: str) -> dict[str, Any]:
    # The fault's own id in the name: two faults of one run on one device are two rules.
    name = re.sub(r"[^a-z0-9.-]", "-", f"kilocard-{ctx.run_id}-{fault_id}-{target['pool']}-{target['device']}".lower())
    return {"name": name[:253].strip("-.")}


def disrupts(spec: Spec, target: dict[str, Any]) -> Disruption:
    return Disruption(node=target["node"], cards=(int(target["card"]),),
                      evicts="cards" if spec.effect == "NoExecute" else "none")


def apply(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> dict[str, Any]:
    ctx.kube.apply({
        "apiVersion": API_VERSION, "kind": "DeviceTaintRule",
        "metadata": {"name": undo["name"], "labels": {RUN_LABEL: ctx.run_id}},
        "spec": {"deviceSelector": {"driver": target["driver"], "pool": target["pool"], "device": target["device"]},
                 "taint": {"key": ISOLATION_TAINT, "value": ctx.run_id, "effect": spec.effect}},
    })
    return undo


def verify(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> Look:
    """The rule is there and selects the device (the scheduler and the eviction controller act on it)."""
    try:
        rule = ctx.kube.get_object(API_VERSION, "DeviceTaintRule", undo["name"]).to_dict()
    except NotFound:
        return Look(MISMATCH, f"DeviceTaintRule {undo['name']} is not there")
    selector = (rule.get("spec") or {}).get("deviceSelector") or {}
    wanted = {"driver": target["driver"], "pool": target["pool"], "device": target["device"]}
    if {k: selector.get(k) for k in wanted} != wanted:
        return Look(MISMATCH, f"DeviceTaintRule {undo['name']} selects {selector}, not {wanted}")
    return Look(CONFIRMED, f"DeviceTaintRule {undo['name']} taints "
                           f"{target['driver']}/{target['pool']}/{target['device']}")


def revert(ctx: Context, undo: dict[str, Any]) -> None:
    try:
        ctx.kube.delete_object(API_VERSION, "DeviceTaintRule", undo["name"])
    except NotFound:
        pass
