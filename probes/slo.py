"""SLOs from Prometheus (prometheus-api-client): P95 time to first token now, and "recovered within
a budget and held". No samples or NaN is never healthy; a model with no Ready replica is named.
Bad PromQL or an unreachable Prometheus is an error, never a pass."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from prometheus_api_client import PrometheusConnect

from chaos.errors import KilocardError
from probes import metric_names
from probes.snapshot import ClusterSnapshot
from probes.verdict import Verdict, failed, passed

TTFT_BUCKET = "vllm:time_to_first_token_seconds_bucket"


class SloError(KilocardError):
    pass


def connect(url: str) -> PrometheusConnect:
    return PrometheusConnect(url, disable_ssl=True)


def value(prom: Any, query: str) -> float | None:
    """One number from an instant query; None when there are no samples or the result is NaN."""
    try:
        result = prom.custom_query(query)
    except Exception as exc:  # noqa: BLE001 - the client raises many kinds; all mean "could not ask"
        raise SloError(f"PromQL {query!r} failed: {exc}") from None
    values = [float(r["value"][1]) for r in result]
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return None
    if len(values) > 1:
        raise SloError(f"PromQL {query!r} returned {len(values)} series; aggregate it to one")
    return values[0]


def p95_ttft(prom: Any, model: str, namespace: str | None = None, window: str = "1m") -> str:
    """The P95 TTFT query of one model, with the metric spelling this Prometheus stores."""
    matchers = f'model_name="{model}"' + (f',namespace="{namespace}"' if namespace else "")
    name = metric_names.resolve(prom, TTFT_BUCKET, matchers)
    return f"histogram_quantile(0.95, sum by (le) (rate({name}{{{matchers}}}[{window}])))"


def under(prom: Any, query: str, threshold: float) -> Verdict:
    v = value(prom, query)
    if v is None:
        return failed(f"no samples for {query}: not healthy", value=None, threshold=threshold)
    if v > threshold:
        return failed(f"{v:.3f} above {threshold:g}", value=v, threshold=threshold)
    return passed(f"{v:.3f} under {threshold:g}", value=v, threshold=threshold)


def has_ready_replicas(snapshot: ClusterSnapshot, model: str, namespace: str | None = None) -> Verdict:
    ready = [p for p in snapshot.replicas(model, namespace) if p.ready]
    if not ready:
        return failed(f"model {model} has zero Ready replicas: every request fails", model=model)
    return passed(f"model {model}: {len({p.group for p in ready})} Ready replicas", model=model)


def recovered_within(prom: Any, query: str, threshold: float, hold: float, deadline: float,
                     interval: float = 1.0, clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], None] = time.sleep, origin: float | None = None) -> Verdict:
    """Evaluate `query` every `interval` s: pass once it stays at or under `threshold` for `hold`
    seconds, all within `deadline` seconds; fail otherwise, saying how far it got. Times count
    from now, or from `origin` (epoch seconds, e.g. when the fault was applied) when given."""
    start = clock() - ((time.time() - origin) if origin is not None else 0.0)
    good_since: float | None = None
    timeline: list[tuple[float, float | None]] = []
    while True:
        now = clock() - start
        v = value(prom, query)
        timeline.append((round(now, 1), v))
        healthy = v is not None and v <= threshold
        good_since = (good_since if good_since is not None else now) if healthy else None
        if good_since is not None and now - good_since >= hold:
            return passed(f"recovered after {good_since:.1f} s and held {hold:g} s (budget {deadline:g} s)",
                          recovered_after=good_since, timeline=timeline)
        if now >= deadline:
            state = "never under" if good_since is None else f"under since {good_since:.1f} s, not yet held {hold:g} s"
            return failed(f"not recovered within {deadline:g} s ({state} {threshold:g}; last {v})",
                          recovered_after=None, timeline=timeline)
        sleep(interval)
