import time

import pytest

from chaos.agent.protocol import CONFIRMED, MISMATCH, FaultError, validate
from testbed.simulator import model as m
from testbed.simulator.world import World
from testbed.stages import LOST_LABEL
from tests.unit.sim_helpers import pod, quantile, world_with


def run(w: World, seconds: int) -> None:
    for _ in range(seconds):
        w.last_tick -= 1.0  # one simulated second per tick
        w.tick()


def p95(w: World, key: str) -> float:
    s = w.series[key]
    return quantile(0.95, m.TTFT_BUCKETS, s.ttft_buckets, s.ttft_count)


def test_cards_are_assigned_per_node_like_a_device_plugin():
    w = world_with(pod("a", "n0", "llama-2-7b", 1), pod("b", "n0", "llama-3-70b", 8), pod("c", "n0", "llama-2-7b", 2))
    assert w.pod_on_card("n0", 0).name == "a"
    # b wants 8 but only 7 are left: it gets what there is (the scheduler would not have placed it).
    assert [w.pod_on_card("n0", i).name for i in range(1, 8)] == ["b"] * 7
    w.remove_pod("uid-a")
    assert w.pod_on_card("n0", 0) is None


def test_healthy_replica_p95_matches_the_queue_model():
    w = world_with(pod("big", "n0", "llama-3-70b", 8))
    run(w, 30)
    assert p95(w, "ns/uid-big") == pytest.approx(m.ttft_p95(20, 5), rel=0.25)
    assert w.series["ns/uid-big"].success == pytest.approx(5 * 30, rel=0.05)


def test_ecc_on_one_card_slows_its_tp_group_threefold():
    w = world_with(pod("big", "n0", "llama-3-70b", 8), pod("other", "n1", "llama-3-70b", 8))
    run(w, 10)
    before = p95(w, "ns/uid-big")
    w.add_fault("n0", {"kind": "ecc", "target": {"card": 5}, "ttl_seconds": 300})
    w.series.clear()
    run(w, 30)
    assert p95(w, "ns/uid-big") / p95(w, "ns/uid-other") == pytest.approx(3.0, rel=0.2)
    assert p95(w, "ns/uid-big") > 0.5 > before
    card = w.cards[("n0", 5)]
    assert (card.dbe_vol, card.xid, card.remap_pending, card.speed) == (1, 63, 1, 0.5)


def test_a_throttled_card_slows_its_group_with_no_error_and_dcgm_shows_its_clock_and_reason():
    from testbed.simulator import dcgm

    w = world_with(pod("big", "n0", "llama-3-70b", 8), pod("other", "n1", "llama-3-70b", 8))
    run(w, 10)
    f = w.add_fault("n0", {"kind": "throttle", "target": {"card": 2}, "params": {"fraction": 0.6},
                           "ttl_seconds": 300})
    w.series.clear()
    run(w, 30)
    big, other = w.series["ns/uid-big"], w.series["ns/uid-other"]
    assert big.itl_sum / big.itl_count == pytest.approx(other.itl_sum / other.itl_count / 0.6, rel=0.05)
    card = w.cards[("n0", 2)]
    assert (card.dbe_vol, card.xid, card.remap_pending, card.pace()) == (0, 0, 0, 0.6)  # no error anywhere
    assert dcgm.sm_clock(card) == round(0.6 * dcgm.MAX_SM_CLOCK) and dcgm.throttle_reasons(card) == dcgm.SW_POWER_CAP
    assert w.observe("n0", f.id)[0] == CONFIRMED
    w.delete_fault("n0", f.id)
    assert (card.pace(), dcgm.throttle_reasons(card)) == (1.0, 0)
    # A ramp: the card falls from full speed to its floor over ramp_seconds.
    ramp = w.add_fault("n0", {"kind": "throttle", "target": {"card": 2}, "params": {"fraction": 0.5,
                                                                                    "ramp_seconds": 100},
                              "ttl_seconds": 300})
    assert card.pace(ramp.created_at + 50) == pytest.approx(0.75) and card.pace(ramp.created_at + 200) == 0.5


