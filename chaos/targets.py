"""Selectors -> targets: pods, TP groups, nodes; and the blast-radius arithmetic.

Selection is reproducible: candidates are sorted by (namespace, name) and sampled with a seeded
random generator, so the same seed on the same cluster picks the same targets. Pods already
terminating are never picked (killing them again proves nothing and double-counts).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from chaos.errors import SpecError
from chaos.kube import Kube

GROUP_LABELS = ("kilocard.io/tp-group", "leaderworkerset.sigs.k8s.io/group-key")
RANK_LABELS = ("apps.kubernetes.io/pod-index", "leaderworkerset.sigs.k8s.io/worker-index")


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str
    node: str | None
    group: str
    rank: int


def group_of(namespace: str, name: str, labels: dict[str, str]) -> tuple[str, int]:
    """(TP group key, rank): a labelled group, else the pod alone (rank 0)."""
    group = next((labels[k] for k in GROUP_LABELS if labels.get(k)), None)
    rank = next((int(labels[k]) for k in RANK_LABELS if str(labels.get(k, "")).isdigit()), 0)
    return f"{namespace}/{group or name}", rank


def pod_ref(pod: dict[str, Any]) -> PodRef:
    """From a pod's plain JSON (`Kube.list_pods_raw`)."""
    meta = pod["metadata"]
    group, rank = group_of(meta["namespace"], meta["name"], meta.get("labels") or {})
    return PodRef(meta["namespace"], meta["name"], meta["uid"], pod.get("spec", {}).get("nodeName"), group, rank)


def how_many(total: int, count: int | None, percent: float | None, where: str) -> int:
    """Blast radius: an absolute count or a percentage of the candidates (rounded up, at least 1)."""
    if count is not None and percent is not None:
        raise SpecError(f"{where}: give either count or percent, not both")
    if percent is not None:
        return 0 if total == 0 else max(1, math.ceil(total * percent / 100.0))
    return min(total, 1 if count is None else count)


def sample(items: list[Any], n: int, seed: int | None) -> list[Any]:
    return random.Random(seed).sample(items, min(n, len(items)))


def live_pods(kube: Kube, namespace: str | None, label_selector: str | None,
              field_selector: str | None) -> list[PodRef]:
    """Pods matching the selectors, not terminating, sorted by (namespace, name)."""
    pods = kube.list_pods_raw(namespace, label_selector, field_selector)
    alive = [pod_ref(p) for p in pods if not p["metadata"].get("deletionTimestamp")
             and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]
    return sorted(alive, key=lambda p: (p.namespace, p.name))


@dataclass(frozen=True)
class NodeSelection:
    """Named nodes (all of them, unless count/percent samples them) or a label selector."""

    names: tuple[str, ...] | None
    selector: str | None
    count: int | None
    percent: float | None
    seed: int | None


def select_nodes(kube: Kube, selection: NodeSelection, where: str) -> list[str]:
    if selection.names:
        existing = {n.metadata.name for n in kube.list_nodes()}
        missing = [n for n in selection.names if n not in existing]
        if missing:
            raise SpecError(f"{where}.nodes: no such node: {', '.join(missing)}")
        pool = sorted(selection.names)
        if selection.count is None and selection.percent is None:
            return pool
    else:
        pool = sorted(n.metadata.name for n in kube.list_nodes(selection.selector))
    return sorted(sample(pool, how_many(len(pool), selection.count, selection.percent, where), selection.seed))


def groups(pods: list[PodRef]) -> dict[str, list[PodRef]]:
    """TP group key -> member pods in rank order."""
    found: dict[str, list[PodRef]] = defaultdict(list)
    for ref in pods:
        found[ref.group].append(ref)
    return {k: sorted(v, key=lambda r: r.rank) for k, v in sorted(found.items())}
