"""network-policy-partition: cut pods off the network through the Kubernetes API alone (no agent):
a NetworkPolicy selecting them that allows no ingress and no egress (or only to/from `allow_cidrs`).
The CNI enforces it; revert deletes the policy. Works wherever NetworkPolicy is enforced."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chaos.agent.protocol import INCONCLUSIVE, MISMATCH
from chaos.errors import Conflict, KubeError, NotFound
from chaos.faults import Context, Disruption, Look
from chaos.faults._spec import TTL, kind
from chaos.fields import MODEL, NAMESPACE, described, strings, text
from chaos.targets import refused_selector
from chaos.vocabulary import FAULT_LABEL

DIRECTIONS = ("ingress", "egress")
SCHEMAS = {"network-policy-partition": kind(
    "network-policy-partition", "Cut pods off the network with a NetworkPolicy that allows no ingress and no egress "
    "(or only to and from allow_cidrs); the CNI enforces it, no agent needed.",
    {"namespace": text("the pods' namespace", example=NAMESPACE),
     "pod_selector": described({"type": "object", "minProperties": 1, "propertyNames": {"type": "string"},
                                "additionalProperties": {"type": "string"}},
                               "label: value pairs the pods carry (never empty: that would be the whole namespace)",
                               None, {"kilocard.io/model": MODEL}),
     "directions": described(strings("", ["ingress"], {"enum": list(DIRECTIONS)}), "the directions cut",
                             list(DIRECTIONS), ["ingress"]),
     "allow_cidrs": strings("destinations still allowed", ["10.0.0.0/8"],
                            {"type": "string", "minLength": 1, "format": "cidr"}),
     "ttl_seconds": TTL},
    ["namespace", "pod_selector", "ttl_seconds"], [],
    {"namespace": NAMESPACE, "pod_selector": {"kilocard.io/model": MODEL}, "ttl_seconds": 300})}
REVERTIBLE = True


@dataclass(frozen=True)
class Spec:
    kind: str
    namespace: str
    pod_selector: dict[str, str]
    directions: tuple[str, ...]
    allow_cidrs: tuple[str, ...]
    ttl_seconds: float
    allow_empty: bool = False


def build(values: dict[str, Any], where: str) -> Spec:
    return Spec(kind=values["kind"], namespace=values["namespace"], pod_selector=dict(values["pod_selector"]),
                directions=tuple(sorted(set(values["directions"]))), allow_cidrs=tuple(values["allow_cidrs"] or ()),
                ttl_seconds=values["ttl_seconds"])


def targets(ctx: Context, spec: Spec, where: str) -> list[dict[str, Any]]:
    selector = ",".join(f"{k}={v}" for k, v in sorted(spec.pod_selector.items()))
    try:
        pods = ctx.kube.list_pods_raw(spec.namespace, selector)
    except KubeError as exc:
        raise refused_selector(exc, where, "pod_selector") from None
    return [{"namespace": spec.namespace, "pod_selector": spec.pod_selector, "pods": len(pods)}] if pods else []


def prepare(ctx: Context, spec: Spec, target: dict[str, Any], fault_id: str) -> dict[str, Any]:
    # The fault's own id in the name: two partitions of one run are two policies, reverted apart.
    return {"namespace": spec.namespace, "name": f"kilocard-partition-{fault_id}-{ctx.run_id}"[:63].rstrip("-")}


def disrupts(spec: Spec, target: dict[str, Any]) -> Disruption:
    return Disruption()  # cut off, not ended: the SLO probes see it


def apply(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> dict[str, Any]:
    peers = [{"ipBlock": {"cidr": c}} for c in spec.allow_cidrs]
    body: dict[str, Any] = {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": undo["name"], "namespace": spec.namespace, "labels": {FAULT_LABEL: ctx.run_id}},
        "spec": {"podSelector": {"matchLabels": spec.pod_selector},
                 "policyTypes": [d.capitalize() for d in spec.directions]},
    }
    if "ingress" in spec.directions:
        body["spec"]["ingress"] = [{"from": peers}] if peers else []
    if "egress" in spec.directions:
        body["spec"]["egress"] = [{"to": peers}] if peers else []
    try:
        ctx.kube.create_network_policy(spec.namespace, body)
    except Conflict:
        pass  # ours, from a retried apply
    return undo


def verify(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> Look:
    """The policy is in place; whether the CNI enforces it no API tells (a cluster without a
    policy-enforcing CNI accepts it and cuts nothing), so present is inconclusive, never confirmed."""
    names = {p["metadata"]["name"] for p in ctx.kube.list_network_policies(undo["namespace"],
                                                                           f"{FAULT_LABEL}={ctx.run_id}")}
    if undo["name"] not in names:
        return Look(MISMATCH, f"NetworkPolicy {undo['namespace']}/{undo['name']} is not there", False)
    return Look(INCONCLUSIVE, f"NetworkPolicy {undo['namespace']}/{undo['name']} is in place; whether the CNI "
                              "enforces it cannot be read back", True)


def revert(ctx: Context, undo: dict[str, Any]) -> None:
    try:
        ctx.kube.delete_network_policy(undo["namespace"], undo["name"])
    except NotFound:
        pass
