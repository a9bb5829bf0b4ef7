"""Tensor-parallel groups: a group that fits in one node must sit in one node (its traffic then
never crosses the network); a declared multi-node group must be complete (every rank present);
and no group may be partially Ready (a group with one rank down serves nothing while looking
half alive)."""

from __future__ import annotations

from collections import defaultdict

from chaos.vocabulary import GROUP_SIZE_LABEL, TP_SIZE_LABEL
from probes.snapshot import ClusterSnapshot, PodView
from probes.verdict import Verdict, failed, passed


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
