"""npu-fault: a fault on Ascend NPU chips, by one of two paths (`via`, default `auto`).

- **clusterd**, where MindCluster's ClusterD runs (its Service `mindx-dl/clusterd-grpc-svc` exists):
  ClusterD's public fault API, in its ConfigMap form. One ConfigMap per chip, labelled
  `mc-consumer-publicfault=true`, whose `PublicFault` message says `occur` for an NPU or Network
  fault with a 9-digit code ClusterD's configuration lists (220001001: SeparateNPU), from a reporter
  it lists (CCAE). No agent and no privilege: creating a ConfigMap is all it takes. Deleting the
  ConfigMap clears nothing in ClusterD, so the revert rewrites it to `recover` and deletes it only
  `RECOVER_SECONDS` later: an informer that re-lists in between would otherwise see it vanish
  while it still said `occur`.
- **agent**, elsewhere: the node agent's `npu-fault` kind (chaos/agent/kinds/npu.py), with the
  device plugin's hex code and handling level. On a real node the agent can bring a chip's
  network link down (hccn_tool); it refuses chip faults, which no tool injects into DCMI.
Both expire: the agent path by the agent's TTL, the ClusterD path by the ledger's (the in-cluster
reaper reverts what a dead runner left). A field only one path uses (`level`, `speed`: the agent's;
`namespace`, `reporter`, `allow_unlisted`: ClusterD's) is refused on the other, so `via: auto`
never silently drops what an experiment asked for.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from chaos import mindx
from chaos.agent import protocol
from chaos.agent import schema as agent_schema
from chaos.agent.protocol import CONFIRMED, INCONCLUSIVE, MISMATCH
from chaos.errors import Conflict, KubeError, NotFound, SpecError
from chaos.faults import Context, Disruption, Look, agent_faults, npu_isolation
from chaos.faults._spec import (
    ALLOW_EMPTY,
    CARD,
    CARD_RULE,
    CARDS,
    NODES,
    NODES_RULES,
    TTL,
    cards,
    kind,
    nodes,
)
from chaos.fields import boolean, choice, described, optional, text
from chaos.ledger import Record
from chaos.targets import NodeSelection, select_nodes
from chaos.vocabulary import RUN_LABEL, card_resource_of

REVERTIBLE = True
VIAS = ("auto", "clusterd", "agent")
DEFAULT_LEVEL = "SeparateNPU"  # the device plugin isolates the chip
SCHEMAS = {"npu-fault": kind(
    "npu-fault", "A fault code on Ascend NPU chips: through ClusterD's public fault API where ClusterD runs (a "
    "ConfigMap, no agent), else through the node agent.",
    {**NODES, "card": CARD, "cards": CARDS,
     "via": choice(VIAS, "the path: ClusterD where its Service exists (auto), or always one of the two", "auto"),
     "fault_type": choice(("NPU", "Network"), "the chip itself, or its parameter-plane network", "NPU"),
     "code": optional(text("the fault code: ClusterD's 9 digits (default 220001001), or the device plugin's hex "
                           "through the agent (default 80E18402)", example="220001001")),
     # A path's own field has no default of its own: given on the other path, it is refused.
     "level": described({"enum": [*mindx.LEVELS, None]}, "through the agent: the device plugin's handling level "
                        f"(default {DEFAULT_LEVEL})", None, None),
     "speed": optional(agent_schema.SPEED.schema()),
     "namespace": optional(text("through ClusterD: the public fault ConfigMap's namespace (default "
                                f"{mindx.CLUSTERD_NAMESPACE})", example=mindx.CLUSTERD_NAMESPACE)),
     "reporter": optional(text("through ClusterD: the public fault's resource, who reports it, one ClusterD lists "
                               f"(default {mindx.PUBLIC_REPORTERS[0]})", example=mindx.PUBLIC_REPORTERS[0])),
     "allow_unlisted": boolean("through ClusterD: send a code or reporter its default configuration does not list",
                               False),
     "ttl_seconds": TTL, "allow_empty": ALLOW_EMPTY},
    ["ttl_seconds"], [*NODES_RULES, CARD_RULE], {"nodes": ["worker-1"], "card": 3, "ttl_seconds": 300})}
DEFAULT_CODES = {"clusterd": "220001001", "agent": "80E18402"}  # SeparateNPU in ClusterD's and the plugin's lists
FIELDS_OF = {"agent": ("level", "speed"), "clusterd": ("namespace", "reporter", "allow_unlisted")}
RECOVER_SECONDS = 3.0
_PUBLIC_CODE = re.compile(r"^\d{9}$")


@dataclass(frozen=True)
class Spec:
    kind: str
    nodes: NodeSelection
    cards: tuple[int, ...]
    via: str
    fault_type: str  # NPU (the chip) | Network (its parameter-plane link)
    code: str | None  # None: the path's default
    level: str | None  # None: SeparateNPU
    speed: float | None  # None: the kind's default
    namespace: str | None  # None: mindx-dl
    reporter: str | None  # the public fault's `resource`, who reports it to ClusterD (None: CCAE)
    allow_unlisted: bool
    ttl_seconds: float
    allow_empty: bool
    card_field: str = "cards"  # how the input named the chips, for error messages

    @property
    def params(self) -> dict[str, Any]:
        """The agent kind's parameters."""
        params = {"code": self.code or DEFAULT_CODES["agent"], "level": self.level or DEFAULT_LEVEL,
                  "type": "chip" if self.fault_type == "NPU" else "network"}
        return params if self.speed is None else {**params, "speed": self.speed}