def test_fault_revert_resets_the_card_and_is_idempotent():
    w = world_with(pod("big", "n0", "llama-3-70b", 8))
    f = w.add_fault("n0", {"kind": "ecc", "target": {"card": 1}, "ttl_seconds": 300})
    assert w.delete_fault("n0", f.id) == "reverted"
    assert w.delete_fault("n0", f.id) == "already ended"
    card = w.cards[("n0", 1)]
    assert (card.dbe_vol, card.dbe_agg, card.speed, card.xid) == (0, 1, 1.0, 0)
    with pytest.raises(KeyError):
        w.delete_fault("n0", "never-made")


def test_ttl_expiry_reverts_with_nobody_asking():
    w = world_with(pod("big", "n0", "llama-3-70b", 8))
    f = w.add_fault("n0", {"kind": "xid", "target": {"card": 0}, "params": {"xid": 79}, "ttl_seconds": 5})
    assert w.cards[("n0", 0)].speed == 0.0
    w.tick(now=f.expires_at + 1)
    assert w.faults == {} and w.cards[("n0", 0)].speed == 1.0


def test_card_isolation_asks_for_lower_allocatable_and_the_pods_end():
    w = world_with(pod("small", "n0", "llama-2-7b", 1))
    f = w.add_fault("n0", {"kind": "card-isolate", "target": {"card": 0}, "ttl_seconds": 60})
    assert w.take_actions() == [("allocatable", "n0", 7), ("delete-pod", "ns", "small")]
    w.remove_pod("uid-small")
    w.upsert_pod(pod("next", "n0", "llama-2-7b", 1))
    assert w.pod_on_card("n0", 0) is None and w.pod_on_card("n0", 1).name == "next"
    w.delete_fault("n0", f.id)
    assert w.take_actions() == [("allocatable", "n0", 8)]


def test_no_ready_replica_means_every_request_fails():
    w = world_with(pod("a", "n0", "llama-2-7b", 1))
    run(w, 5)
    w.remove_pod("uid-a")
    before = dict(w.series["ns/uid-a"].__dict__)
    run(w, 10)
    assert w.failed[("ns", "llama-2-7b", "no_ready_replica")] == pytest.approx(10 * 50, rel=0.01)
    assert w.series["ns/uid-a"].__dict__ == before  # no TTFT samples anywhere


def test_partition_stalls_a_cross_node_group_and_cuts_a_node_off():
    group = {"kilocard.io/tp-group": "g0", "kilocard.io/group-size": "2"}
    w = world_with(pod("g0-0", "n0", "llama-3-405b", 8, labels={**group, "apps.kubernetes.io/pod-index": "0"}),
                   pod("g0-1", "n1", "llama-3-405b", 8, labels={**group, "apps.kubernetes.io/pod-index": "1"}))
    run(w, 5)
    assert w.replicas()["ns/g0"][0].name == "g0-0"
    w.add_fault("n1", {"kind": "bandwidth", "params": {"rate_mbit": 50_000}, "ttl_seconds": 60})
    assert w.replica_speed(w.replicas()["ns/g0"])[0] == pytest.approx(0.5)
    w.add_fault("n1", {"kind": "partition", "ttl_seconds": 60})
    run(w, 2)
    assert w.failed[("ns", "llama-3-405b", "replica_unreachable")] > 0


def test_a_leaderworkerset_group_is_one_replica_as_the_toolkit_reads_it():
    lws = {"leaderworkerset.sigs.k8s.io/group-key": "abc123", "kilocard.io/group-size": "2"}
    w = world_with(pod("lws-0", "n0", "llama-3-405b", 8, labels={**lws, "leaderworkerset.sigs.k8s.io/worker-index": "0"}),
                   pod("lws-0-1", "n1", "llama-3-405b", 8,
                       labels={**lws, "leaderworkerset.sigs.k8s.io/worker-index": "1"}))
    assert [(p.name, p.rank) for p in w.replicas()["ns/abc123"]] == [("lws-0", 0), ("lws-0-1", 1)]
    w.add_fault("n1", {"kind": "ecc", "target": {"card": 2}, "ttl_seconds": 60})
    assert w.replica_speed(w.replicas()["ns/abc123"])[0] == 0.5  # a sick card on rank 1 slows the group


