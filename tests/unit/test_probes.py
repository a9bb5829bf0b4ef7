"""Probes as pure functions over hand-made snapshots (their testbed twins run in tests/testbed)."""

import pytest

from probes import capacity, placement, snapshot, tp_groups
from probes.errors import ProbeError
from probes.snapshot import ClusterSnapshot, NodeView, PodView


def node(name, rack="r0", ready=True, cards=8):
    return NodeView(name, {"kubernetes.io/hostname": name, "kilocard.io/rack": rack}, ready=ready,
                    cards_capacity=cards, cards_allocatable=cards)


def pod(name, node_name, model="m", required=(), group=None, rank=0, ready=True, cards=1, **labels):
    base = {"kilocard.io/model": model, "kilocard.io/layers": "32", "kilocard.io/kv-heads": "32",
            "kilocard.io/head-dim": "128", "kilocard.io/dtype": "float16", **labels}
    return PodView("ns", name, f"uid-{name}", node_name, model, ready, False, cards, group or f"ns/{name}", rank,
                   base, required_anti_affinity=required)


def test_kv_bytes_per_token_from_the_model_shape():
    assert capacity.kv_bytes_per_token(32, 32, 128, "float16") == 512 * 1024  # Llama-2-7B
    assert capacity.kv_bytes_per_token(32, 8, 128, "bfloat16") == 128 * 1024  # GQA 8B


def test_required_anti_affinity_verdicts():
    nodes = (node("a"), node("b"), node("c"))
    good = ClusterSnapshot((pod("1", "a", required=("kubernetes.io/hostname",)),
                            pod("2", "b", required=("kubernetes.io/hostname",))), nodes)
    assert placement.anti_affinity(good, "m").ok
    bad = ClusterSnapshot((pod("1", "a", required=("kubernetes.io/hostname",)),
                           pod("2", "a", required=("kubernetes.io/hostname",))), nodes)
    verdict = placement.anti_affinity(bad, "m")
    assert not verdict.ok and verdict.reason == "m: required anti-affinity on kubernetes.io/hostname broken: 2 replicas on a"


def test_spread_skew_and_collapse_around_a_fault():
    nodes = (node("a", "r0"), node("b", "r1"))
    even = ClusterSnapshot((pod("1", "a"), pod("2", "b")), nodes)
    piled = ClusterSnapshot((pod("1", "a"), pod("2", "a"), pod("3", "a")), nodes)
    assert placement.anti_affinity(even, "m").ok
    verdict = placement.anti_affinity(piled, "m")
    assert not verdict.ok and verdict.details["skew"] == 3
    assert placement.anti_affinity(piled, "m", key="kilocard.io/rack", max_skew=3).ok
    assert not placement.collapsed(even, piled, "m").ok
    assert placement.collapsed(piled, even, "m").ok
    assert not placement.anti_affinity(ClusterSnapshot((), nodes), "m").ok  # nothing to judge is not a pass


def test_guaranteed_placement_needs_a_required_rule_not_a_lucky_spread():
    from dataclasses import replace

    nodes = (node("a"), node("b"))
    lucky = ClusterSnapshot((pod("1", "a"), pod("2", "b")), nodes)  # spread by scoring, nothing declared
    assert placement.anti_affinity(lucky, "m").ok
    verdict = placement.anti_affinity(lucky, "m", guaranteed=True)
    assert not verdict.ok and verdict.details["unguarded"]
    assert verdict.reason.startswith("m: nothing keeps its replicas apart (no required anti-affinity or "
                                     "DoNotSchedule spread on kubernetes.io/hostname); today 1 of 2 replicas are on")
    hard = ClusterSnapshot(tuple(replace(p, hard_spread=("kubernetes.io/hostname",)) for p in lucky.pods), nodes)
    assert placement.anti_affinity(hard, "m", guaranteed=True).ok
    required = ClusterSnapshot((pod("1", "a", required=("kubernetes.io/hostname",)),
                                pod("2", "b", required=("kubernetes.io/hostname",))), nodes)
    assert placement.anti_affinity(required, "m", guaranteed=True).ok


