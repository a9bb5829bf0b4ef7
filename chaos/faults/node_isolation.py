"""node-isolate: cordon nodes and taint them `kilocard.io/isolated=kilocard:<effect>` (NoSchedule,
or NoExecute, which evicts what does not tolerate it), optionally draining them through the
Eviction API.

Runs stack on a node. Which runs hold it, and what kilocard itself placed, is kept on the node in
one annotation (`kilocard.io/isolation`), written in the same patch as the taint and the cordon:

    {"holders": {"<run>/<fault id>": "NoSchedule", ...}, "placed": ["NoSchedule"], "cordoned": true}

- `placed`: the effects whose taint kilocard added. A taint with our key that was there before
  (someone else's) is never ours to remove.
- `cordoned`: kilocard set the cordon (the node was schedulable before the first holder).
A revert removes its fault from the holders; a taint goes only when no holder still wants its
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


def prepare(ctx: Context, spec: Spec, target: dict[str, Any], fault_id: str) -> dict[str, Any]:
    # Each fault holds the node on its own: two faults of one run (NoSchedule, then NoExecute with
    # a drain) are two holders, reverted apart.
    return {"node": target["node"], "effect": spec.effect, "run_id": ctx.run_id, "holder": f"{ctx.run_id}/{fault_id}"}


def _state(node: dict[str, Any]) -> dict[str, Any]:
    text = (node["metadata"].get("annotations") or {}).get(ISOLATION_ANNOTATION)
    try:
        state = json.loads(text) if text else {}
    except ValueError:
        state = {}
    return {"holders": dict(state.get("holders") or {}), "placed": list(state.get("placed") or []),
            "cordoned": bool(state.get("cordoned"))}


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(t) for t in (node.get("spec") or {}).get("taints") or []]


def _has(taints: list[dict[str, Any]], effect: str) -> bool:
    return any(t["key"] == ISOLATION_TAINT and t["effect"] == effect for t in taints)


def _cordoned(node: dict[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def hold(node: dict[str, Any], holder: str, effect: str) -> dict[str, Any] | None:
    """The patch that adds `holder` to the node's holders (None: it holds it already)."""
    state, taints = _state(node), _taints(node)
    if holder in state["holders"]:
        return None
    state["holders"][holder] = effect
    if not _has(taints, effect):
        taints.append({"key": ISOLATION_TAINT, "value": TAINT_VALUE, "effect": effect})
        state["placed"].append(effect)
    spec: dict[str, Any] = {"taints": taints}
    if not _cordoned(node):
        spec["unschedulable"] = True
        state["cordoned"] = True
    return {"spec": spec, "metadata": {"annotations": {ISOLATION_ANNOTATION: json.dumps(state, sort_keys=True)}}}


def release(node: dict[str, Any], holder: str) -> dict[str, Any] | None:
    """The patch that takes `holder` off the node, and what kilocard placed once nobody needs it."""
    state, taints = _state(node), _taints(node)
    if holder not in state["holders"]:
        return None  # nothing of this fault's is here (reverted already, or never applied)
    del state["holders"][holder]
    wanted = set(state["holders"].values())
    gone = [e for e in state["placed"] if e not in wanted]
    taints = [t for t in taints if not (t["key"] == ISOLATION_TAINT and t["effect"] in gone
                                        and t.get("value") == TAINT_VALUE)]
    state["placed"] = [e for e in state["placed"] if e in wanted]
    spec: dict[str, Any] = {"taints": taints}
    annotation: str | None = json.dumps(state, sort_keys=True)
    if not state["holders"]:
        annotation = None
        other = cordon_held_by_other(node["metadata"].get("labels") or {}, [t["key"] for t in taints])
        if state["cordoned"] and _cordoned(node) and other is None:
            spec["unschedulable"] = False
    return {"spec": spec, "metadata": {"annotations": {ISOLATION_ANNOTATION: annotation}}}


def release_legacy(node: dict[str, Any], run_id: str, prior_unschedulable: bool) -> dict[str, Any] | None:
    """A record written before runs could stack (undo {node, unschedulable}): its taint carried the
    run id as value, its marker was `kilocard.io/isolated-by`."""
    taints = _taints(node)
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


def apply(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> dict[str, Any]:
    ctx.kube.update_node(target["node"], lambda node: hold(node, undo["holder"], spec.effect))
    if spec.drain:
        for pod in ctx.kube.list_pods_raw(field_selector=f"spec.nodeName={target['node']}"):
            if _drained(pod):
                meta = pod["metadata"]
                pod_kill.kill(ctx, {"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
                              "evict", None, spec.eviction_deadline_seconds)
    return undo


def revert(ctx: Context, undo: dict[str, Any]) -> None:
    if "holder" in undo:
        def change(node: dict[str, Any]) -> dict[str, Any] | None:
            return release(node, undo["holder"])
    else:
        def change(node: dict[str, Any]) -> dict[str, Any] | None:
            return release_legacy(node, ctx.run_id, bool(undo.get("unschedulable")))
    try:
        ctx.kube.update_node(undo["node"], change)
    except NotFound:
        pass
