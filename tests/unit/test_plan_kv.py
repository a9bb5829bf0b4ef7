"""The plan's KV check: an experiment's load at its peak against the KV cache its faults leave
(chaos.run.kv_left), each way it can come out, and the engine argument that fixes a replica's
cache (chaos.serving.kv_cache_tokens), which the simulator and the formula both read."""

from __future__ import annotations

import pytest

from chaos import load, run, serving
from probes import slo
from probes.errors import NoData
from probes.snapshot import ClusterSnapshot, NodeView, PodView

SHAPE = {"kilocard.io/model": "long", "kilocard.io/layers": "32", "kilocard.io/kv-heads": "8",
         "kilocard.io/head-dim": "128", "kilocard.io/dtype": "bfloat16"}
FLEET = ClusterSnapshot(tuple(PodView("ns", f"r{i}", f"u{i}", "a", "long", True, False, 1, f"ns/r{i}", 0, SHAPE,
                                      kv_cache_tokens=32_768) for i in range(4)),
                        (NodeView("a", {}, cards_capacity=8, cards_allocatable=8),))
GONE = frozenset({("ns", "r0"), ("ns", "r1")})


def spec(**extra) -> load.LoadSpec:
    return load.parse({"model": "long", "qps": 4, "prompt_tokens": 3072, "output_tokens": 64,
                       "url": "http://127.0.0.1:6449/namespaces/ns", **extra}, "load")


@pytest.fixture
def seconds(monkeypatch):
    said = {"value": 1.93}

    def request_seconds(_prom, model, namespace, output_tokens):
        assert (model, namespace, output_tokens) == ("long", "ns", 64)
        if isinstance(said["value"], Exception):
            raise said["value"]
        return said["value"]

    monkeypatch.setattr(slo, "request_seconds", request_seconds)
    return said


def test_a_load_the_survivors_hold_gives_no_warning_and_its_peak_is_what_is_weighed(seconds):
    assert run.kv_left(spec(), FLEET, GONE, prom=None) == []
    # 4 QPS with bursts of 3x: the peak, 12 QPS, exceeds what two replicas hold (not four).
    (warned,) = run.kv_left(spec(burst_factor=3, burst_seconds=10), FLEET, GONE, prom=None)
    assert warned.startswith("load: at its peak (12 QPS of 3072 + 64 tokens, 1.93 s a request), once the faults "
                             "land: long: KV demand") and "of 2 Ready replicas; expect preemptions" in warned
    assert run.kv_left(spec(burst_factor=3, burst_seconds=10), FLEET, frozenset(), prom=None) == []
    # Three quarters of each prompt shared: held once a replica, the same peak fits two again.
    assert run.kv_left(spec(burst_factor=3, burst_seconds=10, prefix_share=0.75), FLEET, GONE, prom=None) == []


def test_what_cannot_be_checked_is_said_never_passed_silently(seconds):
    seconds["value"] = None
    (idle,) = run.kv_left(spec(), FLEET, GONE, prom=None)
    assert "not checked against the load: it serves nothing now" in idle
    seconds["value"] = NoData("Prometheus at http://x did not answer")
    (down,) = run.kv_left(spec(), FLEET, GONE, prom=None)
    assert "not checked against the load: Prometheus at http://x did not answer" in down
    (elsewhere,) = run.kv_left(spec(model="other"), FLEET, GONE, prom=None)
    assert elsewhere == "load: no replica of other in the cluster: its KV cache is not checked against the load"


@pytest.mark.parametrize(("args", "tokens"), [
    (["--num-gpu-blocks-override", "2048"], 32_768),
    (["--num-gpu-blocks-override=1024", "--block-size", "32"], 32_768),
    (["vllm serve m --num_gpu_blocks_override 100 --block-size 8"], 800),
    (["--model", "m"], None),
    (["--num-gpu-blocks-override", "lots"], None),
])
def test_the_kv_cache_an_engine_s_arguments_fix(args, tokens):
    assert serving.kv_cache_tokens({"spec": {"containers": [{"args": args}]}}) == tokens
