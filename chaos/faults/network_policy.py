"""network-policy-partition: cut pods off the network through the Kubernetes API alone (no agent):
a NetworkPolicy selecting them that allows no ingress and no egress (or only to/from `allow_cidrs`).
The CNI enforces it; revert deletes the policy. Works wherever NetworkPolicy is enforced."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from chaos.agent.protocol import INCONCLUSIVE, MISMATCH
from chaos.errors import Conflict, KubeError, NotFound, SpecError
from chaos.faults import Context, Disruption
from chaos.faults._spec import Fields
from chaos.targets import refused_selector
from chaos.vocabulary import FAULT_LABEL

KINDS = ("network-policy-partition",)
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


def parse(raw: Any, where: str) -> Spec:
    f = Fields(raw, where)
    f.str("kind")
    selector = raw.get("pod_selector")
    f.seen.add("pod_selector")
    if not isinstance(selector, dict) or not selector or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in selector.items()):
        raise f.fail("pod_selector", "a non-empty mapping of label: value (refusing to cut off a whole namespace)",
                      selector)
    directions = f.str_list("directions", ["ingress", "egress"])
    if not set(directions) <= {"ingress", "egress"}:
        raise f.fail("directions", "a list of 'ingress' and/or 'egress'", directions)
    cidrs = f.str_list("allow_cidrs", [])
    for c in cidrs:
        try:
            ipaddress.ip_network(c, strict=False)
        except ValueError:
            raise SpecError(f"{where}.allow_cidrs: not a CIDR: {c!r}") from None
    spec = Spec(kind="network-policy-partition", namespace=f.str("namespace"), pod_selector=dict(selector),
                directions=tuple(sorted(set(directions))), allow_cidrs=tuple(cidrs), ttl_seconds=f.ttl())
    f.done()
    return spec


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


def verify(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> tuple[str, str, bool]:
    """The policy is in place; whether the CNI enforces it no API tells (a cluster without a
    policy-enforcing CNI accepts it and cuts nothing), so present is inconclusive, never confirmed."""
    names = {p.metadata.name for p in ctx.kube.list_network_policies(undo["namespace"], f"{FAULT_LABEL}={ctx.run_id}")}
    if undo["name"] not in names:
        return MISMATCH, f"NetworkPolicy {undo['namespace']}/{undo['name']} is not there", False
    return INCONCLUSIVE, (f"NetworkPolicy {undo['namespace']}/{undo['name']} is in place; whether the CNI "
                          "enforces it cannot be read back"), True


def revert(ctx: Context, undo: dict[str, Any]) -> None:
    try:
        ctx.kube.delete_network_policy(undo["namespace"], undo["name"])
    except NotFound:
        pass