@pytest.mark.parametrize("body, field", [
    ({"kind": "nope", "ttl_seconds": 5}, "kind"),
    ({"kind": "ecc", "target": {"card": 0}}, "ttl_seconds"),
    ({"kind": "ecc", "target": {"card": 0}, "ttl_seconds": 0}, "ttl_seconds"),
    ({"kind": "ecc", "target": {"card": 0}, "ttl_seconds": 10**9}, "ttl_seconds"),
    ({"kind": "ecc", "target": {}, "ttl_seconds": 5}, "target.card"),
    ({"kind": "ecc", "target": {"card": 0}, "params": {"speed": 2}, "ttl_seconds": 5}, "params.speed"),
    ({"kind": "ecc", "target": {"card": 0}, "params": {"type": "tbe"}, "ttl_seconds": 5}, "params.type"),
    ({"kind": "xid", "target": {"card": 0}, "ttl_seconds": 5}, "params.xid"),
    ({"kind": "loss", "params": {"percent": 120}, "ttl_seconds": 5}, "params.percent"),
    ({"kind": "delay", "ttl_seconds": 5}, "params.ms"),
    ({"kind": "bandwidth", "params": {"rate_mbit": "fast"}, "ttl_seconds": 5}, "params.rate_mbit"),
    ("not an object", "body"),
])
def test_bad_fault_requests_name_their_field(body, field):
    with pytest.raises(FaultError) as err:
        validate(body)
    assert err.value.field == field and str(err.value).startswith(f"{field}: ")


def test_unknown_card_or_node_changes_nothing():
    w = world_with(pod("big", "n0", "llama-3-70b", 8))
    with pytest.raises(FaultError, match=r"^target.card: node n0 has cards 0-7, got 9$"):
        w.add_fault("n0", {"kind": "ecc", "target": {"card": 9}, "ttl_seconds": 5})
    with pytest.raises(FaultError) as err:
        w.add_fault("ghost", {"kind": "ecc", "target": {"card": 0}, "ttl_seconds": 5})
    assert err.value.status == 404
    assert w.faults == {} and all(c.speed == 1.0 and c.dbe_vol == 0 for c in w.cards.values())


def test_a_lost_node_serves_nothing_and_exports_nothing():
    from prometheus_client import CollectorRegistry, generate_latest

    from testbed.simulator.dcgm import render_dcgm
    from testbed.simulator.metrics import VllmCollector

    w = world_with(pod("a", "n0", "llama-2-7b", 1), pod("b", "n1", "llama-2-7b", 1))
    run(w, 2)
    w.upsert_node("n0", 8, lost=True)
    run(w, 5)
    assert w.failed[("ns", "llama-2-7b", "replica_unreachable")] > 0  # its pod still reads Ready: traffic fails
    dcgm = render_dcgm(w)
    assert 'Hostname="n1"' in dcgm and 'Hostname="n0"' not in dcgm
    registry = CollectorRegistry(auto_describe=False)
    registry.register(VllmCollector(w))
    engine = generate_latest(registry).decode()
    assert 'pod="b"' in engine and 'pod="a"' not in engine
    w.upsert_node("n0", 8, lost=False)
    assert "n0" not in w.lost


def test_a_node_event_from_before_the_worlds_own_label_write_does_not_undo_it():
    """The kubelet-stop's label is written after the world knows; the node watch's events until it
    shows the write are stale (the CI failure: a sabotaged stop read back as still lost)."""
    w = world_with()
    f = w.add_fault("n0", {"kind": "kubelet-stop", "target": {}, "ttl_seconds": 300})
    assert w.take_actions() == [("labels", "n0", {LOST_LABEL: "true"})]
    w.upsert_node("n0", 8, lost=False)  # a status update from before the label landed
    assert w.observe("n0", f.id)[0] == CONFIRMED
    w.upsert_node("n0", 8, lost=True)  # the write shown: from now on the label rules
    w.sabotage("n0", f.id)
    w.upsert_node("n0", 8, lost=True)  # stale again, the other way
    assert w.observe("n0", f.id)[0] == MISMATCH and "n0" not in w.lost
    w.upsert_node("n0", 8, lost=False)
    w.upsert_node("n0", 8, lost=True)  # someone else labels it lost: the world follows
    assert "n0" in w.lost


