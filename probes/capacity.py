"""Capacity, the field account's formula done right: KV-cache demand from the model's shape and
the load, against the free KV capacity of Ready replicas, with 20-30 % headroom.

    KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x bytes per element
    tokens held        = requests in flight (Little's law: qps x mean request latency)
                         x tokens per request (prompt past a shared prefix + output)
                         + the shared prefix once per serving replica (prefix caching)
    demand             = tokens held x KV bytes per token
    supply             = per Ready replica, its KV cache where its engine's arguments fix it
                         (vLLM's --num-gpu-blocks-override x --block-size tokens), else its cards
                         x KV bytes per card (HBM left after weights)
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from chaos.vocabulary import DTYPE_BYTES, KV_BYTES_PER_CARD
from probes.errors import ProbeError
from probes.snapshot import ClusterSnapshot, NodeView, PodView
from probes.verdict import Contract, Verdict, failed, passed

CONTRACTS = (
    Contract(
        "capacity_fits", "probe",
        asserts="the KV cache of the model's serving replicas (TP groups wholly Ready, none on `losing_nodes`, "
                "none with a pod in `without`) covers the demand (qps x latency x tokens per request past a shared "
                "prefix, plus that prefix once per serving replica, x KV bytes per token) with `headroom`; a "
                "replica's KV cache is what its engine's arguments fix (--num-gpu-blocks-override x --block-size) "
                "where they do, else its cards x `kv_bytes_per_card`",
        time_zero="none: the state now",
        interval="one snapshot, now",
        missing="no replica fails; a model-shape label missing, or a dtype not known, is an error (never a "
                "guessed size)",
        exceptions="the apiserver not answering: unknown; a shape label missing, a 4xx or a bug: error",
        outcomes=(("ok", "supply covers need"), ("failed", "need exceeds supply, or no replica"),
                  ("unknown", "the cluster could not be read")),
        judge=("probes.capacity.fits", "probes.capacity.kv_bytes_per_token")),
    Contract(
        "room_to_reschedule", "probe",
        asserts="the model's Pending replicas, and those the loss of `losing_nodes` (default: of each one of its "
                "nodes in turn) would displace, fit by first fit, largest first: a Ready, schedulable node with "
                "enough free cards in one piece, its nodeSelector and taints kept, required anti-affinity kept",
        time_zero="none: the state now",
        interval="one snapshot, now",
        missing="no replica fails; cards on a lost node do not count",
        exceptions="the apiserver not answering: unknown; a 4xx or a bug: error",
        outcomes=(("ok", "room for every scenario"), ("failed", "the first scenario with a pod that fits nowhere, "
                  "naming the moves made and why each node was refused"), ("unknown", "the cluster could not be read")),
        judge=("probes.capacity.room", "probes.capacity._place", "probes.capacity._unfit")),
)


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, dtype: str) -> int:
    if dtype not in DTYPE_BYTES:  # a guess would over- or under-state the KV supply the verdict weighs
        raise ProbeError(f"KV cache dtype {dtype!r} unknown; expected one of {', '.join(DTYPE_BYTES)}")
    return int(2 * layers * kv_heads * head_dim * DTYPE_BYTES[dtype])


@dataclass(frozen=True)
class Demand:
    qps: float
    prompt_tokens: int
    output_tokens: int
    latency_seconds: float  # mean end-to-end request time
    cached_tokens: float = 0.0  # of each prompt, a prefix every request shares: held once per replica

    def tokens_held(self) -> float:
        """Tokens the requests in flight hold of their own (the shared prefix apart)."""
        return self.qps * self.latency_seconds * (self.prompt_tokens - self.cached_tokens + self.output_tokens)


def kv_per_token_of(pod: PodView) -> int:
    labels = pod.labels
    try:
        return kv_bytes_per_token(int(labels["kilocard.io/layers"]), int(labels["kilocard.io/kv-heads"]),
                                  int(labels["kilocard.io/head-dim"]), labels.get("kilocard.io/dtype", "float16"))
    except KeyError as missing:
        raise ProbeError(f"{pod.namespace}/{pod.name} has no model-shape label {missing}") from None


def fits(snapshot: ClusterSnapshot, model: str, demand: Demand, headroom: float = 0.25,
         kv_bytes_per_card: int = KV_BYTES_PER_CARD, losing_nodes: tuple[str, ...] = (),
         namespace: str | None = None, without: frozenset[tuple[str, str]] = frozenset()) -> Verdict:
    """Does the free KV capacity of the Ready replicas (TP groups wholly Ready, none of their pods
    on `losing_nodes` or among the (namespace, name) pods `without`) cover the demand with
    `headroom` to spare?"""
    replicas = snapshot.replicas(model, namespace)
    if not replicas:
        return failed(f"{model}: no replica at all", model=model)
    per_token = kv_per_token_of(replicas[0])
    groups: dict[str, list[PodView]] = {}
    for p in replicas:
        groups.setdefault(p.group, []).append(p)
    # A group serves only whole and Ready: one rank down leaves its other ranks' cards idle.
    serving = [members for members in groups.values()
               if all(m.ready and m.node not in losing_nodes and (m.namespace, m.name) not in without for m in members)]
    supply = sum(_kv_bytes(members, per_token, kv_bytes_per_card) for members in serving)
    need = (demand.tokens_held() + demand.cached_tokens * len(serving)) * per_token * (1 + headroom)
    details = {"model": model, "kv_bytes_per_token": per_token, "need_bytes": need, "supply_bytes": supply,
               "serving_replicas": len(serving), "headroom": headroom}
    lost = f" after losing {', '.join(losing_nodes)}" if losing_nodes else ""
    if supply < need:
        return failed(f"{model}{lost}: KV demand {need / 2**30:.1f} GiB (with {headroom:.0%} headroom) exceeds "
                      f"the {supply / 2**30:.1f} GiB of {details['serving_replicas']} Ready replicas", **details)
    return passed(f"{model}{lost}: {supply / 2**30:.1f} GiB of KV cache covers {need / 2**30:.1f} GiB "
                  f"(with {headroom:.0%} headroom)", **details)


def _kv_bytes(members: list[PodView], per_token: int, kv_bytes_per_card: int) -> float:
    """A replica's KV cache in bytes: as its engine's arguments fix it, else its cards' share."""
    fixed = next((p.kv_cache_tokens for p in sorted(members, key=lambda p: p.rank) if p.kv_cache_tokens), None)
    return fixed * per_token if fixed else sum(p.cards for p in members) * kv_bytes_per_card


