"""The fields fault kinds share, declared once (JSON Schema, through chaos.fields): how pods or
nodes are picked, the blast radius, the cards, the TTL, and `verify`, which every kind has. A
kind's module declares its own schema from these beside its Spec, and builds the Spec from the
fields its schema accepted (`chaos.plan` reads and checks them once)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from chaos import landed
from chaos.agent.protocol import MAX_TTL_SECONDS
from chaos.fields import (
    MODEL,
    NAMESPACE,
    Schema,
    any_of,
    boolean,
    choice,
    described,
    integer,
    mapping,
    not_both,
    number,
    one_of,
    optional,
    selector,
    strings,
    text,
)
from chaos.targets import NodeSelection

MAX_CARD = 1023
MAX_GRACE_SECONDS = 3600
SELECTED = f"kilocard.io/model={MODEL}"  # the examples' pods

COUNT = optional(integer(1, 100_000, "how many to pick at random (default: one of what a selector matches, "
                                     "'percent: 100' for all; every node named in 'nodes')", example=1))
PERCENT = optional(number(0, 100, "what share to pick at random, in percent", example=50, above=True))
SEED = optional(integer(0, 2**62, "seed of the random pick, for a repeatable run", example=7))
ALLOW_EMPTY = boolean("accept selectors that match nothing (else the plan refuses)", False)
TTL = number(0, MAX_TTL_SECONDS, "seconds until the fault expires where it lives (every fault does)",
             example=300, above=True)
EFFECT = choice(("NoSchedule", "NoExecute"), "taint effect: NoExecute also evicts what does not tolerate it",
                "NoSchedule")
EVICTION_DEADLINE = number(0, 3600, "how long an eviction a PodDisruptionBudget blocks is retried", 60.0)
NOT_BOTH = not_both("give either count or percent, not both", "count", "percent")

POD_NAMESPACE = optional(text("the pods' namespace (default: every namespace)", example=NAMESPACE))
POD_SELECTOR = optional(selector("which pods", SELECTED))
POD_MODEL = optional(text("the pods of this model (label kilocard.io/model, or the name its serving stack serves it "
                          "under: kilocard discover); with a label_selector, the pods both pick", example=MODEL))
ROUTER = boolean("pick from the routing tier instead: the pods its stack's labels make routers (vLLM "
                 "production-stack's router, SGLang's model gateway, an InferencePool's endpoint picker: "
                 "chaos.routers); with model, the routers whose discovery finds that model's replicas", False)
PODS = {
    "namespace": POD_NAMESPACE, "label_selector": POD_SELECTOR, "model": POD_MODEL,
    "field_selector": optional(text("a field selector on the pods", example="spec.nodeName=worker-1")),
    "count": COUNT, "percent": PERCENT,
    "mode": choice(("delete", "evict"), "DELETE, or the Eviction API (honours PodDisruptionBudgets)", "delete"),
    "grace_seconds": optional(integer(0, MAX_GRACE_SECONDS, "termination grace period (default: the pod's own)",
                                      example=0)),
    "seed": SEED, "eviction_deadline_seconds": EVICTION_DEADLINE, "allow_empty": ALLOW_EMPTY,
}
PODS_RULES = (any_of("a selector, a model (or a namespace): refusing to pick from every pod", "label_selector",
                     "model", "namespace"), NOT_BOTH)
NODES = {
    "nodes": optional(strings("node names", ["worker-1"])),
    "node_selector": optional(selector("a label selector of nodes", "kilocard.io/pool=gpu")),
    "nodes_of": optional(mapping("nodes_of", "the nodes the pods matching label_selector or model (in namespace) "
                                 "run on", {
        "namespace": POD_NAMESPACE,
        "label_selector": optional(selector("which pods", "kilocard.io/tp-group=g0,apps.kubernetes.io/pod-index=1")),
        "model": POD_MODEL,
        "replica": optional(integer(0, 100_000, "only the pods of this replica (TP group) of theirs, counted from 0 "
                                    "in the order of each group's first pod name (vllm-0 before vllm-1)", example=0)),
        "rank": optional(integer(0, 100_000, "only the pods of this rank in their group (0: a leader, the head)",
                                 example=1)),
    }, (), [any_of("a label_selector or a model", "label_selector", "model")],
        example={"namespace": NAMESPACE, "label_selector": "kilocard.io/tp-group=g0"})),
    "count": COUNT, "percent": PERCENT, "seed": SEED,
}
NODES_RULES = (one_of("one of: a list of node names, a node_selector, or nodes_of {namespace, label_selector, model, "
                      "replica, rank}",
                      "nodes", "node_selector", "nodes_of"), NOT_BOTH)
CARDS = described({"type": "array", "minItems": 1, "uniqueItems": True,
                   "items": {"type": "integer", "minimum": 0, "maximum": MAX_CARD}},
                  "card indices on each node, each listed once", None, [0, 1])
CARD = integer(0, MAX_CARD, "one card index on each node", example=0)
CARD_RULE = one_of("a card index, or a list of them as 'cards' (one of the two)", "card", "cards")


def kind(name: str, description: str, properties: dict[str, Schema], required: Iterable[str] = (),
         rules: Iterable[Schema] = (), example: dict[str, Any] | None = None) -> Schema:
    """A fault kind's schema: its `kind`, its own fields, and `verify`."""
    return mapping(name, description, {"kind": {"const": name, "description": "the fault kind"}, **properties,
                                       landed.FIELD: landed.SCHEMA}, ["kind", *required], rules,
                   {"kind": name, **(example or {})})


def nodes(values: dict[str, Any]) -> NodeSelection:
    """The nodes a fault's fields pick: named, by selector, or those some pods run on."""
    pods = values["nodes_of"]
    return NodeSelection(tuple(values["nodes"]) if values["nodes"] else None, values["node_selector"],
                         values["count"], values["percent"], values["seed"],
                         (pods.get("namespace"), pods.get("label_selector"), pods.get("model"), pods.get("replica"),
                          pods.get("rank")) if pods else None)


def cards(values: dict[str, Any]) -> tuple[str, tuple[int, ...]]:
    """(the field given, `card` or `cards`; the card indices)."""
    return ("card", (values["card"],)) if values["card"] is not None else ("cards", tuple(values["cards"]))

