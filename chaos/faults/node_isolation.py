"""node-isolate: cordon nodes and taint them `kilocard.io/isolated=kilocard:<effect>` (NoSchedule,
or NoExecute, which evicts what does not tolerate it), optionally draining them through the
Eviction API.

Runs stack on a node. Which runs hold it, and what kilocard itself placed, is kept on the node in
one annotation (`kilocard.io/isolation`), written in the same patch as the taint and the cordon:

    {"holders": {"<run>": "NoSchedule", ...}, "placed": ["NoSchedule"], "cordoned": true}

- `placed`: the effects whose taint kilocard added. A taint with our key that was there before
  (someone else's) is never ours to remove.
- `cordoned`: kilocard set the cordon (the node was schedulable before the first holder).
A revert removes its run from the holders; a taint goes only when no holder still wants its
effect, and the cordon is lifted only by the last holder, only if kilocard set it, and not while
a remediator we know of holds the node (NVSentinel's state label or taint: it lifts its own). Every
change is a read-modify-write carrying the resourceVersion it was computed from (409: read again),
so a taint the node lifecycle controller or a remediator writes at the same moment survives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from chaos.errors import NotFound
from chaos.faults import Context, pod_kill
from chaos.faults._spec import Fields
from chaos.targets import NodeSelection, select_nodes
from chaos.vocabulary import ISOLATION_ANNOTATION, ISOLATION_TAINT, cordon_held_by_other

KINDS = ("node-isolate",)
REVERTIBLE = True
TAINT_VALUE = "kilocard"


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


def targets(ctx: Context, spec: Spec, where: str) -> list[dict[str, Any]]:
    return [{"node": name} for name in select_nodes(ctx.kube, spec.nodes, where)]


def prepare(ctx: Context, spec: Spec, target: dict[str, Any]) -> dict[str, Any]:
    return {"node": target["node"], "effect": spec.effect, "run_id": ctx.run_id}


def _state(node: Any) -> dict[str, Any]:
    text = (node.metadata.annotations or {}).get(ISOLATION_ANNOTATION)
    try:
        state = json.loads(text) if text else {}
    except ValueError:
        state = {}
    return {"holders": dict(state.get("holders") or {}), "placed": list(state.get("placed") or []),
            "cordoned": bool(state.get("cordoned"))}


def _taints(node: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in t.to_dict().items() if v is not None} for t in (node.spec.taints or [])]


def _has(taints: list[dict[str, Any]], effect: str) -> bool:
    return any(t["key"] == ISOLATION_TAINT and t["effect"] == effect for t in taints)


def hold(node: Any, run_id: str, effect: str) -> dict[str, Any] | None:
    """The patch that adds `run_id` to the node's holders (None: it holds it already)."""
    state, taints = _state(node), _taints(node)
    if run_id in state["holders"]:
        return None
    state["holders"][run_id] = effect
    if not _has(taints, effect):
        taints.append({"key": ISOLATION_TAINT, "value": TAINT_VALUE, "effect": effect})
        state["placed"].append(effect)
    spec: dict[str, Any] = {"taints": taints}
    if not node.spec.unschedulable:
        spec["unschedulable"] = True
        state["cordoned"] = True
    return {"spec": spec, "metadata": {"annotations": {ISOLATION_ANNOTATION: json.dumps(state, sort_keys=True)}}}


def release(node: Any, run_id: str) -> dict[str, Any] | None:
    """The patch that takes `run_id` off the node, and what kilocard placed once nobody needs it."""
    state, taints = _state(node), _taints(node)
    if run_id not in state["holders"]:
        return None  # nothing of this run's is here (reverted already, or never applied)
    del state["holders"][run_id]
    wanted = set(state["holders"].values())
    gone = [e for e in state["placed"] if e not in wanted]
    taints = [t for t in taints if not (t["key"] == ISOLATION_TAINT and t["effect"] in gone
                                        and t.get("value") == TAINT_VALUE)]
    state["placed"] = [e for e in state["placed"] if e in wanted]
    spec: dict[str, Any] = {"taints": taints}
    annotation: str | None = json.dumps(state, sort_keys=True)
    if not state["holders"]:
        annotation = None
        other = cordon_held_by_other(node.metadata.labels or {}, [t["key"] for t in taints])
        if state["cordoned"] and node.spec.unschedulable and other is None:
            spec["unschedulable"] = False
    return {"spec": spec, "metadata": {"annotations": {ISOLATION_ANNOTATION: annotation}}}


def apply(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> dict[str, Any]:
    ctx.kube.update_node(target["node"], lambda node: hold(node, undo["run_id"], spec.effect))
    if spec.drain:
        for pod in ctx.kube.list_pods_raw(field_selector=f"spec.nodeName={target['node']}"):
            meta = pod["metadata"]
            if not meta.get("deletionTimestamp"):
                pod_kill.kill(ctx, {"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
                              "evict", None, spec.eviction_deadline_seconds)
    return undo


def revert(ctx: Context, undo: dict[str, Any]) -> None:
    try:
        ctx.kube.update_node(undo["node"], lambda node: release(node, undo.get("run_id") or ctx.run_id))
    except NotFound:
        pass
