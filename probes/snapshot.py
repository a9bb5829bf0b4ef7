"""A frozen view of the cluster that every placement, TP and capacity probe reads: built from two
list calls (all pods, all nodes), so a probe over a thousand cards costs two requests.

The views keep only what probes use; probes are pure functions over a `ClusterSnapshot`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from chaos.kube import Kube, node_ready, pod_ready
from chaos.targets import group_of

MODEL_LABEL = "kilocard.io/model"


@dataclass(frozen=True)
class PodView:
    namespace: str
    name: str
    uid: str
    node: str | None
    model: str
    ready: bool
    deleting: bool
    cards: int
    group: str
    rank: int
    labels: dict[str, str] = field(hash=False, compare=False)
    required_anti_affinity: tuple[str, ...] = ()  # topology keys
    preferred_anti_affinity: tuple[str, ...] = ()
    spread: tuple[tuple[str, int], ...] = ()  # (topology key, max skew)
    node_selector: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class NodeView:
    name: str
    labels: dict[str, str] = field(hash=False, compare=False)
    ready: bool = True
    unschedulable: bool = False
    taints: tuple[str, ...] = ()  # "key=value:effect"
    cards_allocatable: int = 0
    cards_capacity: int = 0


@dataclass(frozen=True)
class ClusterSnapshot:
    pods: tuple[PodView, ...]
    nodes: tuple[NodeView, ...]
    card_resource: str = "nvidia.com/gpu"

    def replicas(self, model: str, namespace: str | None = None) -> list[PodView]:
        """Live (not terminating) pods of a model."""
        return [p for p in self.pods if p.model == model and not p.deleting
                and (namespace is None or p.namespace == namespace)]

    def node(self, name: str) -> NodeView | None:
        return next((n for n in self.nodes if n.name == name), None)

    def models(self) -> list[str]:
        return sorted({p.model for p in self.pods})


def _terms(affinity: Any, kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    anti = getattr(affinity, kind, None) if affinity else None
    if anti is None:
        return (), ()
    required = tuple(t.topology_key for t in (anti.required_during_scheduling_ignored_during_execution or []))
    preferred = tuple(t.pod_affinity_term.topology_key
                      for t in (anti.preferred_during_scheduling_ignored_during_execution or []))
    return required, preferred


def pod_view(pod: Any, card_resource: str) -> PodView | None:
    labels = pod.metadata.labels or {}
    if MODEL_LABEL not in labels:
        return None
    group, rank = group_of(pod.metadata.namespace, pod.metadata.name, labels)
    cards = 0
    for c in pod.spec.containers:
        limits = (c.resources.limits or {}) if c.resources else {}
        cards += int(limits.get(card_resource, 0))
    required, preferred = _terms(pod.spec.affinity, "pod_anti_affinity")
    spread = tuple((t.topology_key, int(t.max_skew)) for t in (pod.spec.topology_spread_constraints or []))
    return PodView(namespace=pod.metadata.namespace, name=pod.metadata.name, uid=pod.metadata.uid,
                   node=pod.spec.node_name, model=labels[MODEL_LABEL], ready=pod_ready(pod),
                   deleting=pod.metadata.deletion_timestamp is not None, cards=cards, group=group, rank=rank,
                   labels=dict(labels), required_anti_affinity=required, preferred_anti_affinity=preferred,
                   spread=spread, node_selector=dict(pod.spec.node_selector or {}))


def node_view(node: Any, card_resource: str) -> NodeView:
    return NodeView(
        name=node.metadata.name, labels=dict(node.metadata.labels or {}), ready=node_ready(node),
        unschedulable=bool(node.spec.unschedulable),
        taints=tuple(f"{t.key}={t.value or ''}:{t.effect}" for t in (node.spec.taints or [])),
        cards_allocatable=int((node.status.allocatable or {}).get(card_resource, 0)),
        cards_capacity=int((node.status.capacity or {}).get(card_resource, 0)),
    )


def build(pods: Iterable[Any], nodes: Iterable[Any], card_resource: str = "nvidia.com/gpu") -> ClusterSnapshot:
    views = tuple(v for v in (pod_view(p, card_resource) for p in pods) if v is not None)
    return ClusterSnapshot(views, tuple(node_view(n, card_resource) for n in nodes), card_resource)


def fetch(kube: Kube, card_resource: str = "nvidia.com/gpu", namespace: str | None = None) -> ClusterSnapshot:
    """The thin fetcher: two list calls."""
    pods = kube.list_pods(namespace, MODEL_LABEL).items
    return build(pods, kube.list_nodes(), card_resource)
