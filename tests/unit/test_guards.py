"""Guards over a resolved plan and a hand-made snapshot: each limit refuses with its figure."""

import pytest

from chaos import guards, ledger
from chaos import plan as planning
from chaos.errors import SpecError
from probes.snapshot import ClusterSnapshot, NodeView, PodView


def node(name, used=0):
    return NodeView(name, {"kubernetes.io/hostname": name}, cards_capacity=8, cards_allocatable=8, cards_in_use=used)


def pod(name, node_name, model="m", cards=8, ready=True, namespace="ns", group=None, **labels):
    return PodView(namespace, name, f"uid-{name}", node_name, model, ready, False, cards, group or f"{namespace}/{name}",
                   0, {"kilocard.io/model": model, **labels})


def planned(*faults):
    """A plan from (fault mapping, targets) pairs, as plan.resolve would give it."""
    out = []
    for raw, targets in faults:
        module, spec = planning.parse(raw, "fault")
        out.append(planning.Planned("fault", module, spec, [
            ledger.Record(run_id="r", fault_id=f"f{i}", kind=spec.kind, target=t, expires_at="") for i, t in
            enumerate(targets)]))
    return planning.Plan("r", out)


def kill(*names, namespace="ns"):
    return ({"kind": "pod-kill", "namespace": namespace, "label_selector": "a=b"},
            [{"namespace": namespace, "name": n, "uid": f"uid-{n}", "node": "?"} for n in names])


NODES = (node("a"), node("b"), node("c"))
FLEET = ClusterSnapshot((pod("m-0", "a"), pod("m-1", "b")), NODES)



def judge(plan, s, *args):
    return guards.judge(guards.radius(plan, s), s, *args)

def test_a_plan_within_every_limit_passes():
    assert judge(planned(kill("m-0")), FLEET, guards.Limits(), {"ns"}) == []


def test_the_blast_radius_counts_pods_nodes_and_cards():
    problems = judge(planned(kill("m-0", "m-1")), FLEET, guards.Limits(max_pods=1, max_cards=8, min_ready=0),
                            {"ns"})
    assert problems == ["blast radius: the run would disrupt 2 pods, over the guard's max_pods 1",
                        "blast radius: the run would disrupt 16 cards, over the guard's max_cards 8"]
    isolate = ({"kind": "node-isolate", "nodes": ["a", "b", "c"], "ttl_seconds": 60},
               [{"node": n} for n in "abc"])
    assert judge(planned(isolate), FLEET, guards.Limits(max_nodes=2), {"ns"}) == [
        "blast radius: the run would disrupt 3 nodes, over the guard's max_nodes 2"]


def test_a_noschedule_isolation_displaces_nothing_and_a_noexecute_one_everything_on_the_node():
    soft = ({"kind": "node-isolate", "nodes": ["a"], "ttl_seconds": 60}, [{"node": "a"}])
    hard = ({"kind": "node-isolate", "nodes": ["a"], "effect": "NoExecute", "ttl_seconds": 60}, [{"node": "a"}])
    assert guards.radius(planned(soft), FLEET).pods == {}
    assert set(guards.radius(planned(hard), FLEET).pods) == {("ns", "m-0")}


def test_min_ready_counts_whole_groups_left():
    problems = judge(planned(kill("m-0", "m-1")), FLEET, guards.Limits(), {"ns"})
    assert problems == ["min_ready: model m in ns would keep 0 Ready replicas of 2, under the guard's min_ready 1"]
    group = {"kilocard.io/group-size": "2"}
    tp16 = ClusterSnapshot((pod("g-0", "a", group="ns/g", **group), pod("g-1", "b", group="ns/g", **group)), NODES)
    assert "keep 0 Ready replicas of 1" in judge(planned(kill("g-1")), tp16, guards.Limits(), {"ns"})[0]


def test_room_for_the_replicas_driven_off_a_node():
    full = ClusterSnapshot((pod("m-0", "a"), pod("m-1", "b"), pod("x", "c", model="other")),
                           (node("a", 8), node("b", 8), node("c", 8)))
    lose = ({"kind": "node-out-of-service", "nodes": ["a"], "ttl_seconds": 60}, [{"node": "a"}])
    (problem,) = judge(planned(lose), full, guards.Limits(), {"ns"})
    assert problem.startswith("room: ") and problem.endswith("(set room: false if that is what the experiment rehearses)")
    assert judge(planned(lose), full, guards.Limits(room=False), {"ns"}) == []
    assert judge(planned(lose), FLEET, guards.Limits(), {"ns"}) == []  # node c is free


def test_namespaces_must_opt_in():
    assert judge(planned(kill("m-0")), FLEET, guards.Limits(), set()) == [
        "namespace ns has not opted in to chaos (label it kilocard.io/chaos=enabled)"]
    assert judge(planned(kill("m-0")), FLEET, guards.Limits(require_opt_in=False), set()) == []


