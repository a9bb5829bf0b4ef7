"""What the loss of one failure domain does to every model, predicted from one snapshot, and the
domains ranked by it: the hunt for a fleet's weakest points.

Per model the domain touches:
    lost        its replicas (TP groups whole and Ready now) with a pod the domain ends or a node
                it takes: they stop serving at once
    nowhere     of those, the replicas the scheduler could not place again (first fit, largest
                first, every model's displaced pods at once, room, taints, nodeSelector and
                required anti-affinity kept: probes.capacity.replace): down until the domain is back
    SLO         the model's load spread evenly over the replicas left, each an M/M/1 queue with
                the service rate its replicas show now: P95 TTFT = ln 20 / (mu - lambda). Broken
                when that passes the SLO, or a replica's share reaches mu (saturated), or none is
                left; "lasting" when it stays broken once every replica that can be placed is back
    KV          the KV cache left against the demand with the field account's headroom
                (probes.capacity.fits)

Severity, worst first: outage (a model keeps no replica), lasting SLO breach, SLO breach until the
replicas are back, capacity (replicas down for good, or the KV cache short, the SLO kept),
degraded (replicas lost for a while), none. Domains rank by severity, then how many models are
hit that hard, then the models whose SLO breaks, the replicas lost for good, the share of each
model's replicas lost (summed), and the cards taken.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from probes import capacity
from probes.domains import Domain
from probes.errors import ProbeError
from probes.snapshot import ClusterSnapshot, PodView, whole_and_ready

LN20 = math.log(20)  # P95 of an exponential sojourn is ln(20) times its mean
SEVERITIES = ("none", "degraded", "capacity", "slo", "slo-lasting", "outage")


@dataclass(frozen=True)
class Load:
    """A model's traffic and what one of its replicas serves."""

    qps: float  # requests per second the model gets (at the peak planned for)
    service_rate: float  # requests per second one healthy replica serves
    slo_seconds: float  # the P95 TTFT the model must keep
    demand: capacity.Demand | None = None  # for the KV check; None: not checked

    def p95(self, replicas: int) -> float:
        """P95 TTFT with the load spread evenly over `replicas`; inf when none is left or each
        one's share reaches its service rate (the queue grows without bound)."""
        if replicas <= 0:
            return math.inf
        spare = self.service_rate - self.qps / replicas
        return LN20 / spare if spare > 0 else math.inf


@dataclass(frozen=True)
class ModelImpact:
    namespace: str
    model: str
    replicas: int  # whole and Ready now
    lost: int
    nowhere: int
    p95_now: float | None  # None: no load figures
    p95_after: float | None
    p95_lasting: float | None
    slo_seconds: float | None
    kv: str  # fits | short | unknown | unchecked
    reasons: tuple[str, ...] = ()

    @property
    def slo(self) -> str:
        """kept | broken | lasting | already (broken before the loss) | unknown."""
        if self.slo_seconds is None or self.p95_now is None or self.p95_after is None or self.p95_lasting is None:
            return "unknown"
        if self.p95_now > self.slo_seconds:
            return "already"
        if self.p95_lasting > self.slo_seconds:
            return "lasting"
        return "broken" if self.p95_after > self.slo_seconds else "kept"

    @property
    def severity(self) -> str:
        if self.replicas and self.lost >= self.replicas:
            return "outage"
        if self.slo == "lasting":
            return "slo-lasting"
        if self.slo == "broken":
            return "slo"
        if self.nowhere or self.kv == "short":
            return "capacity"
        return "degraded" if self.lost else "none"

    def describe(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "model": self.model, "replicas": self.replicas, "lost": self.lost,
                "nowhere": self.nowhere, "p95_now": _finite(self.p95_now), "p95_after": _finite(self.p95_after),
                "p95_lasting": _finite(self.p95_lasting), "slo_seconds": self.slo_seconds, "slo": self.slo,
                "kv": self.kv, "severity": self.severity, "reasons": list(self.reasons)}


@dataclass(frozen=True)
class Impact:
    domain: Domain
    models: tuple[ModelImpact, ...]
    cards: int  # cards it takes out of service, the nodes' and the pods'
    moves: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def severity(self) -> str:
        return max((m.severity for m in self.models), key=SEVERITIES.index, default="none")

    def rank_key(self) -> tuple[float, ...]:
        """Larger is worse (module docstring)."""
        level = SEVERITIES.index(self.severity)
        return (level, sum(1 for m in self.models if SEVERITIES.index(m.severity) == level),
                sum(1 for m in self.models if m.slo in ("broken", "lasting")),
                sum(m.nowhere for m in self.models),
                sum(m.lost / m.replicas for m in self.models if m.replicas), self.cards)

    def describe(self) -> dict[str, Any]:
        return {"domain": self.domain.key, "kind": self.domain.kind, "nodes": list(self.domain.where),
                "pods": sorted(f"{namespace}/{name}" for namespace, name in self.domain.pods),
                "severity": self.severity, "cards": self.cards,
                "models": [m.describe() for m in self.models if m.lost or m.nowhere or m.kv == "short"],
                "moves": self.moves}


