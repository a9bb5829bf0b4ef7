"""node-out-of-service: taint nodes `node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`, the
step of Kubernetes' non-graceful node shutdown that a remediation (or an operator) takes for a
node whose kubelet is dead. PodGC then force-deletes the pods stuck Terminating there, so a
StatefulSet can create its rank again elsewhere; what does not tolerate the taint is evicted.

Runs stack on a node as node-isolate's do (chaos/faults/_node_hold.py, annotation
`kilocard.io/out-of-service`): a taint an operator put there first is never removed, and the
taint goes when the last holder reverts. It does not cordon.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chaos.errors import NotFound
from chaos.faults import Context, Disruption, Look
from chaos.faults._node_hold import Mark, hold, landed, release
from chaos.faults._spec import ALLOW_EMPTY, NODES, NODES_RULES, TTL, kind, nodes
from chaos.fields import NAMESPACE
from chaos.targets import NodeSelection, select_nodes
from chaos.vocabulary import OUT_OF_SERVICE_ANNOTATION, OUT_OF_SERVICE_TAINT

SCHEMAS = {"node-out-of-service": kind(
    "node-out-of-service", "Taint nodes node.kubernetes.io/out-of-service (Kubernetes' non-graceful node shutdown): "
    "PodGC force-deletes the pods stuck Terminating there.",
    {**NODES, "ttl_seconds": TTL, "allow_empty": ALLOW_EMPTY}, ["ttl_seconds"], NODES_RULES,
    {"nodes_of": {"namespace": NAMESPACE, "label_selector": "kilocard.io/tp-group=g0"}, "ttl_seconds": 600})}
REVERTIBLE = True
EFFECT = "NoExecute"
MARK = Mark(OUT_OF_SERVICE_TAINT, "nodeshutdown", OUT_OF_SERVICE_ANNOTATION, cordon=False)


@dataclass(frozen=True)
class Spec:
    kind: str
    nodes: NodeSelection
    ttl_seconds: float
    allow_empty: bool


def build(values: dict[str, Any], where: str) -> Spec:
    return Spec(kind=values["kind"], nodes=nodes(values), ttl_seconds=values["ttl_seconds"],
                allow_empty=values["allow_empty"])


def targets(ctx: Context, spec: Spec, where: str) -> list[dict[str, Any]]:
    return [{"node": name} for name in select_nodes(ctx.kube, spec.nodes, where, ctx.run_id)]


def prepare(ctx: Context, spec: Spec, target: dict[str, Any], fault_id: str) -> dict[str, Any]:
    return {"node": target["node"], "holder": f"{ctx.run_id}/{fault_id}"}


def disrupts(spec: Spec, target: dict[str, Any]) -> Disruption:
    return Disruption(node=target["node"], evicts="node")  # NoExecute: every pod without a toleration goes


def apply(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> dict[str, Any]:
    ctx.kube.update_node(target["node"], lambda node: hold(node, MARK, undo["holder"], EFFECT))
    return undo


def verify(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> Look:
    return landed(ctx.kube.read_node_raw(target["node"]), MARK, EFFECT)


def revert(ctx: Context, undo: dict[str, Any]) -> None:
    try:
        ctx.kube.update_node(undo["node"], lambda node: release(node, MARK, undo["holder"]))
    except NotFound:
        pass
