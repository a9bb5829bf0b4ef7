"""Placement: do a model's replicas honour their anti-affinity and spread?

- required anti-affinity: never two live replicas in one topology domain (a Pending replacement
  is the correct outcome, not a violation);
- preferred anti-affinity and topology spread: the skew (most minus fewest replicas per domain,
  over the domains of the nodes replicas may use) must not exceed a threshold;
- around a fault: domains that hold more replicas after than before.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from chaos.vocabulary import RACK_LABEL
from probes.snapshot import ClusterSnapshot, PodView
from probes.verdict import Contract, Verdict, failed, passed

HOSTNAME = "kubernetes.io/hostname"


CONTRACTS = (
    Contract(
        "placement_holds", "probe",
        asserts="the model's scheduled replicas keep apart on `topology_key`: with required anti-affinity, at most "
                "one per domain; otherwise the skew over the domains they may use (Ready, schedulable nodes "
                "matching their nodeSelector) is at most `max_skew`; with `guaranteed`, only a declared required "
                "rule (anti-affinity or a DoNotSchedule spread) passes",
        time_zero="none: the state now",
        interval="one snapshot, now",
        missing="Pending replicas are not placed and not counted; no scheduled replica at all fails",
        exceptions="the apiserver not answering: unknown; a 4xx or a bug raised: error",
        outcomes=(("ok", "kept apart"), ("failed", "crowded, skewed, unguarded, or nothing scheduled"),
                  ("unknown", "the cluster could not be read")),
        judge=("probes.placement.anti_affinity", "probes.placement._domains")),
)


def _domains(snapshot: ClusterSnapshot, replicas: list[PodView], key: str) -> Counter[str]:
    found: Counter[str] = Counter()
    for p in replicas:
        node = snapshot.node(p.node)
        if node is not None:
            found[node.labels.get(key, f"<no {key}>")] += 1
    return found


def anti_affinity(snapshot: ClusterSnapshot, model: str, key: str = HOSTNAME, namespace: str | None = None,
                  max_skew: int = 1, guaranteed: bool = False) -> Verdict:
    """Required terms: at most one replica per domain. Otherwise (preferred, spread, or nothing
    declared) the skew over domains must stay within `max_skew`. With `guaranteed`, a spread the
    scheduler's scoring happens to give today is not enough: the replicas must declare required
    anti-affinity or a DoNotSchedule spread on `key`, or the next rescheduling may pile them up."""
    replicas = [p for p in snapshot.replicas(model, namespace) if p.node]
    if not replicas:
        return failed(f"{model}: no scheduled replica to judge", model=model)
    per_domain = _domains(snapshot, replicas, key)
    crowded = {d: n for d, n in per_domain.items() if n > 1}
    required = any(key in p.required_anti_affinity for p in replicas)
    if guaranteed and not required and not any(key in p.hard_spread for p in replicas):
        most, domain = max((n, d) for d, n in per_domain.items())
        return failed(f"{model}: nothing keeps its replicas apart (no required anti-affinity or DoNotSchedule "
                      f"spread on {key}); today {most} of {len(replicas)} replicas are on {domain}, and the next "
                      "rescheduling may put more there", model=model, crowded=crowded, unguarded=True)
    if required:
        if crowded:
            return failed(f"{model}: required anti-affinity on {key} broken: "
                          + ", ".join(f"{n} replicas on {d}" for d, n in sorted(crowded.items())),
                          model=model, crowded=crowded)
        return passed(f"{model}: {len(replicas)} replicas on {len(per_domain)} distinct {key} domains",
                      model=model, domains=len(per_domain))
    # Domains the replicas could use: Ready, schedulable nodes matching their node selector.
    selector = replicas[0].node_selector
    eligible = {n.labels[key] for n in snapshot.nodes if n.ready and not n.unschedulable and key in n.labels
                and all(n.labels.get(k) == v for k, v in selector.items())}
    counts = [per_domain.get(d, 0) for d in eligible | set(per_domain)]
    skew = max(counts) - min(counts)
    if skew > max_skew:
        return failed(f"{model}: {max(counts)} replicas share one {key} domain while another has {min(counts)} "
                      f"(skew {skew} > {max_skew})", model=model, skew=skew, crowded=crowded)
    return passed(f"{model}: skew {skew} over {len(counts)} {key} domains", model=model, skew=skew)


def collapsed(before: ClusterSnapshot, after: ClusterSnapshot, model: str, key: str = HOSTNAME,
              namespace: str | None = None) -> Verdict:
    """Around a fault: did rescheduling pile replicas into fewer domains than before?"""
    b = _domains(before, [p for p in before.replicas(model, namespace) if p.node], key)
    a = _domains(after, [p for p in after.replicas(model, namespace) if p.node], key)
    grew = {d: (b.get(d, 0), n) for d, n in a.items() if n > max(1, b.get(d, 0))}
    if grew:
        return failed(f"{model}: rescheduling crowded " + ", ".join(f"{d} ({was} -> {now})"
                                                                   for d, (was, now) in sorted(grew.items())),
                      model=model, crowded=grew)
    return passed(f"{model}: no {key} domain gained a second replica", model=model)


def layout(snapshot: ClusterSnapshot, nodes: set[str]) -> list[dict[str, Any]]:
    """Plain data for a placement grid (the report draws it): per node, its cards (capacity and
    allocatable) and the model pods on it in name order, with the cards other pods hold."""
    out = []
    for node in sorted((n for n in snapshot.nodes if n.name in nodes), key=lambda n: n.name):
        pods = sorted((p for p in snapshot.pods if p.node == node.name and not p.deleting), key=lambda p: p.name)
        model_cards = sum(p.cards for p in pods)
        out.append({"name": node.name, "rack": node.labels.get(RACK_LABEL, ""), "capacity": node.cards_capacity,
                    "allocatable": node.cards_allocatable, "unschedulable": node.unschedulable,
                    "taints": list(node.taints), "other_cards": max(0, node.cards_in_use - model_cards),
                    "pods": [{"namespace": p.namespace, "name": p.name, "model": p.model, "cards": p.cards,
                              "ready": p.ready, "group": p.group} for p in pods]})
    return out
