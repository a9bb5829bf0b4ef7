"""The hunt's prediction on hand-made snapshots: the domains a cluster has, what each loss does,
and that a fleet made fragile on purpose has its weak domain ranked first."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings

from probes import capacity, domains, impact
from probes.snapshot import ClusterSnapshot, NodeView, PodView
from tests.unit.test_room_properties import clusters

HOST, RACK = "kubernetes.io/hostname", "kilocard.io/rack"


def node(name: str, rack: str, used: int = 0, cards: int = 8) -> NodeView:
    return NodeView(name, {HOST: name, RACK: rack}, cards_allocatable=cards, cards_capacity=cards, cards_in_use=used)


def pod(name: str, node_name: str | None, model: str, cards: int = 1, group: str | None = None, rank: int = 0,
        required: tuple[str, ...] = (), ready: bool = True) -> PodView:
    labels = {"kilocard.io/model": model, "kilocard.io/layers": "32", "kilocard.io/kv-heads": "32",
              "kilocard.io/head-dim": "128", "kilocard.io/dtype": "float16"}
    return PodView("ns", name, f"uid-{name}", node_name, model, ready, False, cards, group or f"ns/{name}", rank,
                   labels, required_anti_affinity=required)


def cluster(pods: list[PodView], nodes: list[NodeView]) -> ClusterSnapshot:
    """Nodes' cards in use as their pods hold them, plus what they say other pods hold."""
    used = {n.name: n.cards_in_use + sum(p.cards for p in pods if p.node == n.name) for n in nodes}
    return ClusterSnapshot(tuple(pods), tuple(NodeView(n.name, n.labels, n.ready, n.unschedulable, n.taints,
                                                       n.cards_allocatable, n.cards_capacity, used[n.name])
                                              for n in nodes))


def test_the_domains_of_a_cluster():
    s = cluster([pod("a0", "a", "m", cards=8), pod("b0", "b", "m"), pod("w0", "c", "big", 4, "ns/g", 0),
                 pod("w1", "d", "big", 4, "ns/g", 1)],
                [node("a", "r0"), node("b", "r0"), node("c", "r1"), node("d", "r1", used=4)])
    found = {d.key: d for d in domains.of(s)}
    assert sorted(k for k in found if k.startswith("card/")) == [
        "card/a/ns/a0", "card/b/free", "card/b/ns/b0", "card/c/free", "card/c/ns/w0", "card/d/ns/w1"]
    assert found["card/a/ns/a0"].pods == {("ns", "a0")} and found["card/a/ns/a0"].cards_out == (("a", 1),)
    assert found["tp-group/ns/ns/g"].pods == {("ns", "w0"), ("ns", "w1")}
    assert found["tp-group/ns/ns/g"].where == ("c", "d")
    assert found["node/c"].nodes == {"c"}
    assert found["rack/r1"].nodes == {"c", "d"}
    assert not any(d.kind in ("switch", "zone") for d in found.values())  # no such label on the nodes
    kinds = [d.kind for d in domains.of(s)]
    assert kinds == sorted(kinds, key=domains.KINDS.index)


def test_a_switch_is_a_domain_where_topograph_labels_the_nodes():
    nodes = [NodeView(n, {HOST: n, domains.LEAF_LABEL: leaf}, cards_allocatable=8, cards_capacity=8)
             for n, leaf in (("a", "s1"), ("b", "s1"), ("c", "s2"))]
    found = [d for d in domains.of(ClusterSnapshot((), tuple(nodes))) if d.kind == "switch"]
    assert [(d.name, d.nodes) for d in found] == [("leaf=s1", {"a", "b"}), ("leaf=s2", {"c"})]
    assert [d.kind for d in domains.of(ClusterSnapshot((), tuple(nodes)), kinds=("node",))] == ["node"] * 3


def test_p95_of_an_even_spread_and_saturation():
    load = impact.Load(qps=60, service_rate=20, slo_seconds=0.5)
    assert load.p95(12) == pytest.approx(math.log(20) / 15)
    assert load.p95(3) == math.inf  # each replica's share is its whole service rate
    assert load.p95(0) == math.inf


def fragile() -> ClusterSnapshot:
    """`frag`'s four replicas share node a; `good`'s four are on four nodes; rack r1 is full."""
    nodes = [node("a", "r0"), node("b", "r0"), node("c", "r0"), node("d", "r0"), node("e", "r1", used=8)]
    pods = [pod(f"f{i}", "a", "frag") for i in range(4)] + [pod(f"g{i}", n, "good") for i, n in enumerate("abcd")]
    return cluster(pods, nodes)


LOADS = {("ns", "frag"): impact.Load(40, 20, 0.5), ("ns", "good"): impact.Load(40, 20, 0.5)}


