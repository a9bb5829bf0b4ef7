"""pod-kill: kill pods picked by selectors, by DELETE (grace period) or by the Eviction API
(PodDisruptionBudgets honoured: a 429 is "blocked by PDB", retried with backoff until a deadline).
Nothing to revert: the workload's controller brings replacements, which is what is under test."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from chaos.agent.protocol import CONFIRMED, MISMATCH
from chaos.errors import Aborted, KilocardError, NotFound, TooManyRequests
from chaos.faults import Context, Disruption, Look
from chaos.faults._spec import PODS, PODS_RULES, ROUTER, SELECTED, kind
from chaos.fields import NAMESPACE
from chaos.targets import how_many, live_pods, sample

SCHEMAS = {"pod-kill": kind(
    "pod-kill", "Kill pods picked by selectors, by DELETE or through the Eviction API. Nothing to revert: the "
    "workload's controller brings replacements.", {**PODS, "router": ROUTER}, rules=PODS_RULES,
    example={"namespace": NAMESPACE, "label_selector": SELECTED, "count": 1})}
REVERTIBLE = False


class BlockedByPDB(KilocardError):
    pass


@dataclass(frozen=True)
class Spec:
    kind: str
    namespace: str | None
    label_selector: str | None
    model: str | None
    field_selector: str | None
    count: int | None
    percent: float | None
    mode: str
    grace_seconds: int | None
    seed: int | None
    eviction_deadline_seconds: float
    allow_empty: bool
    ttl_seconds: float = 0.0
    router: bool = False


def build(values: dict[str, Any], where: str) -> Spec:
    return Spec(**values)


def targets(ctx: Context, spec: Spec, where: str) -> list[dict[str, Any]]:
    pods = live_pods(ctx.kube, spec.namespace, spec.label_selector, spec.field_selector, where, spec.model,
                      spec.router)
    chosen = sample(pods, how_many(len(pods), spec.count, spec.percent, spec.kind), spec.seed, ctx.run_id)
    return [{"namespace": p.namespace, "name": p.name, "uid": p.uid, "node": p.node} for p in chosen]


def prepare(ctx: Context, spec: Any, target: dict[str, Any], fault_id: str) -> dict[str, Any]:
    return {}


def kill(ctx: Context, target: dict[str, Any], mode: str, grace_seconds: int | None, deadline_seconds: float) -> None:
    """Kill one pod incarnation (by uid); already gone counts as done."""
    namespace, name, uid = target["namespace"], target["name"], target["uid"]
    try:
        if mode == "delete":
            ctx.kube.delete_pod(namespace, name, grace_seconds, uid=uid)
            return
        deadline = time.monotonic() + deadline_seconds
        wait = 0.5
        while True:
            try:
                ctx.kube.evict_pod(namespace, name, uid=uid, grace_seconds=grace_seconds)
                return
            except TooManyRequests:
                if time.monotonic() + wait > deadline:
                    raise BlockedByPDB(f"evicting {namespace}/{name}: blocked by a PodDisruptionBudget "
                                       f"for {deadline_seconds:.0f} s") from None
                if ctx.stop.wait(wait):
                    raise Aborted(f"evicting {namespace}/{name}: stopped while a PodDisruptionBudget "
                                  "blocked it") from None
                wait = min(wait * 2, 5.0)
    except NotFound:
        pass


def disrupts(spec: Spec, target: dict[str, Any]) -> Disruption:
    return Disruption(pods=((target["namespace"], target["name"]),))  # the pod, not its node


def apply(ctx: Context, spec: Spec, target: dict[str, Any], undo: dict[str, Any]) -> dict[str, Any]:
    kill(ctx, target, spec.mode, spec.grace_seconds, spec.eviction_deadline_seconds)
    return undo


def apply_all(ctx: Context, spec: Spec, targets: list[tuple[dict[str, Any], dict[str, Any]]]
              ) -> list[dict[str, Any] | Exception] | None:
    """Every DELETE at once on the bulk connection (one outcome per target); evictions one by one,
    since each may wait out a PodDisruptionBudget."""
    if spec.mode != "delete":
        return None
    errors = ctx.kube.delete_pods([(t["namespace"], t["name"], t["uid"]) for t, _ in targets], spec.grace_seconds)
    return [undo if error is None or isinstance(error, NotFound) else error
            for (_, undo), error in zip(targets, errors, strict=True)]


def verify_all(ctx: Context, spec: Any, targets: list[tuple[dict[str, Any], dict[str, Any]]]
               ) -> list[Look | Exception]:
    """Each killed incarnation (by uid) is gone or terminating; a replacement of the same name is
    not it. Read back with the query that chose them, in one consistent LIST of metadata: a pod it
    no longer returns is gone, or no longer one of the pods the fault was aimed at (relabelled, or
    out of its field selector), as good as gone for what the fault breaks. A GET per pod took about
    as long as the kill's DELETEs."""
    try:
        listed = ctx.kube.list_pods_raw(spec.namespace, spec.label_selector, spec.field_selector, metadata_only=True)
    except KilocardError as exc:
        return [exc] * len(targets)
    found = {(m["metadata"].get("namespace"), m["metadata"].get("name")): m["metadata"] for m in listed}
    return [_landed(t, found.get((t["namespace"], t["name"]))) for t, _undo in targets]


def _landed(target: dict[str, Any], meta: dict[str, Any] | None) -> Look:
    name = f"{target['namespace']}/{target['name']}"
    if meta is None:
        return Look(CONFIRMED, f"pod {name} is gone (its selectors no longer match it)")
    if meta.get("uid") != target["uid"]:
        return Look(CONFIRMED, f"pod {name} {target['uid']} is gone (a replacement, {meta.get('uid')}, took its name)")
    if meta.get("deletionTimestamp"):
        return Look(CONFIRMED, f"pod {name} is terminating (since {meta['deletionTimestamp']})")
    return Look(MISMATCH, f"pod {name} {target['uid']} is still there and not terminating")


def revert(ctx: Context, undo: dict[str, Any]) -> None:
    """A killed pod is not brought back by us: its controller does that (or does not: the finding)."""
