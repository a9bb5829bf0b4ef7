"""npu-isolate: take Ascend NPU chips out of service the way MindX DL does, through the API alone:
their names join `ManuallySeparateNPU` in the node's device-info ConfigMap
(`kube-system/mindx-dl-deviceinfo-<node>`, chaos.mindx), which the Ascend device plugin honours by
reporting the chip Unhealthy (allocatable drops by one). The plugin evicts nothing: the pod on the
chip stays until a controller (ClusterD and the scheduler, or the reference remediator) moves it.

Runs stack on a chip, each revert taking away only its own part. Who holds which chip, and which
names kilocard itself added, is kept in the ConfigMap's annotation `kilocard.io/npu-separation`,
written in the same read-modify-write (resourceVersion: a 409 reads again) as the key:

    {"holders": {"<run>/<fault id>": ["Ascend910-3"]}, "placed": ["Ascend910-3"], "created_key": false}

A name someone else listed is never kilocard's to remove; the last holder's revert removes what
kilocard placed, keeping every other name in its order, so the key reads as it did before (and
goes away again if kilocard created it). The plugin's own writes rewrite only `DeviceInfoCfg`
(its UpdateTime and CheckCode).

Caveats from the plugin's source (docs/research/ascend-sources.md): a running plugin honours only
removals from the key, adds names at its next start, and may rewrite the whole ConfigMap (its
cache's names, no annotation of ours). So the undo record keeps what this fault added too: a
revert that finds the annotation gone still removes the name it added, and only that. The
testbed's plugin honours additions at once and rewrites only `DeviceInfoCfg`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from chaos import mindx
from chaos.agent.protocol import CONFIRMED, INCONCLUSIVE, MISMATCH
from chaos.errors import NotFound, SpecError
from chaos.faults import Context, Disruption, Look
from chaos.faults._spec import ALLOW_EMPTY, CARD, CARD_RULE, CARDS, NODES, NODES_RULES, TTL, cards, kind, nodes
from chaos.faults.agent_faults import check_cards
from chaos.ledger import Record
from chaos.targets import NodeSelection, select_nodes
from chaos.vocabulary import card_resource_of

SCHEMAS = {"npu-isolate": kind(
    "npu-isolate", "Isolate Ascend NPU chips as MindX DL does: their names join ManuallySeparateNPU in the node's "
    "device-info ConfigMap; the device plugin reports them Unhealthy (allocatable drops), evicting nothing.",
    {**NODES, "card": CARD, "cards": CARDS, "ttl_seconds": TTL, "allow_empty": ALLOW_EMPTY},
    ["ttl_seconds"], [*NODES_RULES, CARD_RULE], {"nodes": ["worker-1"], "cards": [3], "ttl_seconds": 300})}
REVERTIBLE = True
ANNOTATION = "kilocard.io/npu-separation"


@dataclass(frozen=True)
class Spec:
    kind: str
    nodes: NodeSelection
    cards: tuple[int, ...]
    ttl_seconds: float
    allow_empty: bool
    card_field: str = "cards"  # how the input named the chips, for error messages


def build(values: dict[str, Any], where: str) -> Spec:
    card_field, indices = cards(values)
    return Spec(kind=values["kind"], nodes=nodes(values), cards=indices, ttl_seconds=values["ttl_seconds"],
                allow_empty=values["allow_empty"], card_field=card_field)


def targets(ctx: Context, spec: Spec, where: str) -> list[dict[str, Any]]:
    return [{"node": n, "card": c} for n in select_nodes(ctx.kube, spec.nodes, where, ctx.run_id) for c in spec.cards]


def check(ctx: Context, spec: Spec, found: list[dict[str, Any]], where: str,
          earlier: list[tuple[str, Record]]) -> None:
    """Each node has the chips and a device-info ConfigMap (else no Ascend device plugin runs there)."""
    nodes = sorted({t["node"] for t in found})
    check_cards(ctx, nodes, spec.cards, f"{where}.{spec.card_field}")
    for node in nodes:
        try:
            ctx.kube.read_config_map(mindx.DEVICE_INFO_NAMESPACE, mindx.device_info_name(node))
        except NotFound:
            raise SpecError(f"{where}.nodes: node {node} has no ConfigMap {mindx.DEVICE_INFO_NAMESPACE}/"
                            f"{mindx.device_info_name(node)}: is the Ascend device plugin running there?") from None


def prepare(ctx: Context, spec: Spec, target: dict[str, Any], fault_id: str) -> dict[str, Any]:
    return {"node": target["node"], "chip": chip_of(ctx, target), "holder": f"{ctx.run_id}/{fault_id}"}


def chip_of(ctx: Context, target: dict[str, Any]) -> str:
    """The chip's name (`Ascend910-3`): the card resource's, the one the node offers if not given."""
    resource = ctx.card_resource or card_resource_of([ctx.kube.read_node_raw(target["node"])])
    return mindx.chip_name(resource, int(target["card"]))


def reported(ctx: Context, node: str, chip: str, suffix: str) -> Look:
    """Does the node's device plugin list the chip under `<resource><suffix>` in its device-info
    ConfigMap (what the scheduler and ClusterD act on)?"""
    resource = f"huawei.com/{chip.rpartition('-')[0]}"
    try:
        cm = ctx.kube.read_config_map(mindx.DEVICE_INFO_NAMESPACE, mindx.device_info_name(node))
        devices = mindx.device_list_of((cm.get("data") or {}).get(mindx.DEVICE_INFO_KEY) or "")
    except NotFound:
        return Look(INCONCLUSIVE, f"node {node} has no device-info ConfigMap (no Ascend device plugin reports here)")
    except (ValueError, KeyError, TypeError):
        return Look(INCONCLUSIVE, f"node {node}'s device-info ConfigMap cannot be read")
    if chip in mindx.listed(devices, resource, suffix):
        return Look(CONFIRMED, f"the device plugin of {node} lists {chip} as {resource}{suffix}")
    return Look(MISMATCH, f"the device plugin of {node} does not list {chip} as {resource}{suffix}")


def verify(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> Look:
    """Listed in ManuallySeparateNPU is not enough: the plugin must report the chip Unhealthy (a
    real one reads additions only when it restarts)."""
    return reported(ctx, undo["node"], undo["chip"], "-Unhealthy")


def disrupts(spec: Spec, target: dict[str, Any]) -> Disruption:
    """The chip's pod is driven off: not by the plugin, but by the controllers that reschedule off a
    separated chip (ClusterD and its scheduler), as a drained GPU's pod is."""
    return Disruption(node=target["node"], cards=(int(target["card"]),), evicts="cards")