def _finite(x: float | None) -> float | str | None:
    return "inf" if x is not None and math.isinf(x) else x


def replicas_serving(snapshot: ClusterSnapshot,
                     namespace: str | None = None) -> dict[tuple[str, str], dict[str, list[PodView]]]:
    """(namespace, model) -> its replicas whole and Ready now, by group (of every namespace, or one)."""
    groups: dict[tuple[str, str, str], list[PodView]] = defaultdict(list)
    for p in snapshot.pods:
        if p.model and not p.deleting and namespace in (None, p.namespace):
            groups[(p.namespace, p.model, p.group)].append(p)
    out: dict[tuple[str, str], dict[str, list[PodView]]] = defaultdict(dict)
    for (namespace, model, group), members in groups.items():
        if whole_and_ready(members):
            out[(namespace, model)][group] = members
    return out


def predict(snapshot: ClusterSnapshot, domain: Domain, loads: dict[tuple[str, str], Load],
            fit: capacity.Fit | None = None,
            serving: dict[tuple[str, str], dict[str, list[PodView]]] | None = None) -> Impact:
    """The loss of `domain`, on `snapshot`, for every model it takes a replica from; `loads` by
    (namespace, model), where known (a model without one has its SLO unknown)."""
    serving = replicas_serving(snapshot) if serving is None else serving

    def hit(p: PodView) -> bool:
        return p.node in domain.nodes or (p.namespace, p.name) in domain.pods

    touched = {key for key, groups in serving.items() if any(hit(p) for members in groups.values() for p in members)}
    ended = [p for p in snapshot.pods if p.model and not p.deleting and hit(p)]
    displaced = frozenset((p.namespace, p.name) for p in ended)
    placed = capacity.replace(snapshot, displaced, domain.nodes, dict(domain.cards_out), fit) if displaced \
        else capacity.Replaced({}, ())
    stranded = {(p.namespace, p.group) for p in placed.nowhere}
    models = []
    for key in sorted(touched):
        namespace, model = key
        groups = serving[key]
        lost = sum(1 for members in groups.values() if any(hit(p) for p in members))
        nowhere = sum(1 for g in groups if (namespace, g) in stranded)
        models.append(_model(snapshot, domain, namespace, model, len(groups), lost, nowhere, loads.get(key)))
    # A card taken from a pod it ends is among that pod's cards; a free one is counted on its own.
    cards = (sum(p.cards for p in ended) + sum(n.cards_free for n in snapshot.nodes if n.name in domain.nodes)
             + sum(c for node, c in domain.cards_out if node not in {p.node for p in ended}))
    return Impact(domain, tuple(models), cards, placed.moves)


def _model(snapshot: ClusterSnapshot, domain: Domain, namespace: str, model: str, replicas: int, lost: int,
           nowhere: int, load: Load | None) -> ModelImpact:
    reasons = []
    if nowhere:
        reasons.append(f"{nowhere} of the {lost} replicas lost fit nowhere else")
    kv = "unchecked"
    if load is not None and load.demand is not None:
        try:
            verdict = capacity.fits(snapshot, model, load.demand, losing_nodes=tuple(sorted(domain.nodes)),
                                    namespace=namespace, without=domain.pods)
            kv = "fits" if verdict.ok else "short"
            if not verdict.ok:
                d = verdict.details
                reasons.append(f"KV demand {d['need_bytes'] / 2**30:.1f} GiB (with {d['headroom']:.0%} headroom) over "
                               f"the {d['supply_bytes'] / 2**30:.1f} GiB of {d['serving_replicas']} replicas left")
        except ProbeError as exc:
            kv = "unknown"
            reasons.append(f"KV not checked: {exc}")
    if load is None:
        return ModelImpact(namespace, model, replicas, lost, nowhere, None, None, None, None, kv, tuple(reasons))
    now, after, lasting = load.p95(replicas), load.p95(replicas - lost), load.p95(replicas - nowhere)
    if after > load.slo_seconds:
        left = replicas - lost
        reasons.append(f"{load.qps:.1f} QPS over {left} replicas" + (
            f": P95 TTFT {after:.3f} s over the SLO's {load.slo_seconds:g} s" if math.isfinite(after) else
            ": saturated" if left else ""))
    return ModelImpact(namespace, model, replicas, lost, nowhere, now, after, lasting, load.slo_seconds, kv,
                       tuple(reasons))


def rank(snapshot: ClusterSnapshot, domains: list[Domain], loads: dict[tuple[str, str], Load],
         namespace: str | None = None) -> list[Impact]:
    """Every domain's impact on the models (of `namespace`, else all), worst first (ties keep the
    domains' order)."""
    fit, serving = capacity.Fit(snapshot), replicas_serving(snapshot, namespace)
    impacts = [predict(snapshot, d, loads, fit, serving) for d in domains]
    return sorted(impacts, key=lambda i: tuple(-x for x in i.rank_key()))
