"""The fleet simulator's OpenAI-compatible endpoint (testbed/simulator/openai.py): routed as the
simulated gateway routes, answering with the latency model's TTFT and inter-token gaps, failing as
a faulted replica fails; and chaos.load's client against it, end to end (no cluster)."""

import dataclasses
import http.client
import json
import math
import threading
import time

import pytest

from chaos import load
from testbed.simulator import model as m
from testbed.simulator import openai
from testbed.simulator.server import Server
from tests.unit.sim_helpers import pod, world_with

BIG = "llama-3-70b"


@pytest.fixture
def endpoint():
    """(world, base URL) of a simulator serving two 70B replicas (n0, n1) and a 7B one not Ready."""
    w = world_with(pod("a", "n0", BIG, 8), pod("b", "n1", BIG, 8), pod("c", "n1", "llama-2-7b", 1, ready=False))
    w.last_tick -= 1
    w.tick()
    srv = Server(("127.0.0.1", 0), w, "token")
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield w, f"http://127.0.0.1:{srv.server_address[1]}", srv
    srv.shutdown()
    srv.server_close()


def call(url, path, body=None, method=None):
    conn = http.client.HTTPConnection(url.removeprefix("http://"), timeout=10)
    conn.request(method or ("POST" if body is not None else "GET"), path,
                 json.dumps(body) if body is not None else None, {"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read().decode()


def spec(url, **kw):
    return load.LoadSpec(BIG, qps=20, prompt_tokens=16, output_tokens=4, url=url, **kw)


def test_a_stream_is_openai_s_event_stream_ending_in_done(endpoint):
    _w, url, _srv = endpoint
    status, text = call(url, "/v1/completions", {"model": BIG, "prompt": "hi there", "max_tokens": 3, "stream": True,
                                                 "stream_options": {"include_usage": True}})
    events = [e.removeprefix("data: ") for e in text.split("\n\n") if e]
    assert status == 200 and events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert [c["choices"][0]["text"] for c in chunks[:3]] == [openai.TOKEN] * 3
    assert [c["choices"][0]["finish_reason"] for c in chunks[:3]] == [None, None, "length"]
    assert chunks[3]["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
    status, text = call(url, "/namespaces/ns/v1/chat/completions", {"model": BIG, "max_tokens": 2,
                                                                    "messages": [{"role": "user", "content": "hi"}]})
    answer = json.loads(text)
    assert status == 200 and answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": openai.TOKEN * 2}
    assert [x["id"] for x in json.loads(call(url, "/v1/models")[1])["data"]] == ["llama-2-7b", BIG]


@pytest.mark.parametrize("body, status, param", [
    ({"prompt": "x"}, 400, "model"), ({"model": BIG, "prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ({"model": BIG, "prompt": "x", "stream": "yes"}, 400, "stream"), ({"model": BIG}, 400, "prompt"),
    ({"model": "gpt-5", "prompt": "x"}, 404, "model"),
    ({"model": "llama-2-7b", "prompt": "x"}, 503, None),  # its one replica is not Ready
])
def test_bad_or_unservable_requests_get_openai_errors(endpoint, body, status, param):
    _w, url, _srv = endpoint
    got, text = call(url, "/v1/completions", body)
    assert (got, json.loads(text)["error"]["param"]) == (status, param)


def test_the_gateway_routes_only_to_replicas_whose_pods_are_all_ready(endpoint):
    w, _url, _srv = endpoint
    assert sorted(r.key for r in openai.replicas(w, BIG, None)) == ["ns/uid-a", "ns/uid-b"]
    assert openai.replicas(w, BIG, "elsewhere") is None
    w.upsert_pod(pod("b", "n1", BIG, 8, ready=False))
    (only,) = openai.replicas(w, BIG, "ns")
    # It gets the whole model's arrivals: what World._advance gives it.
    assert (only.key, only.arrival) == ("ns/uid-a", pytest.approx(0.25 * 20 * 2))


def test_ttft_and_gaps_are_drawn_from_the_latency_model_s_own_distributions(endpoint):
    w, _url, _srv = endpoint
    replica = dataclasses.replace(openai.replicas(w, BIG, None)[0], backlog=3.0, delay=0.01)
    assert openai.ttft(replica, 0.95) == pytest.approx(
        0.01 + m.ttft_p95(replica.service, replica.arrival, replica.backlog), abs=1e-5)
    assert openai.ttft(replica, 1e-9) == pytest.approx(0.01 + 3.0 / 20, abs=1e-5)  # the backlog's wait first
    for u in (0.05, 0.5, 0.99):
        assert m.itl_cdf(openai.gap(0.03, u), 0.03) == pytest.approx(u, abs=1e-4)


def test_a_partitioned_replica_fails_503_and_a_reset_one_resets_the_connection(endpoint):
    w, url, _srv = endpoint
    w.add_fault("n0", {"kind": "partition", "ttl_seconds": 60})
    w.add_fault("n1", {"kind": "tcp-reset", "ttl_seconds": 60})
    assert sorted(r.failure for r in openai.replicas(w, BIG, None)) == ["connection_reset", "replica_unreachable"]
    client = load.Client(spec(url))
    kinds = {client.send("hi").error for _ in range(20)}
    assert kinds == {"http_503", "connection_reset"}


def test_a_hung_replica_sends_no_first_token_until_it_thaws(endpoint):
    w, url, srv = endpoint
    srv.openai.slots = threading.BoundedSemaphore(1)  # what a request nobody waits for any more must give back
    uid = "00000000-0000-0000-0000-00000000000a"  # rank-stall names a pod by its UID
    w.remove_pod("uid-a")
    w.upsert_pod(pod("a", "n0", BIG, 8, uid=uid))
    w.upsert_pod(pod("b", "n1", BIG, 8, ready=False))  # one replica left, to be frozen
    stall = w.add_fault("n0", {"kind": "rank-stall", "target": {"pod_uid": uid}, "ttl_seconds": 60})
    assert load.Client(spec(url, timeout_seconds=0.6)).send("hi").error == "timeout"
    time.sleep(2 * openai.POLL_SECONDS)
    threading.Timer(0.6, w.delete_fault, ("n0", stall.id)).start()
    started = time.monotonic()
    answered = load.Client(spec(url)).send("hi")
    assert answered.error is None and answered.ttft > 0.5 and time.monotonic() - started > 0.6


def test_more_requests_than_the_server_answers_at_once_get_429(endpoint):
    _w, url, srv = endpoint
    srv.openai.slots = threading.BoundedSemaphore(1)
    srv.openai.slots.acquire()
    assert call(url, "/v1/completions", {"model": BIG, "prompt": "x"})[0] == 429
    assert call(url, "/v1/models", {"model": BIG}, "POST")[0] == 405


def test_the_load_client_measures_what_the_latency_model_says(endpoint):
    _w, url, _srv = endpoint
    running = load.Load(dataclasses.replace(spec(url), duration_seconds=3.0, seed=1)).start()
    running.wait()
    found = running.stop()["summary"]
    assert found["errors"] == {} and found["ok"] == found["requests"] > 40
    # Two replicas at a quarter of their 20/s each: P95 ln(20)/15 = 0.2 s; gaps of 30 ms on average.
    assert found["ttft_seconds"]["p95"] == pytest.approx(math.log(20) / 15, rel=0.5)
    # The gaps as the client saw them: a busy machine (six test workers on two cores) only adds to
    # the model's, never takes away.
    assert 0.03 * 0.75 <= found["tpot_seconds"]["p50"] <= 0.03 * 1.6, found["tpot_seconds"]


def test_a_stream_cut_short_is_an_aborted_request_and_a_running_load_shows_what_is_in_flight(endpoint):
    w, url, _srv = endpoint
    running = load.Load(dataclasses.replace(spec(url), qps=5, output_tokens=100, duration_seconds=1.0, seed=3)).start()
    assert load.running() is running
    time.sleep(0.8)
    answered, in_flight = running.seen()
    assert not answered and in_flight and all(0 <= t <= 0.8 for t in in_flight)  # 100 tokens take 3 s
    for node in ("n0", "n1"):  # both replicas cut off mid-stream
        w.add_fault(node, {"kind": "partition", "ttl_seconds": 60})
    running.stop()
    assert load.running() is None
    samples, in_flight = running.seen()
    cut = [s for s in samples if s.aborted]
    assert not in_flight and cut and all(s.error == "connection_reset" and s.ttft > 0 for s in cut), samples