def cards_needed(demand: Demand, per_token: int, tp_size: int, headroom: float = 0.25,
                 kv_bytes_per_card: int = KV_BYTES_PER_CARD) -> int:
    """Cards for the demand, in whole TP groups."""
    need = demand.tokens_held() * per_token * (1 + headroom)
    groups = math.ceil(need / (kv_bytes_per_card * tp_size)) if need > 0 else 0
    return max(groups, 1) * tp_size


def _domains(snapshot: ClusterSnapshot, pod: PodView, placed: list[str]) -> set[tuple[str, str]]:
    """(topology key, value) domains a new replica must avoid: those already holding one of the
    model, for each of its required anti-affinity keys."""
    taken = set()
    for key in pod.required_anti_affinity:
        for node_name in placed:
            node = snapshot.node(node_name)
            if node is not None and key in node.labels:
                taken.add((key, node.labels[key]))
    return taken


def _unfit(pod: PodView, node: NodeView) -> str | None:
    """Why the scheduler would not put a replica of `pod`'s kind on `node`, cards and anti-affinity
    aside (those change with each scenario), or None."""
    if not node.ready:
        return "not Ready"
    if node.unschedulable:
        return "cordoned"
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return "outside the nodeSelector"
    taint = next((t for t in node.taints if not t.endswith(":PreferNoSchedule") and not pod.tolerates(t)), None)
    return f"taint {taint}" if taint else None


