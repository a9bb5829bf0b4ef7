"""The simulator's engine metrics per replica (dcgm-exporter's per card: testbed/simulator/dcgm.py).

Engine metrics go through prometheus_client, as vLLM and SGLang themselves do, with the real
names, types, buckets and labels (`model_name`, `engine`, plus `pod` and `namespace`, which a
Prometheus pod scrape adds). A replica labelled `kilocard.io/engine: sglang` exports SGLang's
names (`sglang:time_to_first_token_seconds`, `sglang:num_queue_reqs`, ...) and buckets; every
other replica vLLM V1's.
Trap (measured, shared/reference/gpu-inference-facts.md addendum): prometheus_client >= 0.23
writes `vllm:` as `vllm_` in OpenMetrics output, which Prometheus 2.x negotiates first. The
simulator serves the plain text format by default, so the documented PromQL
(`vllm:time_to_first_token_seconds_bucket`) finds the series; `negotiate=True` serves whatever
the scraper asks for, reproducing a fleet whose series land as `vllm_...`.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from testbed.simulator import model as m
from testbed.simulator.engine import FAILURE_REASONS
from testbed.simulator.world import World

ENGINE_LABELS = ["model_name", "engine", "namespace", "pod"]


def _buckets(bounds: tuple[float, ...], counts: list[float], total: float) -> list[tuple[str, float]]:
    return [(repr(float(b)), c) for b, c in zip(bounds, counts, strict=True)] + [("+Inf", total)]


def _engine_families(e: m.Engine) -> dict[str, Metric]:
    """One engine's metric families, named as that engine names them (vLLM V1, SGLang)."""
    p = e.prefix
    preemptions = {"preemptions": CounterMetricFamily(f"{p}{e.preemptions}", "Cumulative number of preemption from "
                                                      "the engine.", labels=ENGINE_LABELS)} if e.preemptions else {}
    return {**preemptions,
        "ttft": HistogramMetricFamily(f"{p}time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                                      labels=ENGINE_LABELS),
        "itl": HistogramMetricFamily(f"{p}inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                                     labels=ENGINE_LABELS),
        "e2e": HistogramMetricFamily(f"{p}e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                                     labels=ENGINE_LABELS),
        "running": GaugeMetricFamily(f"{p}{e.running}", "Number of requests in model execution batches.",
                                     labels=ENGINE_LABELS),
        "waiting": GaugeMetricFamily(f"{p}{e.waiting}", "Number of requests waiting to be processed.",
                                     labels=ENGINE_LABELS),
        "kv": GaugeMetricFamily(f"{p}{e.kv_usage}", "KV-cache usage. 1 means 100 percent usage.", labels=ENGINE_LABELS),
        "success": CounterMetricFamily(f"{p}{e.requests}", "Count of successfully processed requests.",
                                       labels=[*ENGINE_LABELS, "finished_reason"]),
        "prompt": CounterMetricFamily(f"{p}prompt_tokens", "Number of prefill tokens processed.", labels=ENGINE_LABELS),
        "generation": CounterMetricFamily(f"{p}generation_tokens", "Number of generation tokens processed.",
                                          labels=ENGINE_LABELS),
    }


class VllmCollector(Collector):
    """Every Ready replica's engine metrics (vLLM's or SGLang's names, per replica; none from a
    replica whose rank 0 is frozen), and the simulated gateway's request counters."""

    def __init__(self, world: World) -> None:
        self.world = world

    def collect(self) -> Iterator[Metric]:
        w = self.world
        families = {name: _engine_families(e) for name, e in m.ENGINES.items()}
        requests = CounterMetricFamily("kilocard_sim_requests", "Requests the simulated gateway received.",
                                       labels=["model_name", "namespace"])
        failed = CounterMetricFamily("kilocard_sim_requests_failed",
                                     "Requests the simulated gateway could not serve, by reason.",
                                     labels=["model_name", "namespace", "reason"])
        with w.lock:
            for key, members in w.replicas().items():
                lead = members[0]
                s = w.series.get(key)
                if s is None or not all(p.ready for p in members) or any(p.node in w.lost for p in members):
                    continue  # an engine exports once it serves (a replacement starts from zero), and not once dead
                if lead.uid in w.stalled:
                    continue  # rank 0's frozen process serves /metrics too: its scrape times out
                f, e = families[s.engine.name], s.engine
                labels = [lead.served_name, "0", lead.namespace, lead.name]
                f["ttft"].add_metric(labels, _buckets(e.ttft_buckets, s.ttft_buckets, s.ttft_count), s.ttft_sum)
                f["itl"].add_metric(labels, _buckets(e.itl_buckets, s.itl_buckets, s.itl_count), s.itl_sum)
                f["e2e"].add_metric(labels, _buckets(e.e2e_buckets, s.e2e_buckets, s.e2e_count), s.e2e_sum)
                f["running"].add_metric(labels, s.running)
                f["waiting"].add_metric(labels, s.waiting)
                f["kv"].add_metric(labels, s.kv_usage)
                f["success"].add_metric([*labels, "stop"], s.success)
                f["prompt"].add_metric(labels, s.prompt_tokens)
                f["generation"].add_metric(labels, s.generation_tokens)
                if "preemptions" in f:
                    f["preemptions"].add_metric(labels, s.preemptions)
            for (namespace, model), total in w.requests.items():
                requests.add_metric([w.served_names.get(model, model), namespace], total)
            # Every reason from the first request, at 0 until it counts: a probe resolves the counter by
            # name and labels, and a counter that appears only at the first failure reads as missing.
            counts = {(ns, model, reason): 0.0 for ns, model in w.requests for reason in FAILURE_REASONS}
            for (namespace, model, reason), count in {**counts, **w.failed}.items():
                failed.add_metric([w.served_names.get(model, model), namespace, reason], count)
        for engine in families.values():
            yield from (f for f in engine.values() if f.samples)
        yield from (requests, failed)