def test_a_terminating_replica_keeps_its_cards_and_gets_no_new_requests():
    w = world_with(pod("a", "n0", "llama-3-70b", 8), pod("b", "n1", "llama-3-70b", 8))
    run(w, 5)
    draining = pod("a", "n0", "llama-3-70b", 8)
    draining["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    w.upsert_pod(draining)
    # Its replacement cannot have the cards while the old engine still holds them.
    w.upsert_pod(pod("a2", "n0", "llama-3-70b", 8, ready=False))
    assert [w.pod_on_card("n0", i).name for i in range(8)] == ["a"] * 8
    served = w.series["ns/uid-a"].ttft_count
    run(w, 10)
    assert w.series["ns/uid-a"].ttft_count == served  # the gateway stopped routing to it
    # Demand stays what two replicas carry: the terminating one and its replacement are one replica.
    # 5 s at half the 10 req/s each, then 10 s carrying all of it (three replicas seen would be 15 req/s).
    assert w.series["ns/uid-b"].ttft_count == pytest.approx(5 * 5 + 10 * 10, rel=0.02)
    w.remove_pod("uid-a")
    w.upsert_pod(pod("a2", "n0", "llama-3-70b", 8, ready=False))
    assert [w.pod_on_card("n0", i).name for i in range(8)] == ["a2"] * 8


def test_a_pod_seen_before_its_node_gets_its_cards_once_the_node_is_known():
    w = world_with(nodes=0)
    w.upsert_pod(pod("early", "n0", "llama-3-70b", 8))  # the pod watch ran ahead of the node watch
    assert w.pod_on_card("n0", 0) is None
    w.upsert_node("n0", 8)
    assert [w.pod_on_card("n0", i).name for i in range(8)] == ["early"] * 8


def test_a_serving_stacks_pods_are_replicas_without_a_kilocard_label_and_a_worker_waits_for_its_leader():
    from pathlib import Path

    import yaml

    stack = yaml.safe_load((Path(__file__).parent / "stacks" / "lws-vllm.yaml").read_text())
    leader, worker = ({**p, "metadata": {**p["metadata"], "uid": f"uid-{p['metadata']['name']}"},
                       "spec": {**p["spec"], "nodeName": f"n{i}"},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}} for i, p in enumerate(stack))
    w = world_with(worker)  # alone it names no model: not a replica yet
    assert w.pods == {}
    w.upsert_pod(leader)  # its leader says the model: both are one replica, ranked, whole at two
    (members,) = w.replicas().values()
    model = "meta-llama/Meta-Llama-3.1-405B-Instruct"
    assert [(p.name, p.rank, p.model, p.group, p.group_size) for p in members] == [
        ("vllm-1", 0, model, "serving/9f3c0d", 2), ("vllm-1-1", 1, model, "serving/9f3c0d", 2)]
    run(w, 5)
    assert [r.key for r in w.routes(list(w.replicas().items()))] == ["serving/9f3c0d"]  # Ready and whole: served
    w.remove_pod("uid-vllm-1-1")
    assert w.routes(list(w.replicas().items())) == []  # one of two: the gateway sends it nothing
    plain = {**pod("qwen-abc", "n1", "x", 2), "metadata": {"name": "qwen-abc", "namespace": "ns", "uid": "uid-q",
                                                          "labels": {"app": "qwen"}}}
    plain["spec"]["containers"][0]["args"] = ["vllm serve Qwen/Qwen2.5-7B --served-model-name qwen"]
    w.upsert_pod(plain)
    assert (w.pods["uid-q"].model, w.pods["uid-q"].group) == ("qwen", "ns/uid-q")  # alone: keyed by its uid