def test_tp_groups_whole_on_one_node_and_not_half_ready():
    nodes = (node("a"), node("b"))
    two_node = {"kilocard.io/tp-size": "16", "kilocard.io/group-size": "2"}
    ok = ClusterSnapshot((pod("g-0", "a", group="ns/g", cards=8, **two_node),
                          pod("g-1", "b", group="ns/g", rank=1, cards=8, **two_node)), nodes)
    assert tp_groups.check(ok).ok
    split = ClusterSnapshot((pod("s-0", "a", group="ns/s", cards=4, **{"kilocard.io/tp-size": "8"}),
                             pod("s-1", "b", group="ns/s", rank=1, cards=4, **{"kilocard.io/tp-size": "8"})), nodes)
    assert tp_groups.check(split).reason == "all models: ns/s: TP=8 fits one node but spans a, b"
    missing = ClusterSnapshot((pod("g-0", "a", group="ns/g", cards=8, **two_node),), nodes)
    assert "1 of 2 ranks present" in tp_groups.check(missing).reason
    half = ClusterSnapshot((pod("g-0", "a", group="ns/g", cards=8, **two_node),
                            pod("g-1", "b", group="ns/g", rank=1, ready=False, cards=8, **two_node)), nodes)
    assert "partially Ready (1/2)" in tp_groups.check(half).reason


def test_capacity_fits_and_after_losing_a_node():
    nodes = (node("a"), node("b"))
    snap = ClusterSnapshot((pod("1", "a", cards=1), pod("2", "b", cards=1)), nodes)
    # 20 qps x 1 s x 1024 tokens x 512 KiB = 10 GiB (+25 % = 12.5 GiB) against 2 x 40 GiB.
    demand = capacity.Demand(qps=20, prompt_tokens=768, output_tokens=256, latency_seconds=1.0)
    assert capacity.fits(snap, "m", demand).ok
    assert capacity.fits(snap, "m", demand, losing_nodes=("a",)).ok
    heavy = capacity.Demand(qps=100, prompt_tokens=768, output_tokens=256, latency_seconds=1.0)  # 62.5 GiB
    assert capacity.fits(snap, "m", heavy).ok
    verdict = capacity.fits(snap, "m", heavy, losing_nodes=("a",))
    assert not verdict.ok and verdict.reason.startswith("m after losing a: KV demand 62.5 GiB")
    assert capacity.cards_needed(heavy, 512 * 1024, tp_size=1) == 2
    assert capacity.cards_needed(heavy, 512 * 1024, tp_size=8) == 8


def test_capacity_needs_the_model_shape():
    bare = PodView("ns", "x", "u", "a", "m", True, False, 1, "ns/x", 0, {"kilocard.io/model": "m"})
    with pytest.raises(ProbeError, match="has no model-shape label 'kilocard.io/layers'"):
        capacity.fits(ClusterSnapshot((bare,), (node("a"),)), "m", capacity.Demand(1, 1, 1, 1))


class SeqProm:
    """Answers instant queries from a script of values (None = no samples)."""

    def __init__(self, values):
        self.values = list(values)

    def custom_query(self, query):
        v = self.values.pop(0) if len(self.values) > 1 else self.values[0]
        return [] if v is None else [{"metric": {}, "value": [0, str(v)]}]


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def test_no_samples_and_nan_are_not_healthy():
    from probes import slo

    assert not slo.under(SeqProm([None]), "q", 0.5).ok
    assert not slo.under(SeqProm(["NaN"]), "q", 0.5).ok
    assert slo.under(SeqProm([0.2]), "q", 0.5).ok
    assert not slo.under(SeqProm([0.7]), "q", 0.5).ok


def test_recovery_timeline_pairs_victims_with_replacements():
    from probes.recovery import Event, timeline, within

    t0 = 1000.0
    events = [Event(t0 - 5, "created", "old", "u0", "a", None),  # before the fault: not a recovery
              Event(t0 + 0.1, "deleted", "v1", "u1", "a", None), Event(t0 + 0.2, "created", "r1", "u2", None, None),
              Event(t0 + 0.3, "scheduled", "r1", "u2", "b", None), Event(t0 + 1.5, "ready", "r1", "u2", "b", None),
              Event(t0 + 0.4, "deleted", "v2", "u3", "a", None), Event(t0 + 0.5, "created", "r2", "u4", None, None)]
    out = timeline(events, t0)["replicas"]
    assert out[0] == {"pod": "v1", "deleted": pytest.approx(0.1), "replacement": "r1", "created": pytest.approx(0.2),
                      "scheduled": pytest.approx(0.3), "node": "b", "ready": pytest.approx(1.5)}
    assert out[1]["replacement"] == "r2" and "ready" not in out[1]
    assert within(events, t0, budget=5, expected=1).ok
    assert within(events, t0, budget=1, expected=1).reason == "recovery took 1.50 s, over the 1 s budget"
    assert within(events, t0, budget=5, expected=2).reason == "1 of 2 replicas back to Ready (budget 5 s)"



