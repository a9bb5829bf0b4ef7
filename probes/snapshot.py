"""A frozen view of the cluster that every placement, TP and capacity probe reads: built from every
pod and every node as plain JSON, kept by the run's follower (no request) or listed (two requests).

The views keep only what probes use; probes are pure functions over a `ClusterSnapshot`. Pods of
models get a view each: kilocard's labels (`kilocard.io/model` and friends) when a pod has them,
else the model, replica, rank and sizes its serving stack gives it (chaos.serving, as `kilocard
discover` shows them). Every pod bound to a node counts towards the cards in use there, as the
scheduler counts them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from chaos import serving
from chaos.vocabulary import GROUP_SIZE_LABEL, MODEL_LABEL, TP_SIZE_LABEL, card_resource_of, epoch, group_of, ready

if TYPE_CHECKING:
    from chaos.kube import Kube


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
    hard_spread: tuple[str, ...] = ()  # topology keys of spread constraints with DoNotSchedule
    node_selector: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    tolerations: tuple[tuple[str, str, str, str], ...] = ()  # (key, operator, value, effect)
    ready_since: float | None = None  # epoch seconds its Ready condition last turned True
    # What the pod's serving stack says of its replica (chaos.serving), where it has no label of
    # kilocard's that says it: the tensor- and pipeline-parallel sizes and the pods in it.
    stack_tp: int | None = None
    stack_pp: int | None = None
    stack_group_size: int | None = None
    waiting: str | None = None  # why a container is not running yet, as the kubelet says (ImagePullBackOff)
    kv_cache_tokens: int | None = None  # its KV cache, where the engine's arguments fix it (serving.kv_cache_tokens)

    @property
    def tp_size(self) -> int | None:
        return _size(self.labels.get(TP_SIZE_LABEL)) or self.stack_tp

    @property
    def pp_size(self) -> int | None:
        return _size(self.labels.get(serving.PP_SIZE_LABEL)) or self.stack_pp

    @property
    def group_size(self) -> int | None:
        return _size(self.labels.get(GROUP_SIZE_LABEL)) or self.stack_group_size

    def tolerates(self, taint: str) -> bool:
        """Does one of the pod's tolerations match a "key=value:effect" taint?"""
        key, value, effect = taint_parts(taint)
        for t_key, operator, t_value, t_effect in self.tolerations:
            if (t_key in ("", key) and t_effect in ("", effect)
                    and (operator == "Exists" or t_value == value)):
                return True
        return False


def said(members: list[PodView], fact: str) -> int | None:
    """What the replica's pods say of it (`tp_size`, `pp_size`, `group_size`): the first that
    says it (a worker's command line may not)."""
    return next((value for m in members if (value := getattr(m, fact))), None)


