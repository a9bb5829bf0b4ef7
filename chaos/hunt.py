"""`kilocard hunt`: the fleet's weakest points. Every single failure domain of the cluster (each
card, TP group, node, rack, switch, zone) is lost in turn on one snapshot and its impact
predicted (probes.impact); the domains are ranked worst first.

What a model's SLO is judged by comes from Prometheus, over a trailing window:
    load          the model's finished requests per second (vLLM's request_success_total,
                  SGLang's num_requests_total), times the peak factor planned for
    service rate  per replica, its own finished rate plus one over its own mean TTFT (an M/M/1
                  queue's mean sojourn is 1 / (mu - lambda)); the model's is the median of its
                  replicas' (a sick one does not set the fleet's)
    KV demand     mean prompt and output tokens (the engines' token counters over finished
                  requests) and the request time now (probes.slo.request_seconds)
A model without those figures (no Prometheus, no traffic) still has its replicas, room and
placement predicted; its SLO is unknown, never kept.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from probes import capacity, domains, impact, metric_names, slo
from probes.errors import ProbeError
from probes.hung import FINISHED_NAMES
from probes.snapshot import ClusterSnapshot

PROMPT_NAMES = ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total")
OUTPUT_NAMES = ("vllm:generation_tokens_total", "sglang:generation_tokens_total")


@dataclass(frozen=True)
class Figures:
    """How the loads were read, for the output to state."""

    window: str
    peak: float
    slo_seconds: float


def loads(prom: Any, snapshot: ClusterSnapshot, figures: Figures,
          namespace: str | None = None) -> tuple[dict[tuple[str, str], impact.Load], dict[str, str]]:
    """(namespace, model) -> its Load, and why a model has none ("namespace/model" -> reason)."""
    found: dict[tuple[str, str], impact.Load] = {}
    missing: dict[str, str] = {}
    for space, model in sorted(impact.replicas_serving(snapshot, namespace)):
        try:
            found[(space, model)] = load_of(prom, model, space, figures)
        except ProbeError as exc:
            missing[f"{space}/{model}"] = str(exc)
    return found, missing


def load_of(prom: Any, model: str, namespace: str, figures: Figures) -> impact.Load:
    w = figures.window
    counter = metric_names.locate(prom, FINISHED_NAMES, model, namespace)
    pod = counter.pod_label(f"{model}'s finished requests per replica")
    qps = slo.value(prom, f"sum(rate({counter.name}{{{counter.matchers}}}[{w}]))")
    if not qps:
        raise ProbeError(f"{model} finished no request in the last {w}: no load to judge its SLO by")
    rates = slo.values(prom, slo.Indicator("rate", f"sum by ({pod}) (rate({counter.name}{{{counter.matchers}}}[{w}]))",
                                           w, pod))
    ttft = metric_names.locate(prom, slo.TTFT_NAMES, model, namespace)
    base = ttft.name.removesuffix("_bucket")
    means = slo.values(prom, slo.Indicator("mean", f"sum by ({pod}) (rate({base}_sum{{{ttft.matchers}}}[{w}])) / "
                                                   f"sum by ({pod}) (rate({base}_count{{{ttft.matchers}}}[{w}]))",
                                           w, pod))
    mus = [rates[r] + 1 / means[r] for r in rates if rates[r] > 0 and means.get(r, 0) > 0]
    if not mus:
        raise ProbeError(f"{model}: no replica has both a request rate and a mean TTFT over {w}")
    return impact.Load(qps * figures.peak, statistics.median(mus), figures.slo_seconds,
                       _demand(prom, counter, model, namespace, qps * figures.peak, w))


def _demand(prom: Any, finished: metric_names.Stored, model: str, namespace: str, qps: float,
            window: str) -> capacity.Demand | None:
    """The KV demand at `qps`, from the tokens its requests carry now; None where not exported."""
    per_request = []
    for names in (PROMPT_NAMES, OUTPUT_NAMES):
        try:
            stored = metric_names.locate(prom, names, model, namespace)
        except metric_names.MetricNotFound:
            return None
        per_request.append(slo.value(prom, f"sum(rate({stored.name}{{{stored.matchers}}}[{window}])) / "
                                           f"sum(rate({finished.name}{{{finished.matchers}}}[{window}]))"))
    prompt, output = per_request
    if not prompt or output is None:
        return None
    seconds = slo.request_seconds(prom, model, namespace, round(output), window)
    return None if seconds is None else capacity.Demand(qps, round(prompt), round(output), seconds)


def hunt(snapshot: ClusterSnapshot, found: dict[tuple[str, str], impact.Load], missing: dict[str, str],
         figures: Figures, labels: dict[str, str] | None = None, kinds: tuple[str, ...] = domains.KINDS,
         namespace: str | None = None) -> dict[str, Any]:
    """The ranked impact of every domain on the models (of `namespace`, else all), as plain data;
    `found` are their loads (`loads`), `missing` why a model has none."""
    started = time.monotonic()
    every = domains.of(snapshot, labels, kinds)
    ranked = impact.rank(snapshot, every, found, namespace)
    serving = impact.replicas_serving(snapshot, namespace)
    return {
        "inputs": {"namespace": namespace, "window": figures.window, "peak": figures.peak,
                   "slo_ttft_seconds": figures.slo_seconds,
                   "nodes": len(snapshot.nodes), "cards": sum(n.cards_capacity for n in snapshot.nodes),
                   "loads": {f"{ns}/{m}": {"qps": round(v.qps, 3), "service_rate": round(v.service_rate, 3),
                                           "p95_now": round(v.p95(len(serving.get((ns, m), {}))), 4),
                                           "kv_demand": None if v.demand is None else vars(v.demand)}
                             for (ns, m), v in sorted(found.items())},
                   "no_load": missing},
        "domains": {kind: sum(1 for d in every if d.kind == kind) for kind in kinds},
        "seconds": round(time.monotonic() - started, 3),
        "ranked": [i.describe() for i in ranked],
    }


def text(found: dict[str, Any], top: int) -> list[str]:
    """The ranking for a terminal: the inputs, then the `top` worst domains, one line each and a
    line per model they hurt."""
    inputs = found["inputs"]
    lines = [f"{inputs['nodes']} nodes, {inputs['cards']} cards; "
             + ", ".join(f"{n} {kind} domains" for kind, n in found["domains"].items() if n)
             + f"; predicted in {found['seconds']:.2f} s",
             f"SLO: P95 TTFT <= {inputs['slo_ttft_seconds']:g} s at {inputs['peak']:g}x the load of the last "
             f"{inputs['window']}"]
    for name, load in inputs["loads"].items():
        lines.append(f"  {name}: {load['qps']:.1f} QPS, {load['service_rate']:.1f} QPS per replica, "
                     f"P95 TTFT {load['p95_now']:.3f} s now")
    for name, why in inputs["no_load"].items():
        lines.append(f"  {name}: SLO not predicted: {why}")
    shown = [d for d in found["ranked"] if d["severity"] != "none"][:top]
    lines.append(f"the {len(shown)} weakest of {len(found['ranked'])} domains:")
    for i, d in enumerate(shown, 1):
        lines.append(f"{i:>3}. {d['domain']}  [{d['severity']}]  {d['cards']} cards")
        for m in d["models"]:
            after = m["p95_after"]
            p95 = f", P95 {after if isinstance(after, str) else f'{after:.3f} s'}" if after is not None else ""
            lines.append(f"       {m['namespace']}/{m['model']}: {m['lost']} of {m['replicas']} replicas lost, "
                         f"{m['nowhere']} for good{p95}, SLO {m['slo']}, KV {m['kv']}"
                         + (f": {'; '.join(m['reasons'])}" if m["reasons"] else ""))
        if "confirmed" in d:
            lines.append(f"       on the twin: {d['confirmed']['summary']} (exit {d['confirmed']['exit']}; "
                         f"journal {d['confirmed']['journal']})")
    return lines
