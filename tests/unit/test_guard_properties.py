"""R3, the blast-radius guard as a property: for random fleets (nodes of 8 cards; models of
single-pod and two-pod TP groups, some pods not Ready) and random plans (pod kills, node isolation
with and without a drain, NoExecute, card isolation, a stopped kubelet), the guard refuses exactly
when the run would pass a limit. The limits are recomputed here from the faults' own meaning,
independently of chaos.guards: the pods a run ends or drives off, the nodes it touches, the cards
those pods hold or it takes out of service, and per model it takes pods from, the TP groups left
whole and Ready. Shrunk counter-examples found on the way are kept as @example cases."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaos import guards
from chaos import plan as planning
from chaos.faults import agent_faults, node_isolation, pod_kill
from chaos.ledger import Record
from chaos.vocabulary import GROUP_SIZE_LABEL, MODEL_LABEL
from probes.snapshot import ClusterSnapshot, NodeView, PodView
from tests import figures

CARDS = 8
NS = "fleet"


@dataclass(frozen=True)
class Fleet:
    snapshot: ClusterSnapshot

    @property
    def pods(self) -> list[PodView]:
        return list(self.snapshot.pods)

    @property
    def nodes(self) -> list[str]:
        return [n.name for n in self.snapshot.nodes]


@st.composite
def fleets(draw: st.DrawFn) -> Fleet:
    nodes = [f"n{i}" for i in range(draw(st.integers(1, 6)))]
    free = dict.fromkeys(nodes, CARDS)
    pods = []
    for m in range(draw(st.integers(1, 3))):
        model, tp, size = f"m{m}", draw(st.sampled_from((1, 2, 4, 8))), draw(st.sampled_from((1, 1, 2)))
        for r in range(draw(st.integers(1, 6))):
            group = f"{NS}/{model}-{r}"
            for rank in range(size):
                node = draw(st.sampled_from(nodes))
                if free[node] < tp:
                    continue  # no room there: the group stays short of a member (not whole)
                free[node] -= tp
                labels = {MODEL_LABEL: model, GROUP_SIZE_LABEL: str(size)}
                pods.append(PodView(NS, f"{model}-{r}-{rank}", f"u-{model}-{r}-{rank}", node, model,
                                    ready=draw(st.booleans()) or draw(st.booleans()), deleting=False, cards=tp,
                                    group=group, rank=rank, labels=labels))
    views = tuple(NodeView(n, {"kubernetes.io/hostname": n}, cards_allocatable=CARDS, cards_capacity=CARDS,
                           cards_in_use=CARDS - free[n]) for n in nodes)
    return Fleet(ClusterSnapshot(tuple(pods), views))


def _planned(module, raw: dict, targets: list[dict]) -> planning.Planned:
    _module, spec = planning.parse(raw, "fault")
    return planning.Planned("fault", module, spec, [Record("r", f"f{i}", spec.kind, t, "") for i, t in
                                                      enumerate(targets)])


@st.composite
def plans(draw: st.DrawFn, fleet: Fleet) -> planning.Plan:
    faults = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(("pod-kill", "node-isolate", "card-isolate", "node-kubelet-stop")))
        if kind == "pod-kill" and fleet.pods:
            chosen = draw(st.lists(st.sampled_from(fleet.pods), min_size=1, max_size=4, unique=True))
            faults.append(_planned(pod_kill, {"kind": "pod-kill", "namespace": NS, "label_selector": MODEL_LABEL},
                                   [{"namespace": p.namespace, "name": p.name, "uid": p.uid, "node": p.node}
                                    for p in chosen]))
            continue
        nodes = draw(st.lists(st.sampled_from(fleet.nodes), min_size=1, max_size=2, unique=True))
        if kind == "node-isolate":
            how = draw(st.sampled_from(({}, {"drain": True}, {"effect": "NoExecute"})))
            faults.append(_planned(node_isolation, {"kind": kind, "nodes": nodes, "ttl_seconds": 60, **how},
                                   [{"node": n} for n in nodes]))
        elif kind == "card-isolate":
            card = draw(st.integers(0, CARDS - 1))
            faults.append(_planned(agent_faults, {"kind": kind, "nodes": nodes, "card": card, "ttl_seconds": 60},
                                   [{"node": n, "card": card} for n in nodes]))
        else:
            faults.append(_planned(agent_faults, {"kind": kind, "nodes": nodes, "ttl_seconds": 60},
                                   [{"node": n} for n in nodes]))
    return planning.Plan("r", faults)


# Wide enough that about half the runs are allowed: a property that only ever sees refusals proves little.
limits = st.builds(guards.Limits, max_pods=st.integers(0, 30), max_nodes=st.integers(1, 8),
                   max_cards=st.integers(0, 120), min_ready=st.sampled_from((0, 0, 1, 2)), room=st.just(False),
                   require_opt_in=st.just(False))


def truth(fleet: Fleet, plan: planning.Plan) -> tuple[set[tuple[str, str]], set[str], int]:
    """What the plan takes away, from the faults' meaning: (pods ended or driven off, nodes
    touched, cards). A drained card's pod is unknown to the API: every card-holding pod there."""
    gone: set[tuple[str, str]] = set()
    touched: set[str] = set()
    isolated: set[tuple[str, int]] = set()
    for fault in plan.faults:
        for record in fault.records:
            t, kind = record.target, fault.spec.kind
            if kind == "pod-kill":
                gone.add((t["namespace"], t["name"]))
                continue
            touched.add(t["node"])
            drives_off = (kind == "node-kubelet-stop" or (kind == "node-isolate" and (
                fault.spec.drain or fault.spec.effect == "NoExecute")))
            if kind == "card-isolate":
                isolated.add((t["node"], int(t["card"])))
                gone |= {(p.namespace, p.name) for p in fleet.pods if p.node == t["node"] and p.cards}
            elif drives_off:
                gone |= {(p.namespace, p.name) for p in fleet.pods if p.node == t["node"]}
    by_name = {(p.namespace, p.name): p for p in fleet.pods}
    held = {by_name[k].node for k in gone if by_name[k].cards}
    cards = sum(by_name[k].cards for k in gone) + sum(1 for node, _ in isolated if node not in held)
    return gone, touched, cards