def _state(cm: dict[str, Any]) -> dict[str, Any]:
    text = (cm["metadata"].get("annotations") or {}).get(ANNOTATION)
    try:
        state = json.loads(text) if text else {}
    except ValueError:
        state = {}
    return {"holders": dict(state.get("holders") or {}), "placed": list(state.get("placed") or []),
            "created_key": bool(state.get("created_key"))}


def hold(cm: dict[str, Any], holder: str, chip: str) -> dict[str, Any] | None:
    """The patch that adds `holder` (and, if no one listed it, the chip's name)."""
    state, data = _state(cm), cm.get("data") or {}
    if holder in state["holders"]:
        return None
    names = mindx.separated(data.get(mindx.SEPARATED_KEY))
    if not state["holders"]:
        state["created_key"] = mindx.SEPARATED_KEY not in data
    state["holders"][holder] = [chip]
    if chip not in names:
        names.append(chip)
        state["placed"].append(chip)
    return {"data": {mindx.SEPARATED_KEY: ",".join(names)},
            "metadata": {"annotations": {ANNOTATION: json.dumps(state, sort_keys=True)}}}


def release(cm: dict[str, Any], holder: str) -> dict[str, Any] | None:
    """The patch that takes `holder` off, and the names kilocard placed that nobody holds now."""
    state, data = _state(cm), cm.get("data") or {}
    if holder not in state["holders"]:
        return None  # reverted already, or never applied
    del state["holders"][holder]
    wanted = {chip for chips in state["holders"].values() for chip in chips}
    gone = [chip for chip in state["placed"] if chip not in wanted]
    names = [n for n in mindx.separated(data.get(mindx.SEPARATED_KEY)) if n not in gone]
    state["placed"] = [chip for chip in state["placed"] if chip in wanted]
    value: str | None = ",".join(names)
    annotation: str | None = json.dumps(state, sort_keys=True)
    if not state["holders"]:
        annotation = None
        if state["created_key"] and not names:
            value = None
    return {"data": {mindx.SEPARATED_KEY: value}, "metadata": {"annotations": {ANNOTATION: annotation}}}


def forget(cm: dict[str, Any], chip: str) -> dict[str, Any] | None:
    """The patch for a ConfigMap rewritten without our annotation: the chip this fault added goes,
    every other name stays (None when the rewrite dropped it already)."""
    names = mindx.separated((cm.get("data") or {}).get(mindx.SEPARATED_KEY))
    if chip not in names:
        return None
    return {"data": {mindx.SEPARATED_KEY: ",".join(n for n in names if n != chip)}}


def apply(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> dict[str, Any]:
    added: list[bool] = [False]

    def change(cm: dict[str, Any]) -> dict[str, Any] | None:
        state = _state(cm)
        if undo["holder"] in state["holders"]:  # applied already (a retry): what it added then
            added[0] = undo["chip"] in state["placed"]
            return None
        added[0] = undo["chip"] not in mindx.separated((cm.get("data") or {}).get(mindx.SEPARATED_KEY))
        return hold(cm, undo["holder"], undo["chip"])

    ctx.kube.update_config_map(mindx.DEVICE_INFO_NAMESPACE, mindx.device_info_name(undo["node"]), change)
    return {**undo, "added": added[0]}


def revert(ctx: Context, undo: dict[str, Any]) -> None:
    def change(cm: dict[str, Any]) -> dict[str, Any] | None:
        if ANNOTATION in (cm["metadata"].get("annotations") or {}) or not undo.get("added"):
            return release(cm, undo["holder"])
        return forget(cm, undo["chip"])  # rewritten by someone without our annotation

    try:
        ctx.kube.update_config_map(mindx.DEVICE_INFO_NAMESPACE, mindx.device_info_name(undo["node"]), change)
    except NotFound:
        pass  # the plugin's ConfigMap is gone with the node: nothing of ours is left
