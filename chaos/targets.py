"""Selectors -> targets: pods, TP groups, nodes; and the blast-radius arithmetic.

Selection is reproducible: candidates are sorted by (namespace, name) and sampled with a seeded
random generator, so the same seed on the same cluster picks the same targets. A fault with no
seed of its own is seeded by its run's id: the plan the guards checked before the run is the pick
the run applies, and the journal's run id repeats it. Pods already terminating are never picked
(killing them again proves nothing and double-counts).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from chaos import routers
from chaos.errors import KubeError, SpecError
from chaos.kube import Kube
from chaos.serving import Identity
from chaos.vocabulary import group_of, natural_key
from probes import snapshot


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str
    node: str | None
    group: str
    rank: int


def pod_ref(pod: dict[str, Any], identity: Identity | None = None) -> PodRef:
    """From a pod's plain JSON (`Kube.list_pods_raw`): its TP group and rank by kilocard's or
    LeaderWorkerSet's labels, else as its serving stack says (`identity`)."""
    meta = pod["metadata"]
    if identity is not None:
        group, rank = identity.group.value, int(identity.rank.value)
    else:
        group, rank = group_of(meta["namespace"], meta["name"], meta.get("labels") or {})
    return PodRef(meta["namespace"], meta["name"], meta["uid"], pod.get("spec", {}).get("nodeName"), group, rank)


def of_model(pods: list[dict[str, Any]], model: str | None) -> list[dict[str, Any]]:
    """The pods (of one listing) that serve `model`: kilocard's label, else what their serving
    stack says (a worker that names none, by its group's or workload's); all of them for None."""
    if model is None:
        return pods
    found = snapshot.identities(pods)
    return [p for p in pods if snapshot.model_of(p, found) == model]


def routers_of(kube: Kube, pods: list[dict[str, Any]], model: str | None) -> list[dict[str, Any]]:
    """The routers among `pods`; with `model`, those whose discovery finds one of its replicas
    (read from a listing of each namespace the routers look in)."""
    found = [(p, r) for p in pods if (r := routers.router_of(p)) is not None]
    if model is None:
        return [p for p, _r in found]
    replicas = {ns: of_model(kube.list_pods_raw(ns, None), model) for ns in {r.backends_namespace for _p, r in found}}
    return [p for p, r in found if any(r.finds(x["metadata"]["namespace"], x["metadata"].get("labels") or {})
                                       for x in replicas[r.backends_namespace])]


def of_replica(pods: list[dict[str, Any]], replica: int | None, rank: int | None) -> list[dict[str, Any]]:
    """Of `pods`, those of their `replica`-th TP group (groups in the order of each one's first pod
    name, as its controller numbers them) and of `rank` in it; None leaves that choice open. A
    replica or rank no pod has picks nothing."""
    if replica is None and rank is None:
        return pods
    found = snapshot.identities(pods)
    refs = [(p, pod_ref(p, found.get((p["metadata"]["namespace"], p["metadata"]["name"])))) for p in pods]
    groups: dict[str, list[tuple[dict[str, Any], PodRef]]] = defaultdict(list)
    for p, ref in refs:
        groups[ref.group].append((p, ref))
    ordered = sorted(groups.values(), key=lambda members: min(natural_key(ref.name) for _, ref in members))
    chosen = ordered if replica is None else ordered[replica:replica + 1]
    return [p for members in chosen for p, ref in members if rank is None or ref.rank == rank]


def how_many(total: int, count: int | None, percent: float | None, where: str) -> int:
    """Blast radius: an absolute count or a percentage of the candidates (rounded up, at least 1)."""
    if count is not None and percent is not None:
        raise SpecError(f"{where}: give either count or percent, not both")
    if percent is not None:
        return 0 if total == 0 else max(1, math.ceil(total * percent / 100.0))
    return min(total, 1 if count is None else count)


def sample(items: list[Any], n: int, seed: int | None, run_id: str) -> list[Any]:
    return random.Random(run_id if seed is None else seed).sample(items, min(n, len(items)))


def refused_selector(exc: KubeError, where: str, field_name: str) -> KubeError | SpecError:
    """A selector the apiserver cannot parse (400) is bad input, named by its field."""
    if exc.status == 400:
        return SpecError(f"{where}.{field_name}: the cluster refused it ({exc})")
    return exc


def live_pods(kube: Kube, namespace: str | None, label_selector: str | None,
              field_selector: str | None, where: str = "fault", model: str | None = None,
              router: bool = False) -> list[PodRef]:
    """Pods matching the selectors and serving `model` (if given), not terminating, sorted by
    (namespace, name); with `router`, the routers among them (in front of `model`, if given)."""
    try:
        pods = kube.list_pods_raw(namespace, label_selector, field_selector)
    except KubeError as exc:
        if exc.status != 400 or not (label_selector and field_selector):
            raise refused_selector(exc, where, "label_selector" if label_selector else "field_selector") from None
        try:  # both given: find which one the apiserver refused
            kube.list_pods_raw(namespace, label_selector, None)
        except KubeError:
            raise refused_selector(exc, where, "label_selector") from None
        raise refused_selector(exc, where, "field_selector") from None
    pods = routers_of(kube, pods, model) if router else of_model(pods, model)
    found = snapshot.identities(pods)
    alive = [pod_ref(p, found.get((p["metadata"]["namespace"], p["metadata"]["name"])))
             for p in pods if not p["metadata"].get("deletionTimestamp")
             and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]
    return sorted(alive, key=lambda p: (p.namespace, p.name))


@dataclass(frozen=True)
class NodeSelection:
    """Named nodes (all of them, unless count/percent samples them), a label selector, or the
    nodes the pods matching (namespace, label selector, model) are bound to."""

    names: tuple[str, ...] | None
    selector: str | None
    count: int | None
    percent: float | None
    seed: int | None
    # (namespace, label selector, model, replica, rank)
    pods: tuple[str | None, str | None, str | None, int | None, int | None] | None = None


def select_nodes(kube: Kube, selection: NodeSelection, where: str, run_id: str) -> list[str]:
    if selection.pods is not None:
        namespace, label_selector, model, replica, rank = selection.pods
        try:  # terminating pods count: a dead node still holds them, and that is the node wanted
            bound = of_replica(of_model(kube.list_pods_raw(namespace, label_selector), model), replica, rank)
        except KubeError as exc:
            raise refused_selector(exc, where, "nodes_of.label_selector") from None
        pool = sorted({p["spec"]["nodeName"] for p in bound if (p.get("spec") or {}).get("nodeName")
                       and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")})
    elif selection.names:
        existing = {n["metadata"]["name"] for n in kube.list_nodes_raw()}
        missing = [n for n in selection.names if n not in existing]
        if missing:
            raise SpecError(f"{where}.nodes: no such node: {', '.join(missing)}")
        pool = sorted(selection.names)
        if selection.count is None and selection.percent is None:
            return pool
    else:
        try:
            pool = sorted(n["metadata"]["name"] for n in kube.list_nodes_raw(selection.selector))
        except KubeError as exc:
            raise refused_selector(exc, where, "node_selector") from None
    return sorted(sample(pool, how_many(len(pool), selection.count, selection.percent, where),
                         selection.seed, run_id))


def groups(pods: list[PodRef]) -> dict[str, list[PodRef]]:
    """TP group key -> member pods in rank order."""
    found: dict[str, list[PodRef]] = defaultdict(list)
    for ref in pods:
        found[ref.group].append(ref)
    return {k: sorted(v, key=lambda r: r.rank) for k, v in sorted(found.items())}