def build(values: dict[str, Any], where: str) -> Spec:
    card_field, indices = cards(values)
    fields = {k: v for k, v in values.items() if k not in (*NODES, "card", "cards")}
    spec = Spec(**fields, nodes=nodes(values), cards=indices, card_field=card_field)
    if spec.via != "auto":  # the path is known: its rules are checked now (auto's, once the cluster says)
        check_path(spec, spec.via, where)
    return spec


def check_path(spec: Spec, via: str, where: str, why: str = "") -> None:
    """The rules of the path taken: no field of the other path; ClusterD discards a public fault
    that breaks its own (a code or reporter it does not list); the agent refuses bad parameters."""
    other = "clusterd" if via == "agent" else "agent"
    given = [name for name in FIELDS_OF[other] if getattr(spec, name) not in (None, False)]
    if given:
        raise SpecError(f"{where}.{given[0]}: only for the {other} path, and this fault goes through the "
                        f"{via} path{why}")
    if via == "agent":
        try:
            protocol.validate({"kind": "npu-fault", "target": {"card": spec.cards[0]}, "params": spec.params,
                               "ttl_seconds": spec.ttl_seconds, "run_id": "check"})
        except protocol.FaultError as exc:
            name = spec.card_field if exc.field.startswith("target") else exc.field.removeprefix("params.")
            raise SpecError(f"{where}.{name}: {str(exc).split(': ', 1)[-1]}{why}") from None
        return
    code = spec.code or DEFAULT_CODES["clusterd"]
    if not _PUBLIC_CODE.match(code):
        raise SpecError(f"{where}.code: expected ClusterD's 9-digit fault code (like 220001001), got {code!r}{why}")
    if mindx.public_level(code) is None and not spec.allow_unlisted:
        raise SpecError(f"{where}.code: ClusterD's default publicFaultCode does not list {code}, so it would "
                        f"discard the fault (listed: {', '.join(mindx.PUBLIC_SEPARATE_CODES[:3])}, ...); set "
                        f"allow_unlisted if this cluster's configuration lists it{why}")
    reporter = spec.reporter or mindx.PUBLIC_REPORTERS[0]
    if reporter not in mindx.PUBLIC_REPORTERS and not spec.allow_unlisted:
        raise SpecError(f"{where}.reporter: ClusterD's default publicFaultResource does not list {reporter!r}, so "
                        f"it would discard the fault (listed: {', '.join(mindx.PUBLIC_REPORTERS)}); set "
                        f"allow_unlisted if this cluster's configuration lists it{why}")


def _via(ctx: Context, spec: Spec, where: str) -> str:
    if spec.via != "auto":
        return spec.via
    try:
        ctx.kube.get_object("v1", "Service", mindx.CLUSTERD_SERVICE, mindx.CLUSTERD_NAMESPACE)
        return "clusterd"
    except NotFound:
        return "agent"
    except KubeError as exc:
        if exc.status != 403:
            raise
        raise SpecError(f"{where}.via: auto cannot tell whether ClusterD runs here (may not get Service "
                        f"{mindx.CLUSTERD_NAMESPACE}/{mindx.CLUSTERD_SERVICE}: deploy/ascend grants it); "
                        "set via: clusterd or via: agent") from None


def targets(ctx: Context, spec: Spec, where: str) -> list[dict[str, Any]]:
    nodes = select_nodes(ctx.kube, spec.nodes, where, ctx.run_id)
    via = _via(ctx, spec, where) if nodes else spec.via
    return [{"node": n, "card": c, "via": via} for n in nodes for c in spec.cards]


