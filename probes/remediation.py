"""Remediation: after a card fault, was the node quarantined (cordoned, tainted or labelled by the
remediator) within budget, its pods moved off it, and the other replicas left healthy?"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from chaos.vocabulary import MODEL_LABEL, QUARANTINE_LABELS, QUARANTINE_TAINTS
from probes import snapshot as snap
from probes.snapshot import ClusterSnapshot, NodeView
from probes.verdict import Verdict, failed, passed

if TYPE_CHECKING:
    from chaos.kube import Kube


def is_quarantined(node: NodeView, taint_keys: tuple[str, ...] = QUARANTINE_TAINTS) -> bool:
    return node.unschedulable and (any(t.split("=", 1)[0] in taint_keys for t in node.taints)
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


def within(kube: Kube, node: str, models: tuple[str, ...], budget: float, namespace: str | None = None,
           card_resource: str = "nvidia.com/gpu") -> Verdict:
    """Follow the cluster (by watch) until `check` passes or the budget runs out."""
    started = time.monotonic()
    deadline = started + budget
    verdict = failed(f"nothing observed within {budget:g} s")
    for _kind, _obj in kube.events("pods", namespace, MODEL_LABEL, until=deadline, raw=True):
        verdict = check(snap.fetch(kube, card_resource, namespace), node, models, namespace)
        if verdict.ok:
            return passed(f"{verdict.reason} after {time.monotonic() - started:.1f} s (budget {budget:g} s)",
                          **verdict.details, seconds=time.monotonic() - started)
    return failed(f"within {budget:g} s: {verdict.reason}", **verdict.details)
