"""Tensor-parallel groups: a group that fits in one node must sit in one node (its traffic then
never crosses the network); a declared multi-node group must be complete (every rank present);
and no group may be partially Ready (a group with one rank down serves nothing while looking
half alive). After a fault on some nodes, a model's groups have recovered when each is whole,
wholly Ready, and off those nodes: judged from watch events up to a deadline."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import TYPE_CHECKING

from chaos.vocabulary import GROUP_SIZE_LABEL, MODEL_LABEL, TP_SIZE_LABEL
from probes import snapshot as snap
from probes.snapshot import ClusterSnapshot, PodView
from probes.verdict import Verdict, failed, passed

if TYPE_CHECKING:
    from chaos.kube import Kube


def check(snapshot: ClusterSnapshot, model: str | None = None, namespace: str | None = None) -> Verdict:
    groups: dict[str, list[PodView]] = defaultdict(list)
    for p in snapshot.pods:
        if not p.deleting and (model is None or p.model == model) and (namespace is None or p.namespace == namespace):
            groups[p.group].append(p)
    cards_per_node = max((n.cards_capacity for n in snapshot.nodes), default=0)
    problems: list[str] = []
    for key, members in sorted(groups.items()):
        lead = members[0]
        tp = int(lead.labels.get(TP_SIZE_LABEL, sum(m.cards for m in members) or 1))
        size = int(lead.labels.get(GROUP_SIZE_LABEL, len(members)))
        nodes = {m.node for m in members if m.node}
        if tp <= cards_per_node and len(nodes) > 1:
            problems.append(f"{key}: TP={tp} fits one node but spans {', '.join(sorted(nodes))}")
        if len(members) < size:
            problems.append(f"{key}: {len(members)} of {size} ranks present")
        ready = sum(m.ready for m in members)
        if 0 < ready < len(members):
            problems.append(f"{key}: partially Ready ({ready}/{len(members)})")
    scope = model or "all models"
    if not groups:
        return failed(f"{scope}: no TP group found", model=model)
    if problems:
        return failed(f"{scope}: " + "; ".join(problems), model=model, problems=problems)
    return passed(f"{scope}: {len(groups)} TP groups whole, each on as few nodes as its size needs",
                  model=model, groups=len(groups))


def recovered(snapshot: ClusterSnapshot, model: str, faulted: set[str], namespace: str | None = None,
              desired: int | None = None) -> Verdict:
    """Every group of `model` whole, every member Ready, none on a `faulted` node, and (given the
    workloads' `desired` pod count) as many pods as they ask for: in the moment between a kill
    and its replacement's creation the survivors alone look whole."""
    whole = check(snapshot, model, namespace)
    if not whole.ok:
        return whole
    members = snapshot.replicas(model, namespace)
    if desired is not None and len(members) < desired:
        return failed(f"{model}: {len(members)} of {desired} pods the workloads ask for", model=model,
                      present=len(members), desired=desired)
    stuck = sorted(p.name for p in members if p.node in faulted)
    if stuck:
        return failed(f"{model}: still on the faulted nodes: {', '.join(stuck)}", model=model, stuck=stuck)
    unready = sorted(p.name for p in members if not p.ready)
    if unready:
        return failed(f"{model}: not Ready: {', '.join(unready)}", model=model, unready=unready)
    return passed(f"{model}: {whole.details['groups']} TP groups whole and Ready, off the faulted nodes",
                  model=model, groups=whole.details["groups"])


def recovered_within(kube: Kube, model: str, faulted: set[str], fault_at: float, budget: float,
                     namespace: str | None = None, card_resource: str | None = None) -> Verdict:
    """Follow the model's pods (the run's follower, else a watch) until `recovered` holds or
    `budget` seconds after the fault have passed."""
    deadline = fault_at + budget
    verdict = failed(f"{model}: not observed")
    wanted = desired(kube, model, namespace)
    for s in snap.followed(kube, card_resource, namespace, f"{MODEL_LABEL}={model}",
                           until=time.monotonic() + max(0.0, deadline - time.time())):
        verdict = recovered(s, model, faulted, namespace, wanted)
        if verdict.ok:
            after = time.time() - fault_at
            return passed(f"{verdict.reason}, {after:.1f} s after the fault (budget {budget:g} s)",
                          **verdict.details, recovered_after=after)
    return failed(f"{budget:g} s after the fault: {verdict.reason}", **verdict.details, recovered_after=None)


def desired(kube: Kube, model: str, namespace: str | None) -> int | None:
    """Pods the model's Deployments and StatefulSets ask for (by their pod template's model
    label); None without a namespace to look in, or when no such workload exists (bare pods)."""
    if namespace is None:
        return None
    workloads = [*kube.list_deployments(namespace), *kube.list_statefulsets(namespace)]
    counts = [w.spec.replicas or 0 for w in workloads
              if ((w.spec.template.metadata.labels or {}).get(MODEL_LABEL)) == model]
    return sum(counts) if counts else None