class Fit:
    """The scenario-independent part of placement, worked out once per room() call: each node's
    free cards, and for each kind of pod (nodeSelector and tolerations) why a node cannot take it.
    At 10,000 cards an N+1 check is a hundred scenarios over 1,250 nodes; this keeps each scenario
    to its first-fit scan."""

    def __init__(self, snapshot: ClusterSnapshot):
        self.snapshot = snapshot
        self.free = {n.name: n.cards_free for n in snapshot.nodes}
        self._static: dict[tuple[object, ...], dict[str, str | None]] = {}

    def reasons(self, pod: PodView) -> dict[str, str | None]:
        kind = (tuple(sorted(pod.node_selector.items())), pod.tolerations)
        if kind not in self._static:
            self._static[kind] = {n.name: _unfit(pod, n) for n in self.snapshot.nodes}
        return self._static[kind]

    def why_not(self, pod: PodView, node: NodeView, avoid: set[tuple[str, str]]) -> str | None:
        """Why `node` cannot take `pod` in a scenario whose replicas hold the `avoid` domains."""
        static = self.reasons(pod)[node.name]
        if static:
            return static
        return "anti-affinity" if any((k, node.labels.get(k)) in avoid for k in pod.required_anti_affinity) else None


def room(snapshot: ClusterSnapshot, model: str, losing_nodes: tuple[str, ...] | None = None,
         namespace: str | None = None) -> Verdict:
    """Could the scheduler place the model's Pending replica pods, and those that `losing_nodes`
    would displace? `()`: the pending ones only. None (N+1): the pending ones, then with the loss
    of each node that holds a replica; the first that fails, else the worst, is reported.

    A node qualifies as the scheduler sees it: Ready, schedulable, enough free cards (every bound
    pod's cards count, model or not), nodeSelector, taints tolerated, the model's required
    anti-affinity kept (its terms taken as selecting the model's replicas). Pods are placed largest
    first, first fit; cards on a lost node do not count. Free cards scattered over nodes in pieces
    smaller than the pod are named: fragmentation; nodes left out are counted by reason."""
    replicas = snapshot.replicas(model, namespace)
    if not replicas:
        return failed(f"{model}: no replica at all", model=model)
    scenarios = [tuple(losing_nodes)] if losing_nodes is not None else [()] + [
        (n,) for n in sorted({p.node for p in replicas if p.node})]
    verdicts, fit = [], Fit(snapshot)
    for lost in scenarios:
        verdict = _place(fit, model, replicas, lost)
        if not verdict.ok:
            return verdict
        verdicts.append(verdict)
    worst = max(verdicts, key=lambda v: v.details["cards_to_place"])
    if len(scenarios) > 1:
        return passed(f"{model}: room for the loss of any one of its {len(scenarios) - 1} nodes "
                      f"(worst: {worst.reason})", **worst.details)
    return worst


def _first_node(fit: Fit, pod: PodView, free: dict[str, int], avoid: set[tuple[str, str]]) -> str | None:
    """The first node, in the snapshot's order, the scheduler could put `pod` on, or None."""
    return next((n.name for n in fit.snapshot.nodes if n.name in free and free[n.name] >= pod.cards
                 and fit.why_not(pod, n, avoid) is None), None)


@dataclass(frozen=True)
class Replaced:
    """Where the pods a loss displaces would go: the moves made, and the pods that fit nowhere."""

    moves: dict[str, str]  # namespace/name -> node
    nowhere: tuple[PodView, ...]


