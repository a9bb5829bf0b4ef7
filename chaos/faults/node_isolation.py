"""node-isolate: cordon nodes and taint them `kilocard.io/isolated=kilocard:<effect>` (NoSchedule,
or NoExecute, which evicts what does not tolerate it), optionally draining them through the
Eviction API. Runs stack on a node, each revert lifting only its own part (chaos/faults/_node_hold.py,
annotation `kilocard.io/isolation`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chaos.errors import NotFound
from chaos.faults import Context, Disruption, Look, pod_kill
from chaos.faults._node_hold import Mark, hold, landed, release
from chaos.faults._spec import ALLOW_EMPTY, EFFECT, EVICTION_DEADLINE, NODES, NODES_RULES, TTL, kind, nodes
from chaos.fields import boolean
from chaos.targets import NodeSelection, select_nodes
from chaos.vocabulary import ISOLATION_ANNOTATION, ISOLATION_TAINT

SCHEMAS = {"node-isolate": kind(
    "node-isolate", "Cordon nodes and taint them kilocard.io/isolated (NoSchedule, or NoExecute, which evicts), "
    "optionally draining them through the Eviction API.",
    {**NODES, "effect": EFFECT, "drain": boolean("evict the node's pods (not DaemonSets' nor static pods)", False),
     "eviction_deadline_seconds": EVICTION_DEADLINE, "ttl_seconds": TTL, "allow_empty": ALLOW_EMPTY},
    ["ttl_seconds"], NODES_RULES, {"nodes": ["worker-1"], "ttl_seconds": 300})}
REVERTIBLE = True
MARK = Mark(ISOLATION_TAINT, "kilocard", ISOLATION_ANNOTATION, cordon=True)


@dataclass(frozen=True)
class Spec:
    kind: str
    nodes: NodeSelection
    effect: str
    drain: bool
    eviction_deadline_seconds: float
    ttl_seconds: float
    allow_empty: bool


def build(values: dict[str, Any], where: str) -> Spec:
    return Spec(kind=values["kind"], nodes=nodes(values), effect=values["effect"], drain=values["drain"],
                eviction_deadline_seconds=values["eviction_deadline_seconds"], ttl_seconds=values["ttl_seconds"],
                allow_empty=values["allow_empty"])


def targets(ctx: Context, spec: Spec, where: str) -> list[dict[str, Any]]:
    return [{"node": name} for name in select_nodes(ctx.kube, spec.nodes, where, ctx.run_id)]


def prepare(ctx: Context, spec: Spec, target: dict[str, Any], fault_id: str) -> dict[str, Any]:
    # Each fault holds the node on its own: two faults of one run (NoSchedule, then NoExecute with
    # a drain) are two holders, reverted apart.
    return {"node": target["node"], "effect": spec.effect, "run_id": ctx.run_id, "holder": f"{ctx.run_id}/{fault_id}"}


def release_legacy(node: dict[str, Any], run_id: str, prior_unschedulable: bool) -> dict[str, Any] | None:
    """A record written before runs could stack (undo {node, unschedulable}): its taint carried the
    run id as value, its marker was `kilocard.io/isolated-by`."""
    taints = [dict(t) for t in (node.get("spec") or {}).get("taints") or []]
    mine = [t for t in taints if t["key"] == ISOLATION_TAINT and t.get("value") == run_id]
    if not mine:
        return None
    return {"spec": {"taints": [t for t in taints if t not in mine], "unschedulable": prior_unschedulable},
            "metadata": {"annotations": {"kilocard.io/isolated-by": None}}}


def _drained(pod: dict[str, Any]) -> bool:
    """What a drain evicts: not a DaemonSet's pod (the node agent among them) nor a static pod,
    as `kubectl drain` leaves them; not a pod already terminating."""
    meta = pod["metadata"]
    return not (meta.get("deletionTimestamp") or "kubernetes.io/config.mirror" in (meta.get("annotations") or {})
                or any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []))


def disrupts(spec: Spec, target: dict[str, Any]) -> Disruption:
    """NoSchedule only keeps new pods away; NoExecute or a drain drives every pod off."""
    return Disruption(node=target["node"], evicts="node" if spec.effect == "NoExecute" or spec.drain else "none")


def apply(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> dict[str, Any]:
    ctx.kube.update_node(target["node"], lambda node: hold(node, MARK, undo["holder"], spec.effect))
    if spec.drain:
        for pod in ctx.kube.list_pods_raw(field_selector=f"spec.nodeName={target['node']}"):
            if _drained(pod):
                meta = pod["metadata"]
                pod_kill.kill(ctx, {"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
                              "evict", None, spec.eviction_deadline_seconds)
    return undo


def verify(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> Look:
    return landed(ctx.kube.read_node_raw(target["node"]), MARK, spec.effect)


def revert(ctx: Context, undo: dict[str, Any]) -> None:
    if "holder" in undo:
        def change(node: dict[str, Any]) -> dict[str, Any] | None:
            return release(node, MARK, undo["holder"])
    else:
        def change(node: dict[str, Any]) -> dict[str, Any] | None:
            return release_legacy(node, ctx.run_id, bool(undo.get("unschedulable")))
    try:
        ctx.kube.update_node(undo["node"], change)
    except NotFound:
        pass
