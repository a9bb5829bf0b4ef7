"""A frozen TP rank in the fleet simulator: its group looks Ready and serves nothing; the network
reset that cuts a cross-node group; and every effect read back, before and after it is undone
behind the agent's back."""

import dataclasses

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from testbed.simulator.metrics import VllmCollector
from testbed.simulator.world import World
from tests.unit.sim_helpers import pod, world_with


def run(w: World, seconds: int) -> None:
    for _ in range(seconds):
        w.last_tick -= 1.0  # one simulated second per tick
        w.tick()


def uid(group: str, rank: int) -> str:
    """Pod UIDs as the API gives them (rank-stall's target names one)."""
    return f"00000000-0000-0000-0000-{int(group[1:]):06d}{rank:06d}"


def tp(group: str, node: str, model: str = "llama-3-70b", size: int = 8, engine: str = "vllm") -> list[dict]:
    """A TP=8 replica of llama-3-70b (or `size` ranks of `model` on `engine`): one pod per rank,
    one card each, on one node."""
    labels = {"kilocard.io/tp-group": group, "kilocard.io/group-size": str(size), "kilocard.io/engine": engine}
    return [pod(f"{group}-{r}", node, model, 1, uid=uid(group, r),
                labels={**labels, "apps.kubernetes.io/pod-index": str(r)}) for r in range(size)]


def stall(w: World, group: str, rank: int, node: str = "n0") -> str:
    return w.add_fault(node, {"kind": "rank-stall", "target": {"pod_uid": uid(group, rank)},
                              "ttl_seconds": 300}).id


def exported(w: World) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(VllmCollector(w))
    return generate_latest(registry).decode()


def above(s, bound: float) -> float:
    """TTFT observations over `bound` seconds."""
    return s.ttft_count - s.ttft_buckets[s.engine.ttft_buckets.index(bound)]


def test_a_stalled_rank_hangs_its_group_which_stays_ready_and_queues_its_share():
    w = world_with(*tp("g0", "n0"), *tp("g1", "n1"))
    run(w, 10)
    hung, healthy = w.series["ns/g0"], w.series["ns/g1"]
    served, other = hung.success, healthy.success
    gauges = (hung.running, hung.waiting, hung.kv_usage)
    stall(w, "g0", 3)
    run(w, 20)
    assert all(p.ready for p in w.pods.values()) and w.take_actions() == []  # Kubernetes sees nothing
    assert hung.success == served  # nothing completes
    assert hung.backlog == pytest.approx(5 * 20, rel=0.05)  # what arrives queues
    # The gateway still sends it half of the model's 10 req/s: the other replica's share is unchanged.
    assert healthy.success - other == pytest.approx(5 * 20, rel=0.05)
    assert sum(n for (_ns, _m, _reason), n in w.failed.items()) == 0
    assert w.requests[("ns", "llama-3-70b")] == pytest.approx(10 * 30, rel=0.05)  # the gateway counts them all
    # Its engine's gauges froze as they stood: the batch it held, and at this load an empty queue.
    assert (hung.running, hung.waiting, hung.kv_usage) == gauges
    running, waiting, _kv = gauges
    assert running > 30 and waiting == 0
    text = exported(w)
    lead = 'engine="0",model_name="llama-3-70b",namespace="ns",pod="g0-0"'
    assert f"vllm:num_requests_running{{{lead}}} {running}" in text
    assert f"vllm:num_requests_waiting{{{lead}}} 0.0" in text


def test_a_stalled_sglang_rank_freezes_the_gauges_sglang_names():
    w = world_with(*tp("g0", "n0", engine="sglang"))
    run(w, 10)
    running = w.series["ns/g0"].running
    stall(w, "g0", 1)
    run(w, 10)
    text = exported(w)
    lead = 'engine="0",model_name="llama-3-70b",namespace="ns",pod="g0-0"'
    assert running > 0 and f"sglang:num_running_reqs{{{lead}}} {running}" in text
    assert f"sglang:num_queue_reqs{{{lead}}} 0.0" in text


@pytest.mark.parametrize("model", ["llama-2-7b", "llama-3-70b", "llama-3-405b", "any-other"])
def test_at_the_testbed_s_load_a_stall_freezes_a_batch_of_running_requests(model):
    # Utilisation 0.25 (the testbed's): the queue is empty, the batch holds arrival x latency
    # (Little's law), tens of requests; the hung-group rule sees those, not the queue.
    w = world_with(*tp("g0", "n0", model, size=2))
    run(w, 10)
    s = w.series["ns/g0"]
    stall(w, "g0", 1)
    run(w, 10)
    assert s.waiting == 0 and s.running > 30, (s.running, s.waiting)