def check(ctx: Context, spec: Spec, found: list[dict[str, Any]], where: str,
          earlier: list[tuple[str, Record]]) -> None:
    nodes = sorted({t["node"] for t in found})
    agent_faults.check_cards(ctx, nodes, spec.cards, f"{where}.{spec.card_field}")
    via = found[0]["via"] if found else spec.via
    check_path(spec, via, where, "" if spec.via != "auto" else
               f" (via auto: ClusterD {'runs' if via == 'clusterd' else 'does not run'} here)")
    if via == "agent":
        ctx.kube.batch(lambda n: agent_faults.reachable(ctx, n, where), nodes)


def prepare(ctx: Context, spec: Spec, target: dict[str, Any], fault_id: str) -> dict[str, Any]:
    if target["via"] == "agent":
        return {"via": "agent", **agent_faults.undo_for(ctx, "npu-fault", target["node"], {"card": target["card"]})}
    name = re.sub(r"[^a-z0-9.-]", "-", f"kilocard-{ctx.run_id}-{fault_id}-{target['node']}-{target['card']}".lower())
    return {"via": "clusterd", "node": target["node"], "card": target["card"],
            "namespace": spec.namespace or mindx.CLUSTERD_NAMESPACE, "name": name[:253].strip("-."),
            "public_id": f"kilocard-{ctx.run_id}-{fault_id}"[:128], "type": spec.fault_type,
            "code": spec.code or DEFAULT_CODES["clusterd"], "reporter": spec.reporter or mindx.PUBLIC_REPORTERS[0]}


def disrupts(spec: Spec, target: dict[str, Any]) -> Disruption:
    return Disruption(node=target["node"], cards=(int(target["card"]),))


def _message(undo: dict[str, Any], assertion: str) -> dict[str, str]:
    now = int(time.time() * 1000)
    fault = mindx.npu_public_fault(undo["public_id"], undo["type"], undo["code"], now, assertion,
                                   [(undo["node"], [int(undo["card"])])], "kilocard chaos experiment")
    return {mindx.PUBLIC_FAULT_KEY: mindx.public_fault(f"{undo['public_id']}-{assertion}", now, [fault],
                                                       undo["reporter"])}


def _say(ctx: Context, undo: dict[str, Any], assertion: str) -> None:
    """Write the ConfigMap with this assertion (created if it is not there)."""
    data = _message(undo, assertion)
    try:
        ctx.kube.create_config_map(undo["namespace"], {
            "metadata": {"name": undo["name"], "namespace": undo["namespace"],
                         "labels": {mindx.PUBLIC_FAULT_LABEL: "true", RUN_LABEL: ctx.run_id}},
            "data": data})
    except Conflict:
        ctx.kube.patch_config_map(undo["namespace"], undo["name"], {"data": data})


def apply(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> dict[str, Any]:
    if undo["via"] == "agent":
        return agent_faults.apply(ctx, spec, target, undo)  # type: ignore[arg-type]
    _say(ctx, undo, "occur")
    return undo


def verify(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]
           ) -> Look:
    """Through the agent: its read-back. Through ClusterD: the public fault is in place, and
    confirmed once the node's device plugin lists the chip unhealthy; ClusterD's own handling has
    no read-back, so in place but not listed is inconclusive."""
    if undo["via"] == "agent":
        return agent_faults.verify(ctx, spec, target, undo)
    try:
        cm = ctx.kube.read_config_map(undo["namespace"], undo["name"])
    except NotFound:
        return Look(MISMATCH, f"the public fault ConfigMap {undo['namespace']}/{undo['name']} is not there")
    if '"occur"' not in ((cm.get("data") or {}).get(mindx.PUBLIC_FAULT_KEY) or ""):
        return Look(MISMATCH, f"the public fault ConfigMap {undo['namespace']}/{undo['name']} does not assert occur")
    chip = mindx.chip_name(ctx.card_resource or card_resource_of([ctx.kube.read_node_raw(undo["node"])]),
                           int(undo["card"]))
    suffix = "-NetworkUnhealthy" if undo["type"] == "Network" else "-Unhealthy"
    seen = npu_isolation.reported(ctx, undo["node"], chip, suffix)
    if seen.status == CONFIRMED:
        return seen
    return Look(INCONCLUSIVE, f"the public fault is in place ({undo['name']}), and {seen.evidence}")


def revert(ctx: Context, undo: dict[str, Any]) -> None:
    if undo["via"] == "agent":
        agent_faults.revert(ctx, undo)
        return
    _say(ctx, undo, "recover")
    time.sleep(RECOVER_SECONDS)
    try:
        ctx.kube.delete_config_map(undo["namespace"], undo["name"])
    except NotFound:
        pass