def replace(snapshot: ClusterSnapshot, displaced: frozenset[tuple[str, str]],
            lost_nodes: frozenset[str] = frozenset(), cards_out: dict[str, int] | None = None,
            fit: Fit | None = None) -> Replaced:
    """Where the scheduler would put the replica pods that lose their place: those `displaced`
    (namespace, name), those on `lost_nodes` and those Pending, with `cards_out` cards per node
    taken out of service. First fit, largest first, as `room` places one model's, but every
    model's at once (they compete for the same free cards) and going on past a pod that fits
    nowhere, so every one is counted. A displaced pod's cards are free again on a node that stays
    (it may come back there); a lost node takes its own with it."""
    fit = fit or Fit(snapshot)
    free = {name: cards for name, cards in fit.free.items() if name not in lost_nodes}
    live = [p for p in snapshot.pods if p.model and not p.deleting]
    homeless = sorted((p for p in live if not p.node or p.node in lost_nodes or (p.namespace, p.name) in displaced),
                      key=lambda p: -p.cards)
    for p in homeless:
        if p.node in free:
            free[p.node] += p.cards
    for name, cards in (cards_out or {}).items():
        if name in free:
            free[name] = max(0, free[name] - cards)
    gone = {(p.namespace, p.name) for p in homeless}
    placed: dict[tuple[str, str], list[str]] = {}
    for p in live:
        if p.node and (p.namespace, p.name) not in gone:
            placed.setdefault((p.namespace, p.model), []).append(p.node)
    moves: dict[str, str] = {}
    nowhere: list[PodView] = []
    for pod in homeless:
        siblings = placed.setdefault((pod.namespace, pod.model), [])
        target = _first_node(fit, pod, free, _domains(snapshot, pod, siblings))
        if target is None:
            nowhere.append(pod)
            continue
        free[target] -= pod.cards
        siblings.append(target)
        moves[f"{pod.namespace}/{pod.name}"] = target
    return Replaced(moves, tuple(nowhere))


def _place(fit: Fit, model: str, replicas: list[PodView], lost: tuple[str, ...]) -> Verdict:
    """First-fit placement of the pods without a node, or on a `lost` one."""
    snapshot = fit.snapshot
    homeless = sorted((p for p in replicas if not p.node or p.node in lost), key=lambda p: -p.cards)
    placed = [p.node for p in replicas if p.node and p.node not in lost]
    free = dict(fit.free)
    for name in lost:
        free.pop(name, None)
    when = f"after losing {', '.join(lost)}" if lost else "now"
    details = {"model": model, "lost_nodes": list(lost), "pods_to_place": len(homeless),
               "cards_to_place": sum(p.cards for p in homeless)}
    moves: dict[str, str] = {}
    for pod in homeless:
        avoid = _domains(snapshot, pod, placed)
        target = _first_node(fit, pod, free, avoid)
        if target is None:
            unfit = {n.name: fit.why_not(pod, n, avoid) for n in snapshot.nodes if n.name in free}
            eligible = [name for name, reason in unfit.items() if reason is None]
            total = sum(free[name] for name in eligible)
            largest = max((free[name] for name in eligible), default=0)
            reason = (f"{total} cards free on {len(eligible)} eligible nodes but at most {largest} on any one: "
                      f"fragmentation" if total >= pod.cards else
                      f"only {total} cards free on {len(eligible)} eligible nodes")
            excluded = Counter(w for w in unfit.values() if w is not None)
            if excluded:
                reason += " (others: " + ", ".join(f"{count} {w}" for w, count in excluded.most_common(3)) + ")"
            return failed(f"{model}: {when}, {pod.namespace}/{pod.name} ({pod.cards} cards) has nowhere to go; "
                          f"{reason}", **details, unplaced=f"{pod.namespace}/{pod.name}", free_cards=total,
                          largest_free_block=largest, moves=moves)
        free[target] -= pod.cards
        placed.append(target)
        moves[f"{pod.namespace}/{pod.name}"] = target
    return passed(f"{model}: {when}, {len(homeless)} replica pods to place ({details['cards_to_place']} cards), "
                  f"room for all", **details, moves=moves)