def test_after_the_thaw_the_backlog_drains_with_the_long_waits_it_had():
    w = world_with(*tp("g0", "n0"), *tp("g1", "n1"))
    run(w, 10)
    s = w.series["ns/g0"]
    assert above(s, 1.0) < 1
    f = stall(w, "g0", 3)
    run(w, 20)
    count, late = s.ttft_count, above(s, 2.5)
    w.delete_fault("n0", f)
    run(w, 30)
    assert s.backlog == 0 and s.waiting < 5
    assert s.ttft_count - count == pytest.approx(5 * 20 + 5 * 30, rel=0.05)  # every waiting request served
    assert above(s, 2.5) - late > 40  # those that waited land in the high TTFT buckets
    assert above(w.series["ns/g1"], 1.0) < 1


def test_a_stalled_rank_0_exports_nothing_for_its_replica():
    w = world_with(*tp("g0", "n0"), *tp("g1", "n1"))
    run(w, 5)
    assert 'pod="g0-0"' in exported(w)
    f = stall(w, "g0", 0)
    run(w, 5)
    text = exported(w)
    assert 'pod="g0-0"' not in text and 'pod="g1-0"' in text
    w.delete_fault("n0", f)
    assert 'pod="g0-0"' in exported(w)


def test_a_stall_of_a_pod_not_on_the_node_is_refused_as_the_agent_finds_no_cgroup():
    from chaos.agent.protocol import FaultError

    w = world_with(*tp("g0", "n0"))
    with pytest.raises(FaultError) as err:
        stall(w, "g0", 3, node="n1")
    assert err.value.status == 404 and w.faults == {} and w.stalled == set()


def test_a_tcp_reset_on_one_node_stalls_a_cross_node_group_and_its_requests_fail_reset():
    group = {"kilocard.io/tp-group": "g0", "kilocard.io/group-size": "2"}
    w = world_with(pod("g0-0", "n0", "llama-3-405b", 8, labels={**group, "apps.kubernetes.io/pod-index": "0"}),
                   pod("g0-1", "n1", "llama-3-405b", 8, labels={**group, "apps.kubernetes.io/pod-index": "1"}))
    run(w, 5)
    served = w.series["ns/g0"].success
    f = w.add_fault("n1", {"kind": "tcp-reset", "ttl_seconds": 60})
    assert w.replica_speed(w.replicas()["ns/g0"])[::2] == (0.0, "connection_reset")
    run(w, 5)
    assert w.series["ns/g0"].success == served
    assert w.failed[("ns", "llama-3-405b", "connection_reset")] == pytest.approx(3 * 5, rel=0.05)
    w.delete_fault("n1", f.id)
    run(w, 2)
    assert w.series["ns/g0"].success > served


TWO = {"kilocard.io/tp-group": "g0", "kilocard.io/group-size": "2"}
FAULTS = {
    "ecc": {"target": {"card": 1}, "params": {"count": 2}},
    "xid": {"target": {"card": 1}, "params": {"xid": 79}},
    "card-isolate": {"target": {"card": 1}},
    "npu-fault": {"target": {"card": 1}, "params": {"code": "80E18402"}},
    "bandwidth": {"params": {"rate_mbit": 1000}},
    "loss": {"params": {"percent": 5}},
    "partition": {},
    "delay": {"params": {"ms": 50}},
    "tcp-reset": {},
    "kubelet-stop": {},
    "rank-stall": {"target": {"pod_uid": uid("g0", 0)}},
}


def state(w: World) -> tuple:
    """What a fault may change (lifetime counters aside: a card reset keeps them)."""
    volatile = ("speed", "xid", "sbe_vol", "dbe_vol", "remap_pending", "npu")
    cards = {k: {f: getattr(c, f) for f in volatile} for k, c in w.cards.items()}
    nets = {n: dataclasses.asdict(w.net(n)) for n in w.node_cards}
    isolated = {n: set(v) for n, v in w.isolated.items() if v}
    return cards, nets, isolated, dict(w.allocatable), set(w.lost), set(w.stalled), set(w.sabotaged)


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_every_effect_reads_back_confirmed_then_mismatch_once_undone_by_hand(kind):
    w = world_with(pod("g0-0", "n0", "llama-3-405b", 4, uid=uid("g0", 0),
                       labels={**TWO, "apps.kubernetes.io/pod-index": "0"}),
                   pod("g0-1", "n1", "llama-3-405b", 4, labels={**TWO, "apps.kubernetes.io/pod-index": "1"}))
    clean = state(w)
    f = w.add_fault("n0", {"kind": kind, "ttl_seconds": 60, **FAULTS[kind]})
    status, evidence = w.observe("n0", f.id)
    assert status == "confirmed", evidence
    w.sabotage("n0", f.id)
    status, evidence = w.observe("n0", f.id)
    assert status == "mismatch", evidence
    assert [x.id for x in w.faults_on("n0")] == [f.id]  # still listed as active
    assert w.delete_fault("n0", f.id) == "reverted"
    assert state(w) == clean and w.faults == {}
    with pytest.raises(KeyError):
        w.observe("n0", f.id)


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_every_effect_reads_back_mismatch_once_the_world_lost_it_without_the_sabotage_hook(kind):
    # The machine re-imaged under the same name (the world forgets the node and sees it anew: clean
    # cards, network and kubelet); a frozen container thawed by hand. The fault stays listed.
    w = world_with(pod("g0-0", "n0", "llama-3-405b", 4, uid=uid("g0", 0),
                       labels={**TWO, "apps.kubernetes.io/pod-index": "0"}),
                   pod("g0-1", "n1", "llama-3-405b", 4, labels={**TWO, "apps.kubernetes.io/pod-index": "1"}))
    f = w.add_fault("n0", {"kind": kind, "ttl_seconds": 60, **FAULTS[kind]})
    assert w.observe("n0", f.id)[0] == "confirmed"
    if kind == "rank-stall":
        w.stalled.clear()
    else:
        w.remove_node("n0")
        w.upsert_node("n0", 8)
    status, evidence = w.observe("n0", f.id)
    assert status == "mismatch", evidence
    assert w.sabotaged == set() and w.delete_fault("n0", f.id) == "reverted"


