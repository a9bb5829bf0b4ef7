"""Tensor-parallel groups: a group is whole when every rank exists (its group-size label), is
scheduled and is Ready (a group with one rank down serves nothing while looking half alive, and
one with none Ready serves nothing at all), and one that fits in one node sits in one node (its
traffic then never crosses the network). After a fault, a model has recovered when every group is
whole, none is on a node the fault hit, and the pods are as many as its workloads ask for: judged
at each moment from time zero to the budget (probes.budget), from the run's record if the probe
comes late."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from chaos.vocabulary import FIRST_DISRUPTION
from probes import budget as budgeted
from probes import snapshot as snap
from probes.snapshot import ClusterSnapshot, PodView
from probes.verdict import Contract, Verdict, failed, passed

if TYPE_CHECKING:
    from chaos.kube import Kube


CONTRACTS = (
    Contract(
        "tp_groups_whole", "probe",
        asserts="every TP group of the model (of the namespace) has all its ranks (its group-size label), each "
                "scheduled and Ready, and a group that fits in one node sits in one node",
        time_zero="none: the state now",
        interval="one snapshot, now",
        missing="a model with no group at all fails; a rank missing, unscheduled or not Ready fails naming the "
                "group; terminating pods do not count as members",
        exceptions="the apiserver not answering (after its retries): unknown; any other error raised: error",
        outcomes=(("ok", "every group whole and Ready"), ("failed", "a group split, incomplete, unscheduled or "
                  "not Ready, or no group"), ("unknown", "the cluster could not be read")),
        judge=("probes.tp_groups.check",)),
    Contract(
        "tp_groups_recovered_within", "probe",
        asserts="at some moment within `budget` s of time zero, the model's groups are whole and Ready "
                "(tp_groups_whole), none on a node the run's faults hit as a node (not one that leaves it fit to "
                "serve what it runs: an image-pull-failure), and its pods as many as its "
                "Deployments and StatefulSets ask for",
        time_zero=FIRST_DISRUPTION,
        interval="[time zero, time zero + budget], at each moment the cluster changed: the run's record (its "
                 "follower's history, from when its view held every write made before time zero) then live; "
                 "the first moment it holds is the recovery, however late the probe asks",
        missing="a probe with no record reaching into the interval judges from its own start; one that starts "
                "after the budget with none is unknown, never judged on the present state",
        exceptions="the apiserver not answering: unknown; a 4xx (403) or a bug raised: error",
        outcomes=(("ok", "recovered at the first such moment (`recovered_after_seconds` of `budget_seconds`)"),
                  ("failed", "not recovered at any moment within the budget: the state at the deadline, named"),
                  ("unknown", "no view of the interval")),
        judge=("probes.tp_groups.check", "probes.tp_groups.recovered", "probes.budget.first_within",
               "probes.budget._from", "chaos.timezero.choose")),
)


def check(snapshot: ClusterSnapshot, model: str | None = None, namespace: str | None = None) -> Verdict:
    groups: dict[str, list[PodView]] = defaultdict(list)
    for p in snapshot.pods:
        if not p.deleting and (model is None or p.model == model) and (namespace is None or p.namespace == namespace):
            groups[p.group].append(p)
    cards_per_node = max((n.cards_capacity for n in snapshot.nodes), default=0)
    problems: list[str] = []
    for key, members in sorted(groups.items()):
        tp, pp = snap.said(members, "tp_size"), snap.said(members, "pp_size") or 1
        width = tp * pp if tp else sum(m.cards for m in members) or 1
        size = snap.said(members, "group_size") or len(members)
        nodes = {m.node for m in members if m.node}
        if width <= cards_per_node and len(nodes) > 1:
            shape = f"TP={width}" if pp == 1 else f"TP={tp} x PP={pp}"
            problems.append(f"{key}: {shape} fits one node but spans {', '.join(sorted(nodes))}")
        if len(members) < size:
            problems.append(f"{key}: {len(members)} of {size} ranks present")
        pending = sorted(m.name for m in members if not m.node)
        if pending:
            problems.append(f"{key}: not scheduled ({', '.join(pending)})")
        ready = sum(m.ready for m in members)
        if ready < len(members):
            waiting = "".join(f"; {m.name} {m.waiting}" for m in members if m.waiting)
            problems.append(f"{key}: {'partially Ready' if ready else 'not Ready'} ({ready}/{len(members)}{waiting})")
    scope = model or "all models"
    if not groups:
        return failed(f"{scope}: no TP group found", model=model)
    if problems:
        return failed(f"{scope}: " + "; ".join(problems), model=model, problems=problems)
    return passed(f"{scope}: {len(groups)} TP groups whole and Ready, each on as few nodes as its size needs",
                  model=model, groups=len(groups))


def recovered(snapshot: ClusterSnapshot, model: str, faulted: set[str], namespace: str | None = None,
              desired: int | None = None) -> Verdict:
    """Every group of `model` whole and Ready, none on a `faulted` node, and (given the
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
    return passed(f"{model}: {whole.details['groups']} TP groups whole and Ready, off the faulted nodes",
                  model=model, groups=whole.details["groups"])


def recovered_within(kube: Kube, model: str, faulted: set[str], fault_at: float, budget: float,
                     namespace: str | None = None, card_resource: str | None = None,
                     zero_is: str = "the fault", settled: float | None = None) -> Verdict:
    """`recovered` at some moment within `budget` s of `fault_at`: the run's record of the
    interval (from when its view held the fault's writes, done by `settled`), then the model's
    pods followed live (the run's follower, else a watch) until it holds or the budget runs out."""
    wanted = desired(kube, model, namespace)
    found = snap.moments(kube, card_resource, namespace, model, fault_at, fault_at + budget,
                         settled)
    return budgeted.first_within(found, lambda s: recovered(s, model, faulted, namespace, wanted), fault_at, budget,
                                 zero_is)


def desired(kube: Kube, model: str, namespace: str | None) -> int | None:
    """Pods the model's Deployments and StatefulSets ask for (by their pod template: kilocard's
    model label, else what its serving stack says, read over every template together so that a
    workload of workers that names no model takes its peers': LeaderWorkerSet's worker
    StatefulSets, a KServe multi-node predictor's worker Deployment); None without a namespace to
    look in, or when no such workload exists (bare pods, or a stack's own kind of workload)."""
    if namespace is None:
        return None
    templates = []
    for kind in ("deployments", "statefulsets"):
        for w in kube.list_raw(f"list {kind} in {namespace}", f"/apis/apps/v1/namespaces/{namespace}/{kind}"):
            spec = w.get("spec") or {}
            template = spec.get("template") or {}
            name = f"{kind}/{w['metadata']['name']}"  # a Deployment and a StatefulSet may share a name
            templates.append(({"metadata": {**(template.get("metadata") or {}), "namespace": namespace, "name": name},
                               "spec": template.get("spec") or {}}, spec.get("replicas") or 0))
    found = snap.identities(pod for pod, _ in templates)
    counts = [replicas for pod, replicas in templates if snap.model_of(pod, found) == model]
    return sum(counts) if counts else None