def test_snapshot_from_api_json_counts_every_pods_cards_and_reads_tolerations():
    def raw_pod(name, node_name, cards, labels=None, phase="Running", **spec):
        return {"metadata": {"namespace": "ns", "name": name, "uid": f"u-{name}", "labels": labels or {}},
                "spec": {"nodeName": node_name, "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(cards)}}}],
                         **spec},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]}}

    raw_node = {"metadata": {"name": "a", "labels": {}}, "spec": {"taints": [{"key": "pool", "value": "p", "effect": "NoSchedule"}]},
                "status": {"allocatable": {"nvidia.com/gpu": "8"}, "capacity": {"nvidia.com/gpu": "8"},
                           "conditions": [{"type": "Ready", "status": "True"}]}}
    pods = [raw_pod("m1", "a", 4, {"kilocard.io/model": "m"}, tolerations=[{"key": "pool", "operator": "Exists"}]),
            raw_pod("batch", "a", 3),  # no model, still holds cards
            raw_pod("done", "a", 8, phase="Succeeded")]  # finished: holds nothing
    s = snapshot.build(pods, [raw_node])
    assert [p.name for p in s.pods] == ["m1"] and s.pods[0].ready
    assert s.nodes[0].cards_in_use == 7 and s.nodes[0].cards_free == 1 and s.nodes[0].taints == ("pool=p:NoSchedule",)
    assert s.pods[0].tolerates("pool=p:NoSchedule") and not s.pods[0].tolerates("other=:NoExecute")


def test_room_to_reschedule_a_lost_replica_and_fragmentation_named():
    hostname = ("kubernetes.io/hostname",)

    def tp8(name, node_name):
        return pod(name, node_name, required=hostname, cards=8)

    def with_use(n, used):
        return NodeView(n.name, n.labels, cards_capacity=8, cards_allocatable=8, cards_in_use=used)

    big = (tp8("r1", "a"), tp8("r2", "b"))
    spare = ClusterSnapshot(big, (with_use(node("a"), 8), with_use(node("b"), 8), with_use(node("c"), 0)))
    verdict = capacity.room(spare, "m")
    assert verdict.ok and verdict.details["pods_to_place"] == 1, verdict.reason
    assert capacity.room(spare, "m", losing_nodes=("a",)).details["moves"] == {"ns/r1": "c"}
    # Two spare nodes with 4 cards free each: 8 cards free, none able to take a TP=8 pod.
    fragmented = ClusterSnapshot(big, (with_use(node("a"), 8), with_use(node("b"), 8),
                                       with_use(node("c"), 4), with_use(node("d"), 4)))
    verdict = capacity.room(fragmented, "m")
    assert not verdict.ok and "8 cards free on 2 eligible nodes but at most 4 on any one: fragmentation" in verdict.reason
    # Room that anti-affinity forbids is no room; nor is a cordoned or NotReady node.
    crowded = ClusterSnapshot(big + (tp8("r3", "c"),), (with_use(node("a"), 8), with_use(node("b"), 8),
                                                         with_use(node("c"), 0)))
    assert not capacity.room(crowded, "m", losing_nodes=("a",)).ok
    cordoned = NodeView("c", node("c").labels, unschedulable=True, cards_capacity=8, cards_allocatable=8)
    verdict = capacity.room(ClusterSnapshot(big, (node("a"), node("b"), cordoned)), "m", losing_nodes=("a",))
    assert not verdict.ok and verdict.reason.endswith("only 0 cards free on 0 eligible nodes (others: 1 anti-affinity, 1 cordoned)")
    tainted = NodeView("c", node("c").labels, taints=("gpu-error=fatal:NoSchedule",), cards_capacity=8, cards_allocatable=8)
    verdict = capacity.room(ClusterSnapshot(big, (node("a"), node("b"), tainted)), "m", losing_nodes=("a",))
    assert not verdict.ok and "1 taint gpu-error=fatal:NoSchedule" in verdict.reason
    assert "no replica at all" in capacity.room(spare, "nothing").reason
    # A replica already Pending needs room too, lost node or not.
    pending = ClusterSnapshot(big + (tp8("r3", None),), fragmented.nodes)
    verdict = capacity.room(pending, "m")
    assert not verdict.ok and verdict.reason.startswith("m: now, ns/r3 (8 cards) has nowhere to go"), verdict.reason