def test_declared_limits_are_checked_like_any_input():
    control = {"name": "g", "provider": {"type": "python", "module": "chaos.guards", "arguments": {"max_pods": 40}}}
    assert guards.declared({"controls": [control]}, "e.yaml").max_pods == 40
    assert guards.declared({}, "e.yaml") == guards.Limits()
    control["provider"]["arguments"] = {"max_pod": 40}
    with pytest.raises(SpecError, match=r"e.yaml: controls\[0\].provider.arguments: unknown field 'max_pod'"):
        guards.declared({"controls": [control]}, "e.yaml")
    control["provider"]["arguments"] = {"min_ready": -1}
    with pytest.raises(SpecError, match="min_ready: expected an integer from 0 to 100000, got -1"):
        guards.declared({"controls": [control]}, "e.yaml")


def test_every_fault_kind_says_what_it_disrupts():
    from chaos import faults

    assert all(callable(getattr(module, "disrupts", None)) for module in faults.registry().values())


def test_killing_pods_on_many_nodes_touches_no_node():
    # S7 on the default fleet: 8 replicas on 8 nodes; the nodes themselves are untouched.
    nodes = tuple(node(f"n{i}") for i in range(8))
    fleet = ClusterSnapshot(tuple(pod(f"m-{i}", f"n{i}") for i in range(8)), nodes)
    r = guards.radius(planned(kill(*(f"m-{i}" for i in range(8)))), fleet)
    assert (len(r.pods), r.nodes, r.cards) == (8, set(), 64)
    assert judge(planned(kill(*(f"m-{i}" for i in range(8)))), fleet,
                        guards.Limits(max_nodes=4, min_ready=0), {"ns"}) == []


def test_a_context_allowlist_refuses_any_other_cluster():
    lim = guards.Limits(contexts=("kilocard-testbed", "staging"))
    assert judge(planned(kill("m-0")), FLEET, lim, {"ns"}, "kilocard-testbed") == []
    assert judge(planned(kill("m-0")), FLEET, lim, {"ns"}, "prod-eu") == [
        "context: prod-eu is not one of the guard's contexts kilocard-testbed, staging"]
    assert judge(planned(kill("m-0")), FLEET, lim, {"ns"}, None)[0].startswith("context: in-cluster")


def test_the_radius_of_mixed_faults_counts_each_pod_card_and_displaced_model_once():
    """A node lost (every pod on it goes, card-less ones too), a drained card (only the pods with
    cards on its node go), two ECC cards on a node no replica holds (each counts), and a killed pod
    already gone (it counts as a pod of no model). Room is asked per displaced model, in its own
    namespace, as if the nodes driven off were gone."""
    from probes import capacity

    s = ClusterSnapshot((pod("m-0", "a"), pod("sidecar", "a", model="proxy", cards=0),
                         pod("s-0", "b", model="small", cards=1), pod("gw", "b", model="proxy", cards=0),
                         pod("m-p", None, namespace="other")),
                        tuple(node(n) for n in "abcde"))
    plan = planned(({"kind": "node-out-of-service", "nodes": ["a"], "ttl_seconds": 60}, [{"node": "a"}]),
                   ({"kind": "card-isolate", "nodes": ["b"], "cards": [0], "ttl_seconds": 60},
                    [{"node": "b", "card": 0}]),
                   ({"kind": "gpu-ecc", "nodes": ["c"], "cards": [3, 4], "ttl_seconds": 60},
                    [{"node": "c", "card": 3}, {"node": "c", "card": 4}]),
                   kill("gone"))
    r = guards.radius(plan, s)
    assert r.pods == {("ns", "m-0"): s.pods[0], ("ns", "sidecar"): s.pods[1], ("ns", "s-0"): s.pods[2],
                      ("ns", "gone"): None}
    assert (r.nodes, r.evicted_nodes) == ({"a", "b", "c"}, {"a", "b"})
    assert r.cards == 8 + 1 + 2  # card 0 of b is s-0's, counted once
    assert {k: v.to_json() for k, v in r.room.items()} == {
        ("ns", model): capacity.room(s, model, ("a", "b"), "ns").to_json() for model in ("m", "proxy", "small")}
    assert r.room[("ns", "m")].details["cards_to_place"] == 8  # not the other namespace's pending replica


def test_reached_is_every_model_with_a_pod_a_fault_ends_or_on_a_node_it_acts_on():
    other = ClusterSnapshot((pod("m-0", "a"), pod("m-1", "b"), pod("x-0", "b", model="x", namespace="ns2"),
                             pod("y-0", "c", model="y")), NODES)
    ecc = ({"kind": "gpu-ecc", "nodes": ["b"], "card": 3, "ttl_seconds": 60}, [{"node": "b", "card": 3}])
    assert guards.reached(planned(ecc), other) == {("ns", "m"), ("ns2", "x")}  # no pod of it is taken away...
    assert guards.radius(planned(ecc), other).models() == set()  # ...so the radius has none
    assert guards.reached(planned(kill("y-0")), other) == {("ns", "y")}
    empty = ({"kind": "gpu-ecc", "nodes": ["c"], "card": 0, "ttl_seconds": 60}, [{"node": "c", "card": 0}])
    assert guards.reached(planned(empty), ClusterSnapshot((pod("m-0", "a"),), NODES)) == set()
