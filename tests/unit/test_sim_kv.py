"""KV-cache exhaustion in the fleet simulator: the requests the endpoint answers fill a replica's
KV blocks; past them it preempts (vllm:num_preemptions_total), serves no more than fits and
queues the rest, so TTFT climbs while every pod stays Ready; a shared prefix is held once. And
the capacity formula of the field account (probes.capacity) against the simulated onset."""

from __future__ import annotations

import random

import pytest

from probes.capacity import Demand
from testbed.simulator.world import World
from tests.unit.sim_helpers import pod, world_with
from tests.unit.test_sim_stall import exported, run

LONG = "llama-3-8b-long"
BLOCKS = 2048  # 32,768 tokens, as the fleet's manifest fixes it
PROMPT, OUTPUT = 3072, 64
SERVICE = ("ns", LONG)


def long_replica(name: str = "r0", node: str = "n0") -> dict:
    p = pod(name, node, LONG, 1, labels={"kilocard.io/layers": "32", "kilocard.io/kv-heads": "8",
                                         "kilocard.io/head-dim": "128", "kilocard.io/dtype": "bfloat16"})
    p["spec"]["containers"][0]["args"] += ["--num-gpu-blocks-override", str(BLOCKS), "--block-size", "16"]
    return p


class Client:
    """Requests offered at `qps` a second of simulated time, each prompt its own words past a
    prefix of `shared` words every prompt has."""

    def __init__(self, w: World, qps: float, shared: int = 0, seed: int = 1) -> None:
        self.w, self.qps, self.owed = w, qps, 0.0
        self.rng = random.Random(seed)
        self.prefix = [f"s{i}" for i in range(shared)]

    def second(self) -> None:
        self.owed += self.qps
        while self.owed >= 1:
            self.owed -= 1
            words = self.prefix + [f"w{self.rng.getrandbits(40)}" for _ in range(PROMPT - len(self.prefix))]
            with self.w.lock:
                self.w.offer(SERVICE, words, OUTPUT)
        run(self.w, 1)


def series(w: World):
    return next(iter(w.series.values()))


def test_the_endpoint_s_requests_join_the_replica_s_demand_and_its_kv_cache():
    w = world_with(long_replica())
    quiet = Client(w, 0.0)
    for _ in range(5):
        quiet.second()
    alone = series(w).kv_usage  # the fleet's own light traffic
    busy = Client(w, 4.0)
    for _ in range(10):
        busy.second()
    s = series(w)
    assert alone < 0.2 and s.kv_usage > alone + 0.3, (alone, s.kv_usage)
    assert s.preemptions == 0 and s.running == pytest.approx(s.batch, rel=0.05)
    assert "vllm:num_preemptions_total" in exported(w)


def test_past_its_blocks_a_replica_preempts_queues_and_its_ttft_climbs_while_it_stays_ready():
    w = world_with(long_replica())
    c = Client(w, 30.0)
    for _ in range(20):
        c.second()
    s = series(w)
    assert s.kv_usage == 1.0 and s.preemptions > 0
    assert s.running < s.batch  # what does not fit is not running
    assert s.backlog > 0 and s.waiting > s.backlog  # past what fits, arrivals queue
    assert all(p.ready for p in w.pods.values())
    ttft_mean = s.ttft_sum / s.ttft_count
    assert ttft_mean > 1.0, ttft_mean
    assert 'vllm:num_preemptions_total{engine="0",model_name="llama-3-8b-long"' in exported(w)


def test_a_prefix_every_prompt_shares_is_held_once_so_the_same_load_fits():
    unshared, shared = world_with(long_replica()), world_with(long_replica())
    a, b = Client(unshared, 6.0), Client(shared, 6.0, shared=PROMPT * 3 // 4)
    for _ in range(20):
        a.second()
        b.second()
    assert series(unshared).preemptions > 0
    assert series(shared).preemptions == 0 and series(shared).kv_usage < 0.5


def onset(qps_steps: list[float]) -> tuple[float, float, float]:
    """(offered QPS, requests in the batch, mean request seconds) at the first step whose load
    preempts, stepping the load up every 15 s on a fresh replica with no traffic but this."""
    w = world_with(long_replica())
    w.qps_override[LONG] = 0.0
    last = (0.0, 0.0, 0.0)
    for qps in qps_steps:
        c = Client(w, qps, seed=int(qps * 10))
        for _ in range(15):
            c.second()
        s = series(w)
        if s.preemptions > 0:
            return qps, s.batch, last[2]
        last = (qps, s.batch, s.e2e_sum / s.e2e_count)
    raise AssertionError("no preemption up to the last step")


def test_the_capacity_formula_predicts_the_simulated_onset_of_preemption_and_its_headroom_comes_first():
    """The formula (probes.capacity.Demand: Little's law x the request's whole length) says when
    the mean KV demand passes the cache. The simulator holds blocks as vLLM does (whole blocks,
    half the output on average, a 1 % watermark) and sees each second's arrivals, not their mean:
    it starts preempting within a few percent of the formula's point, a little before it when a
    second brings more than the mean. The formula's default 25 % headroom says so first."""
    steps = [q / 4 for q in range(8, 80)]
    qps, batch, seconds = onset(steps)
    predicted_requests = BLOCKS * 16 / (PROMPT + OUTPUT)  # formula: tokens held per request = prompt + output
    # The QPS at which the formula's demand passes the cache, with the latency measured below onset.
    predicted = next(q for q in steps if Demand(q, PROMPT, OUTPUT, seconds).tokens_held() > BLOCKS * 16)
    warned = next(q for q in steps if Demand(q, PROMPT, OUTPUT, seconds).tokens_held() * 1.25 > BLOCKS * 16)
    print(f"predicted onset: {predicted_requests:.2f} requests in flight, at {predicted:g} QPS (with 25 % "
          f"headroom: {warned:g} QPS); simulated: {batch:.2f} requests in the batch at {qps:g} QPS (mean request "
          f"{seconds:.3f} s)")
    assert warned < qps
    assert abs(qps - predicted) <= 0.05 * predicted + 0.25
    assert 0.9 * predicted_requests <= batch <= 1.05 * predicted_requests
