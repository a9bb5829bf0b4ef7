"""tp-group-kill: kill every pod of whole tensor-parallel groups (a TP=8 pod, or the ranks of a
multi-node group: `kilocard.io/tp-group` or LeaderWorkerSet's `group-key`). rank-kill: kill only
the member of a given rank in each chosen group (rank from the StatefulSet pod index or LWS's
worker index), which stalls the whole group just the same."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chaos.faults import Context, pod_kill
from chaos.faults._spec import PODS, PODS_RULES, SELECTED, kind
from chaos.fields import NAMESPACE, integer
from chaos.targets import groups, how_many, live_pods, sample

_EXAMPLE = {"namespace": NAMESPACE, "label_selector": SELECTED}
SCHEMAS = {
    "tp-group-kill": kind("tp-group-kill", "Kill every pod of whole tensor-parallel groups (kilocard.io/tp-group or "
                          "LeaderWorkerSet's group-key).", PODS, rules=PODS_RULES, example={**_EXAMPLE, "count": 1}),
    "rank-kill": kind("rank-kill", "Kill only the member of the given rank in each chosen tensor-parallel group, "
                      "which stalls the whole group.",
                      {**PODS, "rank": integer(0, 2**31, "the rank killed in each group", example=1)}, ["rank"],
                      PODS_RULES, {**_EXAMPLE, "rank": 1, "count": 1}),
}
REVERTIBLE = False


@dataclass(frozen=True)
class Spec(pod_kill.Spec):
    rank: int | None = None


def build(values: dict[str, Any], where: str) -> Spec:
    return Spec(**values)


def targets(ctx: Context, spec: Spec, where: str) -> list[dict[str, Any]]:
    found = groups(live_pods(ctx.kube, spec.namespace, spec.label_selector, spec.field_selector, where, spec.model))
    if spec.rank is not None:
        found = {k: v for k, v in found.items() if any(m.rank == spec.rank for m in v)}
    chosen = sample(sorted(found), how_many(len(found), spec.count, spec.percent, spec.kind), spec.seed, ctx.run_id)
    return [{"namespace": m.namespace, "name": m.name, "uid": m.uid, "node": m.node, "group": key, "rank": m.rank}
            for key in sorted(chosen) for m in found[key] if spec.rank is None or m.rank == spec.rank]


prepare = pod_kill.prepare
verify_all = pod_kill.verify_all
disrupts = pod_kill.disrupts
apply = pod_kill.apply
revert = pod_kill.revert
