"""The fleet simulator's routing tier (testbed/simulator/engine.py Tier, openai.py): a proxy or an
endpoint picker in front of a model, found as chaos.routers finds the stacks' routers; what a
client meets when a router is frozen, unreachable or gone (failing open or closed, held, retried),
and what the fleet's own traffic loses (the gateway's router_unavailable failures)."""

import random
import threading
import time
import uuid

import pytest

from chaos import load, routers
from testbed.simulator import openai
from testbed.simulator.engine import ROUTER_UNAVAILABLE
from testbed.simulator.server import Server
from tests.unit.sim_helpers import pod, world_with

BIG = "llama-3-70b"


def uid(name):
    """A router pod's UID (rank-stall names a pod by its UID, a lower-case UUID)."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, name))


def router_pod(name, node, shape, mode=None, args=(), ready=True):
    """A router as its stack makes it: an endpoint picker of the inference extension's chart, or
    vLLM production-stack's router, finding the pods labelled kilocard.io/model=BIG."""
    if shape == routers.PICKER:
        labels = {"inferencepool": "pool-epp"}
        args = ["--pool-name", "pool", "--endpoint-selector", f"kilocard.io/model={BIG}", *args]
    else:
        labels = {"app.kubernetes.io/component": "router", "app.kubernetes.io/part-of": "vllm-stack"}
        args = ["--k8s-label-selector", f"kilocard.io/model={BIG}", *args]
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid(name), "labels": labels,
                         "annotations": {routers.FAILURE_MODE_ANNOTATION: mode} if mode else {}},
            "spec": {"nodeName": node, "containers": [{"name": "router", "args": args}]},
            "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}


@pytest.fixture
def fleet():
    """(world, URL, server): two 70B replicas (n0, n1); routers are added by each test."""
    w = world_with(pod("a", "n0", BIG, 8), pod("b", "n1", BIG, 8), nodes=3)
    srv = Server(("127.0.0.1", 0), w, "token")
    srv.openai.rng = random.Random(7)  # which router and replica each request meets, repeatably
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield w, f"http://127.0.0.1:{srv.server_address[1]}", srv
    srv.shutdown()
    srv.server_close()


def send(url, n=1, timeout=5.0):
    client = load.Client(load.LoadSpec(BIG, qps=20, prompt_tokens=16, output_tokens=2, url=url,
                                       timeout_seconds=timeout))
    return [client.send("hi") for _ in range(n)]


def lost(w, reason=ROUTER_UNAVAILABLE):
    """The share of the model's requests (its own traffic and the endpoint's) failed for `reason`
    over a tick of 2 s."""
    before, asked = w.failed[("ns", BIG, reason)], w.requests[("ns", BIG)]
    w.last_tick = time.monotonic() - 2.0
    w.tick()
    return (w.failed[("ns", BIG, reason)] - before) / (w.requests[("ns", BIG)] - asked)


def stall(w, name, node="n2"):
    return w.add_fault(node, {"kind": "rank-stall", "target": {"pod_uid": uid(name)}, "ttl_seconds": 60})


def test_a_model_without_routers_is_routed_by_the_gateway_and_a_healthy_tier_loses_nothing(fleet):
    w, url, _srv = fleet
    assert openai.tier_of(w, BIG, None) is None and all(s.error is None for s in send(url, 3))
    w.upsert_pod(router_pod("epp", "n2", routers.PICKER))
    tier = openai.tier_of(w, BIG, None)
    assert (tier.shape, tier.failure_mode, tier.routers) == (routers.PICKER, routers.FAIL_CLOSE, ((uid("epp"), False),))
    assert all(s.error is None for s in send(url, 3)) and lost(w) == 0


def test_a_frozen_picker_fails_closed_by_default_and_open_when_its_pool_says(fleet):
    w, url, _srv = fleet
    w.upsert_pod(router_pod("epp", "n2", routers.PICKER))
    stall(w, "epp")
    assert {s.error for s in send(url, 3)} == {"http_503"}
    assert lost(w) == pytest.approx(1.0)  # every request of its own traffic too
    w.upsert_pod(router_pod("epp", "n2", routers.PICKER, mode=routers.FAIL_OPEN))
    answered = send(url, 3)
    # The gateway waits for the picker's answer, then forwards: later, but answered.
    assert all(s.error is None and s.ttft >= openai.PICKER_TIMEOUT_SECONDS for s in answered)
    assert lost(w) == 0


def test_a_frozen_proxy_holds_its_share_until_it_thaws_and_a_gone_tier_routes_nothing(fleet):
    w, url, _srv = fleet
    w.upsert_pod(router_pod("r1", "n2", routers.PROXY))
    w.upsert_pod(router_pod("r2", "n0", routers.PROXY))
    frozen = stall(w, "r1")
    # Half the connections go to the frozen one: those wait for it, the client gives up.
    results = send(url, 8, timeout=0.6)
    assert {s.error for s in results} == {None, "timeout"}
    assert lost(w) == pytest.approx(0.5)
    threading.Timer(0.5, w.delete_fault, ("n2", frozen.id)).start()
    w.remove_pod(uid("r2"))  # the next request goes to the frozen one, and is answered once it thaws
    started = time.monotonic()
    (thawed,) = send(url)
    assert thawed.error is None and time.monotonic() - started >= 0.5
    # Both routers gone (killed, their replacements not yet scheduled): nothing reaches a replica.
    w.remove_pod(uid("r1"))
    assert [s.error for s in send(url, 2)] == ["http_503"] * 2
    assert lost(w) == pytest.approx(1.0)


def test_a_proxy_that_reroutes_tries_another_replica_and_one_that_does_not_fails(fleet):
    w, url, _srv = fleet
    w.add_fault("n0", {"kind": "partition", "ttl_seconds": 60})  # replica a unreachable
    w.upsert_pod(router_pod("r1", "n2", routers.PROXY))
    assert "http_503" in {s.error for s in send(url, 16)}
    assert lost(w, "replica_unreachable") == pytest.approx(0.5)
    w.upsert_pod(router_pod("r1", "n2", routers.PROXY, args=["--max-instance-failover-reroute-attempts", "1"]))
    assert openai.tier_of(w, BIG, None).attempts == 2
    assert {s.error for s in send(url, 16)} == {None}
    assert lost(w, "replica_unreachable") == pytest.approx(0.25)  # both tries met the unreachable one