def ready_groups(fleet: Fleet, model: str, gone: set[tuple[str, str]]) -> int:
    groups: dict[str, list[PodView]] = defaultdict(list)
    for p in fleet.pods:
        if p.model == model:
            groups[p.group].append(p)
    return sum(1 for members in groups.values() if len(members) == int(members[0].labels[GROUP_SIZE_LABEL])
               and all(p.ready and (p.namespace, p.name) not in gone for p in members))


def breaches(fleet: Fleet, plan: planning.Plan, lim: guards.Limits) -> list[str]:
    gone, touched, cards = truth(fleet, plan)
    found = [name for name, n, limit in (("max_pods", len(gone), lim.max_pods), ("max_nodes", len(touched),
                                          lim.max_nodes), ("max_cards", cards, lim.max_cards)) if n > limit]
    models = {p.model for p in fleet.pods if (p.namespace, p.name) in gone}
    found += [f"min_ready {m}" for m in sorted(models) if ready_groups(fleet, m, gone) < lim.min_ready]
    return found


@st.composite
def cases(draw: st.DrawFn) -> tuple[Fleet, planning.Plan, guards.Limits]:
    fleet = draw(fleets())
    return fleet, draw(plans(fleet)), draw(limits)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_guard_refuses_exactly_the_runs_that_pass_a_limit(case) -> None:
    fleet, plan, lim = case
    refused = guards.judge(guards.radius(plan, fleet.snapshot), fleet.snapshot, lim, opted_in=set())
    should = breaches(fleet, plan, lim)
    assert bool(refused) == bool(should), (refused, should)
    figures.record("guard-properties", {"pods": len(fleet.pods), "refused": sorted({r.split(":")[0] for r in refused})})
    for name in should:  # each breach is named, with its limit
        assert any(name.split()[0] in said for said in refused), (name, refused)
