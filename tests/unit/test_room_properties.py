"""The N+1 room check as a property: over random small clusters (nodes of 8 cards, some cordoned,
NotReady or tainted, some cards in use by other pods; a model of TP=8 or TP=2 replicas with or
without required hostname anti-affinity), every move room() proposes is one the scheduler could
make, and room() finds no room only when an exhaustive search over the nodes finds none either
(the pod it names cannot go anywhere, given the moves it made before)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from probes import capacity
from probes.snapshot import ClusterSnapshot, NodeView, PodView

HOST = "kubernetes.io/hostname"


@st.composite
def clusters(draw: st.DrawFn) -> ClusterSnapshot:
    count = draw(st.integers(2, 7))
    nodes = tuple(NodeView(f"n{i}", {HOST: f"n{i}"}, ready=draw(st.booleans()) or i % 2 == 0,
                           unschedulable=draw(st.integers(0, 5)) == 0,
                           taints=("gpu=bad:NoSchedule",) if draw(st.integers(0, 6)) == 0 else (),
                           cards_allocatable=8, cards_capacity=8, cards_in_use=draw(st.sampled_from((0, 0, 2, 4))))
                  for i in range(count))
    cards = draw(st.sampled_from((2, 8)))
    required = (HOST,) if draw(st.booleans()) else ()
    homes = draw(st.lists(st.sampled_from([None, *[n.name for n in nodes]]), min_size=1, max_size=count))
    pods = tuple(PodView("ns", f"r{i}", f"u{i}", home, "m", home is not None, False, cards, f"ns/r{i}", 0, {},
                         required_anti_affinity=required) for i, home in enumerate(homes))
    used = {n.name: n.cards_in_use + sum(p.cards for p in pods if p.node == n.name) for n in nodes}
    return ClusterSnapshot(pods, tuple(NodeView(n.name, n.labels, n.ready, n.unschedulable, n.taints, 8, 8,
                                                used[n.name]) for n in nodes))


def could_take(s: ClusterSnapshot, pod: PodView, node: NodeView, free: dict[str, int], hosts: list[str]) -> bool:
    return (node.name in free and free[node.name] >= pod.cards and node.ready and not node.unschedulable
            and not node.taints and not (pod.required_anti_affinity and node.name in hosts))


@settings(max_examples=300, deadline=None)
@given(clusters(), st.booleans())
def test_room_moves_are_legal_and_no_room_means_none_exists(s: ClusterSnapshot, lose_one: bool) -> None:
    replicas = s.replicas("m")
    lost = tuple(sorted({p.node for p in replicas if p.node}))[:1] if lose_one else ()
    verdict = capacity.room(s, "m", losing_nodes=lost)
    free = {n.name: n.cards_free for n in s.nodes if n.name not in lost}
    hosts = [p.node for p in replicas if p.node and p.node not in lost]
    moves = verdict.details.get("moves", {})
    for key, target in moves.items():  # in the order they were made
        pod = next(p for p in replicas if f"{p.namespace}/{p.name}" == key)
        assert could_take(s, pod, s.node(target), free, hosts), (key, target, verdict.reason)
        free[target] -= pod.cards
        hosts.append(target)
    if verdict.ok:
        assert len(moves) == verdict.details["pods_to_place"] == sum(1 for p in replicas if not p.node or p.node in lost)
    else:
        stuck = next(p for p in replicas if f"{p.namespace}/{p.name}" == verdict.details["unplaced"])
        assert not any(could_take(s, stuck, n, free, hosts) for n in s.nodes), verdict.reason
