"""Holding a node with a taint, shared by several runs at once: what node-isolate and
node-out-of-service place, and how each revert takes away only its own part.

Which faults hold the node, and what kilocard itself placed, is kept on the node in one
annotation per kind of mark, written in the same patch as the taint (and the cordon):

    {"holders": {"<run>/<fault id>": "NoSchedule", ...}, "placed": ["NoSchedule"], "cordoned": true}

- `holders`: one entry per fault, so two faults of one run are two holders.
- `placed`: the effects whose taint kilocard added. A taint with the mark's key that was there
  before (someone else's) is never ours to remove.
- `cordoned`: kilocard set the cordon (marks that cordon: the node was schedulable before).
A release removes its holder; a taint goes only when no holder still wants its effect, and the
cordon is lifted only by the last holder, only if kilocard set it, and not while a remediator we
know of holds the node (NVSentinel's state label or taint: it lifts its own). The callers apply
these patches with `Kube.update_node`: a read-modify-write carrying the resourceVersion it was
computed from (409: read again), so a taint someone writes at the same moment survives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from chaos.agent.protocol import CONFIRMED, MISMATCH
from chaos.faults import Look
from chaos.vocabulary import cordon_held_by_other


@dataclass(frozen=True)
class Mark:
    """What a kind places on a node, and the annotation that keeps its holders."""

    taint: str
    value: str
    annotation: str
    cordon: bool


def _state(node: dict[str, Any], mark: Mark) -> dict[str, Any]:
    text = (node["metadata"].get("annotations") or {}).get(mark.annotation)
    try:
        state = json.loads(text) if text else {}
    except ValueError:
        state = {}
    return {"holders": dict(state.get("holders") or {}), "placed": list(state.get("placed") or []),
            "cordoned": bool(state.get("cordoned"))}


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(t) for t in (node.get("spec") or {}).get("taints") or []]


def _has(taints: list[dict[str, Any]], mark: Mark, effect: str) -> bool:
    return any(t["key"] == mark.taint and t["effect"] == effect for t in taints)


def _cordoned(node: dict[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def hold(node: dict[str, Any], mark: Mark, holder: str, effect: str) -> dict[str, Any] | None:
    """The patch that adds `holder` to the node's holders (None: it holds it already)."""
    state, taints = _state(node, mark), _taints(node)
    if holder in state["holders"]:
        return None
    state["holders"][holder] = effect
    if not _has(taints, mark, effect):
        taints.append({"key": mark.taint, "value": mark.value, "effect": effect})
        state["placed"].append(effect)
    spec: dict[str, Any] = {"taints": taints}
    if mark.cordon and not _cordoned(node):
        spec["unschedulable"] = True
        state["cordoned"] = True
    return {"spec": spec, "metadata": {"annotations": {mark.annotation: json.dumps(state, sort_keys=True)}}}


def landed(node: dict[str, Any], mark: Mark, effect: str) -> Look:
    """Is the mark on the node: its taint with this effect (and the cordon, where the mark cordons)?"""
    name = node["metadata"]["name"]
    if not _has(_taints(node), mark, effect):
        return Look(MISMATCH, f"node {name} has no taint {mark.taint}:{effect}")
    if mark.cordon and not _cordoned(node):
        return Look(MISMATCH, f"node {name} has the taint {mark.taint}:{effect} but is not cordoned")
    return Look(CONFIRMED, f"node {name} has the taint {mark.taint}:{effect}"
                + (" and is cordoned" if mark.cordon else ""))


def release(node: dict[str, Any], mark: Mark, holder: str) -> dict[str, Any] | None:
    """The patch that takes `holder` off the node, and what kilocard placed once nobody needs it."""
    state, taints = _state(node, mark), _taints(node)
    if holder not in state["holders"]:
        return None  # nothing of this fault's is here (reverted already, or never applied)
    del state["holders"][holder]
    wanted = set(state["holders"].values())
    gone = [e for e in state["placed"] if e not in wanted]
    taints = [t for t in taints if not (t["key"] == mark.taint and t["effect"] in gone
                                        and t.get("value") == mark.value)]
    state["placed"] = [e for e in state["placed"] if e in wanted]
    spec: dict[str, Any] = {"taints": taints}
    annotation: str | None = json.dumps(state, sort_keys=True)
    if not state["holders"]:
        annotation = None
        other = cordon_held_by_other(node["metadata"].get("labels") or {}, [t["key"] for t in taints])
        if state["cordoned"] and _cordoned(node) and other is None:
            spec["unschedulable"] = False
    return {"spec": spec, "metadata": {"annotations": {mark.annotation: annotation}}}