def _size(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() and int(value) > 0 else None


def whole_and_ready(members: list[PodView]) -> bool:
    """A replica with every pod it should have (its group size, where known) and all of them Ready."""
    return len(members) == (said(members, "group_size") or len(members)) and all(p.ready for p in members)


def ready_leads(views: Iterable[PodView]) -> dict[str, float]:
    """Each replica whole and Ready (`whole_and_ready`), by its lead (rank 0, the pod that exports
    the replica's series): since when all its pods have been Ready (0.0 where a pod's Ready time
    is not known). A group whose lead is gone has none: its worker is no lead."""
    groups: dict[str, list[PodView]] = {}
    for p in views:
        groups.setdefault(p.group, []).append(p)
    return {lead.name: max(p.ready_since or 0.0 for p in members) for members in groups.values()
            if whole_and_ready(members) and (lead := next((p for p in members if p.rank == 0), None)) is not None}


def taint_parts(taint: str) -> tuple[str, str, str]:
    """(key, value, effect) of a taint as a NodeView holds it, "key=value:effect" ("key:effect"
    when it has no value)."""
    key_value, _, effect = taint.rpartition(":")
    key, _, value = key_value.partition("=")
    return key, value, effect


@dataclass(frozen=True)
class NodeView:
    name: str
    labels: dict[str, str] = field(hash=False, compare=False)
    ready: bool = True
    unschedulable: bool = False
    taints: tuple[str, ...] = ()  # "key=value:effect"
    cards_allocatable: int = 0
    cards_capacity: int = 0
    cards_in_use: int = 0  # by every pod bound here and not finished, model or not

    @property
    def cards_free(self) -> int:
        return max(0, self.cards_allocatable - self.cards_in_use)


@dataclass(frozen=True)
class ClusterSnapshot:
    pods: tuple[PodView, ...]
    nodes: tuple[NodeView, ...]
    card_resource: str = ""

    def replicas(self, model: str, namespace: str | None = None) -> list[PodView]:
        """Live (not terminating) pods of a model."""
        return [p for p in self.pods if p.model == model and not p.deleting
                and (namespace is None or p.namespace == namespace)]

    @cached_property
    def _by_name(self) -> dict[str | None, NodeView]:
        return {n.name: n for n in self.nodes}

    def node(self, name: str | None) -> NodeView | None:
        return self._by_name.get(name)

    def models(self) -> list[str]:
        return sorted({p.model for p in self.pods})


def waiting_reasons(pod: dict[str, Any]) -> list[str]:
    """Why each container not running yet waits, as the kubelet says (ImagePullBackOff), in order."""
    found = (((c.get("state") or {}).get("waiting") or {}).get("reason")
             for c in (pod.get("status") or {}).get("containerStatuses") or [])
    return [str(reason) for reason in found if reason]


def _cards(pod: dict[str, Any], card_resource: str) -> int:
    """Cards a pod holds: an extended resource's limit (requests, if given, equal it)."""
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        resources = c.get("resources") or {}
        total += int((resources.get("limits") or resources.get("requests") or {}).get(card_resource, 0))
    return total


def _finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _ready_since(pod: dict[str, Any]) -> float | None:
    if not ready(pod):
        return None
    return next((epoch(c.get("lastTransitionTime")) for c in (pod.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready"), None)


def pod_view(pod: dict[str, Any], card_resource: str, identity: serving.Identity | None = None) -> PodView | None:
    """A model's pod as the API's JSON gives it: kilocard's labels, else `identity` (what its
    serving stack says, from `identities`); None for pods of no model."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    labels = meta.get("labels") or {}
    stated: tuple[int | None, int | None, int | None] = (None, None, None)
    if MODEL_LABEL in labels:
        model = labels[MODEL_LABEL]
        group, rank = group_of(meta["namespace"], meta["name"], labels)
    elif identity is not None and identity.model is not None:
        model, group, rank = identity.model.value, identity.group.value, int(identity.rank.value)
        stated = (_size(identity.tp.value) if identity.tp else None, _size(identity.pp.value) if identity.pp else None,
                  _size(identity.group_size.value) if identity.group_size else None)
    else:
        return None
    anti = (spec.get("affinity") or {}).get("podAntiAffinity") or {}
    deleting = bool(meta.get("deletionTimestamp"))
    return PodView(
        namespace=meta["namespace"], name=meta["name"], uid=meta["uid"], node=spec.get("nodeName"),
        model=model, ready=ready(pod), deleting=deleting,
        cards=_cards(pod, card_resource), group=group, rank=rank, labels=dict(labels),
        required_anti_affinity=tuple(t["topologyKey"]
                                     for t in anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []),
        preferred_anti_affinity=tuple(t["podAffinityTerm"]["topologyKey"]
                                      for t in anti.get("preferredDuringSchedulingIgnoredDuringExecution") or []),
        spread=tuple((t["topologyKey"], int(t["maxSkew"])) for t in spec.get("topologySpreadConstraints") or []),
        hard_spread=tuple(t["topologyKey"] for t in spec.get("topologySpreadConstraints") or []
                          if t.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"),
        node_selector=dict(spec.get("nodeSelector") or {}),
        tolerations=tuple((t.get("key", ""), t.get("operator", "Equal"), t.get("value", ""), t.get("effect", ""))
                          for t in spec.get("tolerations") or []),
        ready_since=_ready_since(pod), waiting=next(iter(waiting_reasons(pod)), None), stack_tp=stated[0],
        stack_pp=stated[1], stack_group_size=stated[2], kv_cache_tokens=serving.kv_cache_tokens(pod),
    )


# serving.identify's answer per pod version (uid, resourceVersion): a run's snapshots rebuild the
# same pods at every change, and reading each pod's command line again was most of their cost.
_IDENTIFIED: dict[tuple[str, str], serving.Identity | None] = {}
_IDENTIFIED_MAX = 200_000


def _identify(pod: dict[str, Any]) -> serving.Identity | None:
    meta = pod["metadata"]
    key = (str(meta.get("uid", "")), str(meta.get("resourceVersion", "")))
    if not all(key):
        return serving.identify(pod)
    if key not in _IDENTIFIED:
        if len(_IDENTIFIED) >= _IDENTIFIED_MAX:
            _IDENTIFIED.clear()
        _IDENTIFIED[key] = serving.identify(pod)
    return _IDENTIFIED[key]


def identities(pods: Iterable[dict[str, Any]]) -> dict[tuple[str, str], serving.Identity]:
    """(namespace, name) -> what its serving stack says, for the pods without kilocard's model
    label (those read their labels alone: the fast path, and an explicit override)."""
    found = [i for p in pods if MODEL_LABEL not in (p["metadata"].get("labels") or {})
             and (i := _identify(p)) is not None]
    return {(i.namespace, i.pod): i for i in serving.complete(found)} if found else {}


def model_of(pod: dict[str, Any], found: dict[tuple[str, str], serving.Identity]) -> str | None:
    """The model a pod serves: kilocard's label, else its identity in `found` (`identities`)."""
    meta = pod["metadata"]
    labelled = (meta.get("labels") or {}).get(MODEL_LABEL)
    if labelled:
        return str(labelled)
    i = found.get((meta["namespace"], meta["name"]))
    return i.model.value if i is not None and i.model is not None else None


def may_serve(pod: dict[str, Any], model: str | None) -> bool:
    """Could the pod be one of `model`'s (any model's, for None), from itself alone? A pod that
    takes its model from its peers (a worker that names none) may."""
    labelled = (pod["metadata"].get("labels") or {}).get(MODEL_LABEL)
    if labelled:
        return model is None or labelled == model
    i = _identify(pod)
    return i is not None and (model is None or i.model is None or i.model.value == model)


def node_view(node: dict[str, Any], card_resource: str, cards_in_use: int = 0) -> NodeView:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    return NodeView(
        name=node["metadata"]["name"], labels=dict(node["metadata"].get("labels") or {}), ready=ready(node),
        unschedulable=bool(spec.get("unschedulable")),
        taints=tuple(f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in spec.get("taints") or []),
        cards_allocatable=int((status.get("allocatable") or {}).get(card_resource, 0)),
        cards_capacity=int((status.get("capacity") or {}).get(card_resource, 0)),
        cards_in_use=cards_in_use,
    )


def build(pods: Iterable[dict[str, Any]], nodes: Iterable[dict[str, Any]], card_resource: str | None = None,
          namespace: str | None = None) -> ClusterSnapshot:
    """Views of the model pods (of `namespace`, if given) and of every node with its cards in use.
    Without a `card_resource`, the one the nodes offer (vocabulary.card_resource_of)."""
    nodes, pods = list(nodes), list(pods)
    card_resource = card_resource or card_resource_of(nodes)
    in_use: dict[str, int] = {}
    views = []
    found = identities(p for p in pods if namespace is None or p["metadata"]["namespace"] == namespace)
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not _finished(pod):
            in_use[node] = in_use.get(node, 0) + _cards(pod, card_resource)
        if namespace is None or pod["metadata"]["namespace"] == namespace:
            meta = pod["metadata"]
            view = pod_view(pod, card_resource, found.get((meta["namespace"], meta["name"])))
            if view is not None:
                views.append(view)
    return ClusterSnapshot(tuple(views), tuple(node_view(n, card_resource, in_use.get(n["metadata"]["name"], 0))
                                               for n in nodes), card_resource)


class Source(Protocol):
    """Every pod and node of one cluster, kept current in this process (chaos.follower)."""

    host: str

    @property
    def alive(self) -> bool: ...

    def objects(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None: ...

    def changes(self, namespace: str | None = None) -> int: ...

    def wait(self, seen: int, namespace: str | None, timeout: float) -> bool: ...

    def subscribe(self, namespace: str | None, listener: Callable[[str, Any], None]) -> Callable[[], None]: ...

    def history(self, since: float, namespace: str | None = None, settled: float | None = None) -> Any: ...

    @property
    def recorded_from(self) -> float: ...

    def catch_up(self, at: float) -> None: ...


_sources: list[Source] = []  # while a run follows its cluster, its snapshots are read from it


def read_from(source: Source) -> None:
    _sources.append(source)


def stop_reading_from(source: Source) -> None:
    if source in _sources:
        _sources.remove(source)


def host_of(kube: Kube) -> str:
    return str(kube.api_client.configuration.host).rstrip("/")


def live_sources() -> list[Source]:
    return [s for s in _sources if s.alive]


def source_for(kube: Kube) -> Source | None:
    """The live source of `kube`'s cluster, if one runs in this process."""
    host = host_of(kube)
    return next((s for s in reversed(_sources) if s.host == host and s.alive), None)


def fetch(kube: Kube, card_resource: str | None = None, namespace: str | None = None) -> ClusterSnapshot:
    """The thin fetcher: every pod (cards in use count them all) and every node. From the run's
    follower when one runs (chaos.follower: memory, with this process's writes in); else both
    lists at once, from the apiserver's watch cache (resourceVersion=0: no etcd read, which at
    10,000 cards would load the apiserver each time a probe looks)."""
    source = source_for(kube)
    found = source.objects() if source is not None else None
    if found is None:
        listers: list[Callable[..., list[dict[str, Any]]]] = [kube.list_pods_raw, kube.list_nodes_raw]
        pods, nodes = kube.batch(lambda lister: lister(cached=True), listers)
    else:
        pods, nodes = found
    return build(pods, nodes, card_resource, namespace)


@dataclass(frozen=True)
class Moment:
    """The cluster as it was from `at` until the next moment."""

    at: float  # epoch seconds
    snapshot: ClusterSnapshot


def moments(kube: Kube, card_resource: str | None, namespace: str | None, model: str | None, since: float,
            until: float, settled: float | None = None) -> Iterator[Moment]:
    """The cluster from `since` to `until` (epoch seconds), a moment per change: as the run's
    follower recorded it (its history, from `since` or from when its view held every write made
    before), then live, a snapshot now and again after each change of the pods in `namespace`
    (those that may serve `model`, any model's for None, when no follower runs; with one, a
    node's cordon, taints, Ready or cards too). Without a record reaching back to `since`, the first moment is now.
    `settled`: when the fault's writes were done (its apply returned): no moment is judged
    before the view holds them."""
    yield from recorded(kube, card_resource, namespace, since, settled) or ()
    for s in _followed(kube, card_resource, namespace, model, until):
        yield Moment(time.time(), s)


def recorded_at(kube: Kube, card_resource: str | None, namespace: str | None, when: float) -> ClusterSnapshot | None:
    """The cluster at `when` as the run's follower recorded it (`recorded`'s first moment alone);
    None when no follower runs or its record does not reach back to `when`."""
    run = source_for(kube)
    past = run.history(when, namespace) if run is not None else None
    return None if past is None else build(past.pods, past.nodes, card_resource, namespace)


def recorded(kube: Kube, card_resource: str | None, namespace: str | None, since: float,
             settled: float | None = None) -> list[Moment] | None:
    """The cluster from `since` until now as the run's follower recorded it, a moment per change
    (see `moments`); None when no follower runs or its record does not reach back to `since`."""
    run = source_for(kube)
    past = run.history(since, namespace, settled) if run is not None else None
    if past is None:
        return None
    pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in past.pods}
    nodes = {n["metadata"]["name"]: n for n in past.nodes}
    found = [Moment(past.at, build(pods.values(), nodes.values(), card_resource, namespace))]
    for change in past.changes:
        objects = nodes if change.kind == "nodes" else pods
        if change.obj is None:
            objects.pop(change.key, None)
        else:
            objects[change.key] = change.obj
        found.append(Moment(change.at, build(pods.values(), nodes.values(), card_resource, namespace)))
    return found


@dataclass
class Readiness:
    """The model's live pods from `at` until the next change (terminating ones left out)."""

    at: float
    live: list[dict[str, Any]]  # the pods, as the API's JSON gives them
    found: dict[tuple[str, str], serving.Identity]  # `identities` of every pod then
    # Views shared by the states of one record (a pod is the same version in most of them).
    views: dict[tuple[str, str, serving.Identity | None], PodView | None]

    @cached_property
    def pods(self) -> dict[str, bool]:
        """Name -> Ready."""
        return {p["metadata"]["name"]: ready(p) for p in self.live}

    @cached_property
    def leads(self) -> dict[str, float]:
        """`ready_leads` of these pods (no card count needed: "" holds none). Asked only of the
        states a verdict's samples fall in: a record has many more."""
        views = []
        for p in self.live:
            meta = p["metadata"]
            identity = self.found.get((meta["namespace"], meta["name"]))
            key = (meta["uid"], str(meta.get("resourceVersion", "")), identity)
            if key not in self.views:
                self.views[key] = pod_view(p, "", identity)
            if (view := self.views[key]) is not None:
                views.append(view)
        return ready_leads(views)


def readiness(kube: Kube, namespace: str | None, model: str, since: float) -> list[Readiness]:
    """The model's live pods and their readiness from `since` (or from when the run's follower's
    record starts, if later) until now, at each change of one of them; [] with no record."""
    run = source_for(kube)
    if run is None:
        return []
    past = run.history(max(since, run.recorded_from), namespace)
    if past is None:
        return []
    pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in past.pods}
    views: dict[tuple[str, str, serving.Identity | None], PodView | None] = {}

    def live(at: float) -> Readiness:
        found = identities(pods.values())
        return Readiness(at, [p for p in pods.values()
                              if not p["metadata"].get("deletionTimestamp") and model_of(p, found) == model], found,
                         views)

    states = [live(past.at)]
    for change in past.changes:
        if change.kind != "pods":
            continue
        before = pods.get(change.key)
        if not any(o is not None and may_serve(o, model) for o in (before, change.obj)):
            continue  # a pod of another model, or of none
        if change.obj is None:
            pods.pop(change.key, None)
        else:
            pods[change.key] = change.obj
        states.append(live(change.at))
    return states


def recorded_from(kube: Kube) -> float | None:
    """Since when the run's follower has recorded the cluster (None: no follower)."""
    run = source_for(kube)
    return run.recorded_from if run is not None else None


def _followed(kube: Kube, card_resource: str | None, namespace: str | None, model: str | None,
              until: float) -> Iterator[ClusterSnapshot]:
    """A snapshot now, and again after each change, until `until` (epoch): with the run's
    follower, no request at all; else one watch of the namespace's pods (a model is found by
    its labels or its command line, which no label selector can say)."""
    run = source_for(kube)
    if run is None:
        for kind, obj in kube.events("pods", namespace, None, until=time.monotonic() + until - time.time(),
                                     raw=True):
            if kind == "SYNC" or may_serve(obj, model):
                yield fetch(kube, card_resource, namespace)
        return
    while True:
        seen = run.changes(namespace)
        yield fetch(kube, card_resource, namespace)
        if not run.wait(seen, namespace, until - time.time()):
            if run.alive or time.time() >= until:
                return
            yield from _followed(kube, card_resource, namespace, model, until)  # it stopped: watch
            return
