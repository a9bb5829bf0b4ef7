"""Remediation, on one of two paths, within budget:
- quarantine (a card fault): was the node quarantined (cordoned, tainted or labelled by the
  remediator), its pods moved off it, and the other replicas left healthy?
- out of service (a lost node, whose dead kubelet confirms nothing): does the node carry
  `node.kubernetes.io/out-of-service` (or is it deleted), have its stuck Terminating pods been
  removed, and is every replica, TP groups whole, Ready elsewhere?"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.vocabulary import FIRST_DISRUPTION, OUT_OF_SERVICE_TAINT, QUARANTINE_LABELS, QUARANTINE_TAINTS
from probes import budget as budgeted
from probes import snapshot as snap
from probes import tp_groups
from probes.snapshot import ClusterSnapshot, NodeView, taint_parts
from probes.verdict import Contract, Verdict, failed, passed

if TYPE_CHECKING:
    from chaos.kube import Kube


CONTRACTS = (
    Contract(
        "remediated_within", "probe",
        asserts="at some moment within `budget` s of time zero, on `path`: quarantine, the node cordoned and "
                "tainted or labelled by the remediator, none of the models' replicas on it, every one Ready; "
                "out-of-service, the node tainted out of service (or deleted), no model pod bound to it, the "
                "models' TP groups whole and Ready",
        time_zero=f"as {FIRST_DISRUPTION}, its faults those on that node if any hit it",
        interval="[time zero, time zero + budget], at each moment the cluster changed (the run's record, then "
                 "live); the first moment it holds counts, however late the probe asks",
        missing="the node not found fails; a probe with no record reaching into the interval that starts after "
                "its budget is unknown",
        exceptions="the apiserver not answering: unknown; a 4xx, a bug, an unknown path: error",
        outcomes=(("ok", "remediated at the first such moment"), ("failed", "not at any moment within the "
                  "budget: the state at the deadline, named"), ("unknown", "no view of the interval")),
        judge=("probes.remediation.is_quarantined", "probes.remediation.check", "probes.remediation.out_of_service",
               "probes.snapshot.taint_parts", "probes.budget.first_within", "chaos.timezero.choose")),
)


def is_quarantined(node: NodeView, taint_keys: tuple[str, ...] = QUARANTINE_TAINTS) -> bool:
    return node.unschedulable and (any(taint_parts(t)[0] in taint_keys for t in node.taints)
                                   or any(label in node.labels for label in QUARANTINE_LABELS))


def check(s: ClusterSnapshot, node: str, models: tuple[str, ...], namespace: str | None = None,
          taint_keys: tuple[str, ...] = QUARANTINE_TAINTS) -> Verdict:
    view = s.node(node)
    if view is None:
        return failed(f"node {node} not found", node=node)
    if not is_quarantined(view, taint_keys):
        return failed(f"node {node} is not quarantined (cordon and one of taints {', '.join(taint_keys)})",
                      node=node)
    left = [p.name for m in models for p in s.replicas(m, namespace) if p.node == node]
    if left:
        return failed(f"node {node} quarantined but still runs {', '.join(sorted(left))}", node=node, left=left)
    unhealthy = [p.name for m in models for p in s.replicas(m, namespace) if not p.ready]
    if unhealthy:
        return failed(f"node {node} drained, but replicas not Ready elsewhere: {', '.join(sorted(unhealthy))}",
                      node=node, unhealthy=unhealthy)
    return passed(f"node {node} quarantined, drained, other replicas Ready", node=node)


def out_of_service(s: ClusterSnapshot, node: str, models: tuple[str, ...], namespace: str | None = None) -> Verdict:
    view = s.node(node)
    if view is not None and not any(taint_parts(t)[0] == OUT_OF_SERVICE_TAINT for t in view.taints):
        return failed(f"node {node} is not out of service (no {OUT_OF_SERVICE_TAINT} taint, node not deleted): "
                      f"its pods stay Terminating while its kubelet is dead", node=node)
    stuck = sorted(p.name for p in s.pods if p.node == node and p.model in models
                   and (namespace is None or p.namespace == namespace))
    if stuck:
        return failed(f"node {node} out of service, but pods still bound to it: {', '.join(stuck)}",
                      node=node, stuck=stuck)
    for model in models:
        groups = tp_groups.check(s, model, namespace)  # whole, scheduled and Ready
        if not groups.ok:
            return failed(f"node {node} out of service and emptied, but {groups.reason}", node=node)
    return passed(f"node {node} {'out of service' if view else 'deleted'}, its pods removed, every replica "
                  f"Ready elsewhere", node=node)


PATHS = {"quarantine": check, "out-of-service": out_of_service}


def within(kube: Kube, node: str, models: tuple[str, ...], budget: float, namespace: str | None = None,
           card_resource: str | None = None, path: str = "quarantine", *, fault_at: float,
           zero_is: str = "the fault", settled: float | None = None) -> Verdict:
    """The path's check at some moment within `budget` s of `fault_at`: the run's record of the
    interval, then the cluster followed live (the run's follower, else a watch) until it passes
    or the budget runs out."""
    if path not in PATHS:
        raise ValueError(f"remediation path: expected one of {', '.join(PATHS)}, got {path!r}")
    judge = PATHS[path]
    found = snap.moments(kube, card_resource, namespace, None, fault_at, fault_at + budget, settled)
    return budgeted.first_within(found, lambda s: judge(s, node, models, namespace), fault_at, budget, zero_is)