def test_recovery_timeline_shows_the_drain_and_the_start_up():
    from probes.recovery import Event, timeline

    t0 = 100.0
    events = [Event(t0 + 0.1, "deleted", "v", "u1", "a", None), Event(t0 + 0.2, "created", "r", "u2", None, None),
              Event(t0 + 6.1, "gone", "v", "u1", "a", None), Event(t0 + 6.2, "scheduled", "r", "u2", "a", None),
              Event(t0 + 12.2, "started", "r", "u2", "a", None), Event(t0 + 30.8, "ready", "r", "u2", "a", None)]
    (replica,) = timeline(events, t0)["replicas"]
    assert replica == {"pod": "v", "deleted": pytest.approx(0.1), "gone": pytest.approx(6.1), "replacement": "r",
                       "created": pytest.approx(0.2), "scheduled": pytest.approx(6.2), "node": "a",
                       "started": pytest.approx(12.2), "ready": pytest.approx(30.8)}


def test_a_recorder_sees_a_failed_pull_and_the_timeline_places_it_before_the_start():
    from probes.recovery import Event, Recorder, timeline

    recorder = Recorder.__new__(Recorder)
    recorder.seen, recorder.events = {}, []
    waiting = {"metadata": {"name": "r", "uid": "u2", "creationTimestamp": "2026-12-01T10:00:00Z"},
               "spec": {"nodeName": "a"},
               "status": {"containerStatuses": [{"state": {"waiting": {"reason": "ImagePullBackOff"}}}]}}
    recorder._on("MODIFIED", waiting)
    recorder._on("MODIFIED", waiting)  # its back-off again: the first failure is the phase
    assert [e.phase for e in recorder.events] == ["created", "scheduled", "pull_failed"]
    t0 = 100.0
    events = [Event(t0 + 0.1, "deleted", "v", "u1", "a", None), Event(t0 + 0.2, "created", "r", "u2", None, None),
              Event(t0 + 0.3, "scheduled", "r", "u2", "a", None), Event(t0 + 1.3, "pull_failed", "r", "u2", "a", None),
              Event(t0 + 22.2, "started", "r", "u2", "a", None)]
    (replica,) = timeline(events, t0)["replicas"]
    assert replica["pull_failed"] == pytest.approx(1.3) and replica["started"] == pytest.approx(22.2)


def test_out_of_service_remediation_needs_the_taint_the_stuck_pods_gone_and_whole_groups():
    from probes import remediation

    group = {"kilocard.io/tp-group": "g", "kilocard.io/group-size": "2", "kilocard.io/tp-size": "16"}
    rank0 = pod("g-0", "a", cards=8, group="ns/g", **group)
    stuck = PodView("ns", "g-1", "uid-old", "lost", "m", True, True, 8, "ns/g", 1,
                    {"kilocard.io/model": "m", **group})
    lost = node("lost", ready=False)
    oos = NodeView("lost", lost.labels, ready=False, cards_capacity=8, cards_allocatable=8,
                   taints=("node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",))
    nodes = (node("a"), node("b"))

    v = remediation.out_of_service(ClusterSnapshot((rank0, stuck), (*nodes, lost)), "lost", ("m",))
    assert not v.ok and "is not out of service" in v.reason
    v = remediation.out_of_service(ClusterSnapshot((rank0, stuck), (*nodes, oos)), "lost", ("m",))
    assert not v.ok and v.details["stuck"] == ["g-1"]
    v = remediation.out_of_service(ClusterSnapshot((rank0,), (*nodes, oos)), "lost", ("m",))
    assert not v.ok and "1 of 2 ranks present" in v.reason  # PodGC did its part, the StatefulSet not yet
    starting = pod("g-1", "b", cards=8, group="ns/g", rank=1, ready=False, **group)
    v = remediation.out_of_service(ClusterSnapshot((rank0, starting), (*nodes, oos)), "lost", ("m",))
    assert not v.ok and "partially Ready" in v.reason
    back = pod("g-1", "b", cards=8, group="ns/g", rank=1, **group)
    assert remediation.out_of_service(ClusterSnapshot((rank0, back), (*nodes, oos)), "lost", ("m",)).ok
    v = remediation.out_of_service(ClusterSnapshot((rank0, back), nodes), "lost", ("m",))
    assert v.ok and "deleted" in v.reason  # deleting the node object is the other way out