def test_a_network_fault_reads_back_what_the_node_s_network_shows_not_that_it_was_applied():
    w = world_with(pod("a", "n0", "llama-2-7b", 1))
    light, heavy = (w.add_fault("n0", {"kind": "loss", "params": {"percent": pct}, "ttl_seconds": 60}) for pct in (5, 10))
    client = w.add_fault("n0", {"kind": "tcp-reset", "params": {"ports": [8000]}, "ttl_seconds": 60})
    assert [w.observe("n0", f.id)[0] for f in (light, heavy, client)] == ["confirmed"] * 3
    assert w.observe("n0", light.id)[1] == "n0's network: loss_percent 10, reset_client"  # stacked: 10 % covers 5 %
    del w.shaping["n0"][heavy.id]  # its nft table dropped by hand: the lighter loss is left
    assert w.observe("n0", heavy.id) == ("mismatch", "n0's network: loss_percent 5, reset_client, where the loss "
                                                     "fault alone shapes loss_percent 10")
    assert w.observe("n0", light.id)[0] == "confirmed"
    collectives = w.add_fault("n0", {"kind": "tcp-reset", "params": {"ports": [29500]}, "ttl_seconds": 60})
    w.shaping["n0"].pop(collectives.id)  # the client path's reset does not stand for the collectives'
    assert w.observe("n0", collectives.id) == ("mismatch", "n0's network: loss_percent 5, reset_client, where the "
                                                           "tcp-reset fault alone shapes reset_collectives")
    w.shaping["n0"].clear()  # the node's ruleset flushed
    assert w.observe("n0", light.id) == ("mismatch", "n0's network: not shaped, where the loss fault alone shapes "
                                                     "loss_percent 5")


def test_sabotage_of_an_unknown_fault_is_a_key_error_and_a_ttl_revert_after_it_is_clean():
    w = world_with(pod("a", "n0", "llama-2-7b", 1))
    with pytest.raises(KeyError):
        w.sabotage("n0", "never-made")
    f = w.add_fault("n0", {"kind": "xid", "target": {"card": 0}, "params": {"xid": 79}, "ttl_seconds": 5})
    with pytest.raises(KeyError):
        w.sabotage("n1", f.id)  # not that node's
    w.sabotage("n0", f.id)
    assert w.cards[("n0", 0)].speed == 1.0
    w.tick(now=f.expires_at + 1)
    assert w.faults == {} and w.sabotaged == set() and w.cards[("n0", 0)].xid == 0


def test_the_fake_node_reads_back_a_kind_it_has_no_state_for_as_inconclusive():
    from chaos.agent.protocol import Fault, validate
    from testbed.simulator.effects import Effect

    f = Fault.create("n0", validate({"kind": "delay", "params": {"ms": 1}, "ttl_seconds": 5}))
    assert Effect().observe(World("nvidia.com/gpu"), f) == ("inconclusive", "the fake node cannot read delay back")



def test_a_reset_scoped_to_the_collectives_port_stalls_the_cross_node_group_and_spares_the_client_path():
    from chaos.agent.protocol import Fault
    from testbed.simulator.effects import Net, TcpReset

    def shaped(ports):
        net = Net()
        TcpReset().shape(net, Fault("f", "n", "tcp-reset", {}, {"ports": ports} if ports else {}, 60, "r", 0, 60))
        return net.reset_client, net.reset_collectives

    assert shaped([29500]) == (False, True)  # NCCL's and gloo's traffic between the machines only
    assert shaped([8000]) == (True, False)  # the engines' API only
    assert shaped(None) == (True, True) and shaped([8000, 29500]) == (True, True)
