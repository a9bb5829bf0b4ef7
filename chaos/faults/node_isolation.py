"""node-isolate: cordon nodes and taint them `kilocard.io/isolated=<run>:NoSchedule` (or
NoExecute, which evicts what does not tolerate it), optionally draining them through the Eviction
API. Revert restores exactly the prior state: our taint goes, the cordon goes back to what it was
(a node cordoned before the experiment stays cordoned), our annotation goes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chaos.errors import NotFound
from chaos.faults import Context, pod_kill
from chaos.faults._spec import Fields
from chaos.targets import NodeSelection, select_nodes

KINDS = ("node-isolate",)
REVERTIBLE = True
TAINT_KEY = "kilocard.io/isolated"
ANNOTATION = "kilocard.io/isolated-by"


@dataclass(frozen=True)
class Spec:
    kind: str
    nodes: NodeSelection
    effect: str
    drain: bool
    eviction_deadline_seconds: float
    ttl_seconds: float
    allow_empty: bool


def parse(raw: Any, where: str) -> Spec:
    f = Fields(raw, where)
    f.str("kind")
    spec = Spec(kind="node-isolate", nodes=f.nodes(),
                effect=f.str("effect", "NoSchedule", ("NoSchedule", "NoExecute")), drain=f.bool("drain"),
                eviction_deadline_seconds=f.number("eviction_deadline_seconds", 60.0, high=3600),
                ttl_seconds=f.ttl(), allow_empty=f.bool("allow_empty"))
    f.done()
    return spec


def targets(ctx: Context, spec: Spec) -> list[dict[str, Any]]:
    return [{"node": name} for name in select_nodes(ctx.kube, spec.nodes, spec.kind)]


def _taints_without_ours(node: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in t.to_dict().items() if v is not None}
            for t in (node.spec.taints or []) if t.key != TAINT_KEY]


def prepare(ctx: Context, spec: Spec, target: dict[str, Any]) -> dict[str, Any]:
    node = ctx.kube.read_node(target["node"])
    return {"node": target["node"], "unschedulable": bool(node.spec.unschedulable)}


def apply(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> dict[str, Any]:
    node = ctx.kube.read_node(target["node"])
    taints = _taints_without_ours(node) + [{"key": TAINT_KEY, "value": ctx.run_id, "effect": spec.effect}]
    ctx.kube.patch_node(target["node"], {"spec": {"unschedulable": True, "taints": taints},
                                         "metadata": {"annotations": {ANNOTATION: ctx.run_id}}})
    if spec.drain:
        for pod in ctx.kube.list_pods(field_selector=f"spec.nodeName={target['node']}").items:
            if pod.metadata.deletion_timestamp is None:
                pod_kill.kill(ctx, {"namespace": pod.metadata.namespace, "name": pod.metadata.name,
                                    "uid": pod.metadata.uid}, "evict", None, spec.eviction_deadline_seconds)
    return undo


def revert(ctx: Context, undo: dict[str, Any]) -> None:
    try:
        node = ctx.kube.read_node(undo["node"])
    except NotFound:
        return
    ctx.kube.patch_node(undo["node"], {"spec": {"unschedulable": bool(undo["unschedulable"]),
                                                "taints": _taints_without_ours(node)},
                                       "metadata": {"annotations": {ANNOTATION: None}}})