def test_tp_groups_recovered_only_when_whole_ready_and_off_the_faulted_nodes():
    group = {"kilocard.io/tp-group": "g", "kilocard.io/group-size": "2", "kilocard.io/tp-size": "16"}
    rank0 = pod("g-0", "a", cards=8, group="ns/g", **group)
    nodes = (node("a"), node("b"), node("c"))
    on_lost = pod("g-1", "b", cards=8, group="ns/g", rank=1, **group)
    # Before the fault shows, the group looks whole: on the faulted node, that is not recovery.
    v = tp_groups.recovered(ClusterSnapshot((rank0, on_lost), nodes), "m", {"b"})
    assert not v.ok and v.details["stuck"] == ["g-1"]
    v = tp_groups.recovered(ClusterSnapshot((rank0,), nodes), "m", {"b"})
    assert not v.ok and "1 of 2 ranks present" in v.reason
    starting = pod("g-1", "c", cards=8, group="ns/g", rank=1, ready=False, **group)
    assert not tp_groups.recovered(ClusterSnapshot((rank0, starting), nodes), "m", {"b"}).ok
    back = pod("g-1", "c", cards=8, group="ns/g", rank=1, **group)
    assert tp_groups.recovered(ClusterSnapshot((rank0, back), nodes), "m", {"b"}).ok


def test_tp_groups_recovered_counts_the_pods_the_workloads_ask_for():
    # A pod kill: between the delete and the replacement's creation the survivors look whole.
    a, b = pod("r-a", "a", cards=8), pod("r-b", "b", cards=8)
    nodes = (node("a"), node("b"), node("c"))
    v = tp_groups.recovered(ClusterSnapshot((a,), nodes), "m", set(), desired=2)
    assert not v.ok and v.reason == "m: 1 of 2 pods the workloads ask for"
    assert tp_groups.recovered(ClusterSnapshot((a, b), nodes), "m", set(), desired=2).ok


class Workloads:
    """kube.list_raw over Deployments and StatefulSets, as the apiserver lists them."""

    def __init__(self, **by_kind):
        self.by_kind = by_kind

    def list_raw(self, what, path):
        return self.by_kind.get(path.rsplit("/", 1)[1], [])


def workload(name: str, replicas: int, labels: dict, command: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"replicas": replicas, "template": {
        "metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "command": ["sh", "-c", command]}]}}}}


def test_the_pods_a_model_asks_for_count_the_workers_that_name_no_model():
    # LeaderWorkerSet's leader StatefulSet (the engine's arguments) and one worker StatefulSet per
    # group (Ray only; the LWS name label): with the workers left out, a group deleted whole by
    # RecreateGroupOnPodRestart would leave the other group looking like every pod asked for.
    lws = {"leaderworkerset.sigs.k8s.io/name": "vllm"}
    leader = ("python3 -m vllm.entrypoints.openai.api_server --model meta/405b --served-model-name m "
              "--tensor-parallel-size 8 --pipeline_parallel_size 2")
    worker = "bash multi-node-serving.sh worker --ray_address=$(LWS_LEADER_ADDRESS)"
    kube = Workloads(statefulsets=[workload("vllm", 2, {**lws, "role": "leader"}, leader),
                                   workload("vllm-0", 1, lws, worker), workload("vllm-1", 1, lws, worker)],
                     deployments=[workload("vllm", 1, {"app": "cache"}, "redis-server")])
    assert tp_groups.desired(kube, "m", "serving") == 4
    assert tp_groups.desired(kube, "other", "serving") is None and tp_groups.desired(kube, "m", None) is None