def starting(name: str, node: str, **annotations: str) -> dict:
    p = pod(name, node, "m", 8, ready=False)
    p["status"]["phase"] = "Pending"
    p["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.11.0"
    p["metadata"]["annotations"] = annotations
    return p


def test_a_registry_outage_fails_the_pulls_of_pods_still_waiting_for_their_image_and_not_of_running_ones():
    running = pod("old", "n0", "m", 8)
    running["status"]["phase"] = "Running"
    w = world_with(running, starting("new", "n0", **{"kilocard.io/image-pull-backoff": "1000ms"}))
    f = w.add_fault("n0", {"kind": "pull-block", "params": {"registries": ["docker.io"]}, "ttl_seconds": 300})
    assert w.take_actions() == [("annotate", "ns", ("new", {"kilocard.io/image-pull-failing":
                                                            "docker.io refuses connections"}))]
    status, evidence = w.observe("n0", f.id)
    assert status == CONFIRMED and "1 pod(s) there failed a pull: new" in evidence, evidence
    other = w.add_fault("n1", {"kind": "pull-block", "params": {"registries": ["nvcr.io"]}, "ttl_seconds": 300})
    w.upsert_pod(starting("elsewhere", "n1"))
    assert w.take_actions() == [] and "0 pod(s)" in w.observe("n1", other.id)[1]  # another registry: pulls
    w.delete_fault("n0", f.id)
    w.tick()
    assert w.take_actions() == []  # the outage is over; the kubelet's next retry is a moment away
    w.tick(now=time.time() + 2)
    assert w.take_actions() == [("annotate", "ns", ("new", {"kilocard.io/image-pull-failing": None}))]


def test_capped_reads_stretch_the_weight_loading_of_a_pod_not_yet_started_and_the_end_of_the_cap_gives_it_back():
    w = world_with(starting("new", "n0", **{"pod-ready.stage.kwok.x-k8s.io/delay": "18517ms",
                                            "kilocard.io/weights-load": "9333ms"}))
    f = w.add_fault("n0", {"kind": "io-throttle", "params": {"rate_mbps": 300}, "ttl_seconds": 300})
    # 1500 MB/s in production over a 300 MB/s cap: the load phase five times as long.
    stretched = {"pod-ready.stage.kwok.x-k8s.io/delay": f"{18517 + 4 * 9333}ms",
                 "kilocard.io/ready-delay-unstretched": "18517ms"}
    assert w.take_actions() == [("annotate", "ns", ("new", stretched))]
    assert "1 loading slowly: new" in w.observe("n0", f.id)[1]
    w.upsert_pod(starting("new", "n0", **{"kilocard.io/weights-load": "9333ms", **stretched}))
    assert w.take_actions() == []  # stretched once
    w.delete_fault("n0", f.id)
    assert w.take_actions() == [("annotate", "ns", ("new", {"pod-ready.stage.kwok.x-k8s.io/delay": "18517ms",
                                                            "kilocard.io/ready-delay-unstretched": None}))]


def test_a_dns_failure_fails_the_pulls_from_registries_named_by_host_and_not_by_address():
    by_address = starting("ip", "n0")
    by_address["spec"]["containers"][0]["image"] = "10.0.0.5:5000/vllm:v1"
    w = world_with(starting("named", "n0"), by_address)
    f = w.add_fault("n0", {"kind": "dns-block", "params": {"answer": "drop"}, "ttl_seconds": 300})
    assert w.take_actions() == [("annotate", "ns", ("named", {"kilocard.io/image-pull-failing":
                                                              "docker.io does not resolve (no DNS)"}))]
    status, evidence = w.observe("n0", f.id)
    assert status == CONFIRMED and "registries named by host; 1 pod(s) there failed a pull: named" in evidence
    w.delete_fault("n0", f.id)
    assert not w.pulls.refuses("n0", "docker.io")