def test_the_machine_every_replica_shares_ranks_first():
    s = fragile()
    ranked = impact.rank(s, domains.of(s), LOADS)
    first = ranked[0]
    assert first.domain.key in ("node/a", "rack/r0")
    node_a = next(i for i in ranked if i.domain.key == "node/a")
    frag = next(m for m in node_a.models if m.model == "frag")
    assert (frag.replicas, frag.lost, frag.severity) == (4, 4, "outage")
    good = next(m for m in node_a.models if m.model == "good")
    assert (good.lost, good.slo, good.severity) == (1, "kept", "degraded")  # 40 QPS over 3: P95 0.3 s
    # No other node takes more than one replica: none of them is an outage.
    assert all(i.severity != "outage" for i in ranked if i.domain.kind == "node" and i.domain.name != "a")
    # The rack holding everything is an outage of both, lasting: r1 has no room.
    rack = next(i for i in ranked if i.domain.key == "rack/r0")
    assert rack.severity == "outage" and {m.nowhere for m in rack.models} == {4}
    assert ranked.index(rack) == 0 and ranked.index(node_a) == 1


def test_a_rack_with_no_room_makes_a_loss_lasting():
    """`m`'s replicas must sit in different racks; r2 is full: losing r0 leaves its replica
    nowhere to go (r1 holds the other), and the SLO stays broken."""
    nodes = [node("a", "r0"), node("b", "r1"), node("c", "r2", used=8)]
    s = cluster([pod("m0", "a", "m", required=(RACK,)), pod("m1", "b", "m", required=(RACK,))], nodes)
    load = {("ns", "m"): impact.Load(20, 20, 0.5)}  # P95 0.3 s over two; one alone is saturated
    found = {i.domain.key: i for i in impact.rank(s, domains.of(s), load)}
    (m,) = found["rack/r0"].models
    assert (m.lost, m.nowhere, m.slo, m.severity) == (1, 1, "lasting", "slo-lasting")
    # A crash of the same replica's engine: it comes back in place, so the breach ends.
    (crash,) = found["tp-group/ns/ns/m0"].models
    assert (crash.nowhere, crash.slo, crash.severity) == (0, "broken", "slo")
    assert found["rack/r0"].rank_key() > found["tp-group/ns/ns/m0"].rank_key()


def test_a_card_taken_from_a_whole_node_pod_sends_it_elsewhere():
    nodes = [node("a", "r0"), node("b", "r0")]
    s = cluster([pod("big", "a", "m", cards=8)], nodes)
    (i,) = [impact.predict(s, d, {}) for d in domains.of(s, kinds=("card",)) if d.name == "a/ns/big"]
    assert i.moves == {"ns/big": "b"} and i.cards == 8
    full = cluster([pod("big", "a", "m", cards=8)], [node("a", "r0"), node("b", "r0", used=1)])
    (j,) = [impact.predict(full, d, {}) for d in domains.of(full, kinds=("card",)) if d.name == "a/ns/big"]
    assert j.moves == {} and j.models[0].nowhere == 1 and j.models[0].severity == "outage"
    free = next(d for d in domains.of(full, kinds=("card",)) if d.name == "b/free")
    assert impact.predict(full, free, {}).cards == 1 and impact.predict(full, free, {}).severity == "none"


def test_a_model_without_load_figures_has_its_slo_unknown_never_kept():
    s = fragile()
    i = impact.predict(s, next(d for d in domains.of(s) if d.key == "node/b"), {})
    (good,) = i.models
    assert good.slo == "unknown" and good.p95_after is None and good.severity == "degraded"


def test_a_model_over_its_slo_before_the_loss_is_said_so():
    s = fragile()
    slow = {("ns", "good"): impact.Load(40, 11, 0.5)}  # P95 ln20 / (11 - 10) = 3 s already
    i = impact.predict(s, next(d for d in domains.of(s) if d.key == "node/b"), slow)
    assert i.models[0].slo == "already" and i.models[0].severity == "degraded"


def test_the_kv_cache_left_is_checked_against_the_demand():
    s = fragile()
    demand = capacity.Demand(qps=40, prompt_tokens=2048, output_tokens=256, latency_seconds=20)
    i = impact.predict(s, next(d for d in domains.of(s) if d.key == "node/b"),
                       {("ns", "good"): impact.Load(40, 20, 0.5, demand)})
    (good,) = i.models
    assert good.kv == "short" and good.severity == "capacity" and good.reasons[0].startswith("KV demand ")
    assert "GiB of 3 replicas left" in good.reasons[0]


@settings(max_examples=200, deadline=None)
@given(clusters())
def test_replace_finds_no_room_exactly_when_room_does(s: ClusterSnapshot):
    """One model, each of its nodes lost in turn: the hunt's placement strands a pod exactly when
    room_to_reschedule finds no room (they place alike; the hunt goes on past the first)."""
    for lost in sorted({p.node for p in s.pods if p.node}):
        placed = capacity.replace(s, frozenset(), frozenset({lost}))
        assert (not placed.nowhere) == capacity.room(s, "m", (lost,)).ok
