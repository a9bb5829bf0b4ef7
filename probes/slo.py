"""SLO verdicts from Prometheus that cannot pass blind.

Indicators (`indicator()` builds the PromQL, with the metric names the model's engine exports):
    ttft_p95      P95 time to first token          vllm:/sglang: time_to_first_token_seconds
    itl_p95       P95 inter-token latency (TPOT)   vllm:inter_token_latency_seconds, the deprecated
                                                    vllm:time_per_output_token_seconds, sglang:'s kin
    error_ratio   failed / all requests at the gateway (per model)
    promql        a user's own query (lower is better), e.g. a ratio of their own metrics
Each is judged per model (one series) or per replica (`by="pod"`: one series per replica, the
worst judged and named). A model-level P95 averages away the one sick TP group the field account
is about: 0.23 -> 0.24 s, while that replica's tripled.

Recovery (`judge`, pure): times count from the fault's apply time. No sample inside the blind
window (the rate window plus a scrape interval after the fault: before that the metric cannot yet
show the fault) counts as healthy. With `expect_impact`, a pass needs a breach first and then a
recovery held for `hold` within `deadline`; a fault that never showed is the outcome "no_impact",
not a pass. No samples, NaN, or a query that failed is never healthy. Every verdict carries the
series it judged, with timestamps.

`recovered_within` (the thin fetcher) reads the series from the fault on (a range query, so a
probe started late still sees the breach), then follows it live until the verdict is decided.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from prometheus_api_client import PrometheusConnect

from chaos import events
from probes import metric_names
from probes.errors import NoData, ProbeError
from probes.snapshot import ClusterSnapshot
from probes.verdict import NO_DATA, Verdict, failed, passed

# The names each indicator may be stored under, in the order they are tried (any spelling).
TTFT_NAMES = ("vllm:time_to_first_token_seconds_bucket", "sglang:time_to_first_token_seconds_bucket")
ITL_NAMES = ("vllm:inter_token_latency_seconds_bucket", "vllm:time_per_output_token_seconds_bucket",
             "sglang:inter_token_latency_seconds_bucket", "sglang:time_per_output_token_seconds_bucket")
GATEWAY_REQUESTS = "kilocard_sim_requests_total"  # the testbed's gateway; a parameter for others
GATEWAY_FAILED = "kilocard_sim_requests_failed_total"
INDICATORS = ("ttft_p95", "itl_p95", "error_ratio", "promql")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
MAX_POINTS = 10_000
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


class SloError(ProbeError):
    pass


TOKEN_ENV = "KILOCARD_PROMETHEUS_TOKEN"


def _auth() -> dict[str, str]:
    """A Prometheus behind an authenticating proxy: the bearer token in $KILOCARD_PROMETHEUS_TOKEN
    (`--prometheus-token-file` puts it there), never in the configuration, so never in a journal."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


def connect(url: str) -> PrometheusConnect:
    return PrometheusConnect(url, disable_ssl=True, headers=_auth() or None)


def seconds(duration: str) -> float:
    """A Prometheus duration ("30s", "1m30s", "500ms") in seconds."""
    parts = _DURATION.findall(duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise SloError(f"not a Prometheus duration: {duration!r} (expected e.g. 30s, 1m, 1m30s)")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


# --- indicators --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Indicator:
    """A query and how to read it: one series per `by` label value (None: one series, `name`)."""

    name: str
    query: str
    window: str
    by: str | None = None
    metric: str | None = None  # the stored series it reads, as resolved (its scrape job sets the interval)

    @property
    def window_seconds(self) -> float:
        return seconds(self.window)


def _matchers(model: str | None, namespace: str | None) -> str:
    found = [f'model_name="{model}"'] if model else []
    return ",".join(found + ([f'namespace="{namespace}"'] if namespace else []))


def indicator(prom: Any, kind: str, model: str | None = None, namespace: str | None = None, window: str = "30s",
              by: str | None = "pod", quantile: float = 0.95, query: str | None = None,
              requests_metric: str = GATEWAY_REQUESTS, failed_metric: str = GATEWAY_FAILED) -> Indicator:
    """The PromQL of an indicator for a model, per replica (`by`, default the pod) or per model
    (`by=None`), with the metric names this Prometheus actually stores."""
    seconds(window)
    matchers = _matchers(model, namespace)
    if kind in ("ttft_p95", "itl_p95"):
        name = metric_names.resolve_any(prom, TTFT_NAMES if kind == "ttft_p95" else ITL_NAMES, matchers)
        group = f"le, {by}" if by else "le"
        promql = f"histogram_quantile({quantile:g}, sum by ({group}) (rate({name}{{{matchers}}}[{window}])))"
        return Indicator(model or kind, promql, window, by, name)
    if kind == "error_ratio":
        # The failures counter may not exist until the first failure: no failures is 0, not "no data".
        total = metric_names.resolve(prom, requests_metric, matchers)
        promql = (f"(sum(rate({failed_metric}{{{matchers}}}[{window}])) or vector(0)) / "
                  f"sum(rate({total}{{{matchers}}}[{window}]))")
        return Indicator(model or kind, promql, window, None, total)  # the gateway knows models, not replicas
    if kind == "promql":
        if not query:
            raise SloError("indicator promql needs a query")
        return Indicator(model or "query", query, window, by)
    raise SloError(f"unknown indicator {kind!r}; expected one of {', '.join(INDICATORS)}")


def p95_ttft(prom: Any, model: str, namespace: str | None = None, window: str = "1m") -> str:
    """The model-level P95 TTFT query (one series)."""
    return indicator(prom, "ttft_p95", model, namespace, window, by=None).query


def _one_unless_by(result: list[dict[str, Any]], ind: Indicator) -> list[dict[str, Any]]:
    """A query judged as one series must return one: several would be silently cut to the last."""
    if ind.by is None and len(result) > 1:
        raise SloError(f"PromQL {ind.query!r} returned {len(result)} series where one was expected; aggregate it "
                       "to one (or judge per replica)")
    return result


def _rows(result: list[dict[str, Any]], ind: Indicator) -> dict[str, float]:
    values: dict[str, float] = {}
    for row in result:
        v = float(row["value"][1])
        if not math.isnan(v):
            values[_series_name(row["metric"], ind)] = v
    return values


def _series_name(metric: dict[str, str], ind: Indicator) -> str:
    if ind.by:
        return metric.get(ind.by, json.dumps(metric, sort_keys=True))
    return ind.name


def values(prom: Any, ind: Indicator) -> dict[str, float]:
    """Series name -> value now; NaN dropped. A failed query is an error, never an empty answer."""
    try:
        result = prom.custom_query(ind.query)
    except Exception as exc:  # noqa: BLE001 - the client raises many kinds; query_failed sorts them
        raise metric_names.query_failed(f"PromQL {ind.query!r}", exc, SloError) from None
    return _rows(_one_unless_by(result, ind), ind)


def value(prom: Any, query: str) -> float | None:
    """One number from an instant query; None when there are no samples or the result is NaN."""
    return next(iter(values(prom, Indicator("value", query, "1m")).values()), None)


def under(prom: Any, query: str | Indicator, threshold: float) -> Verdict:
    """Now: every series at or under the threshold; the worst named. No samples is not healthy."""
    ind = query if isinstance(query, Indicator) else Indicator("value", query, "1m")
    found = values(prom, ind)
    if not found:
        return failed(f"no samples for {ind.query}: not healthy", value=None, threshold=threshold)
    worst, v = max(found.items(), key=lambda kv: kv[1])
    named = f"{worst}: " if ind.by else ""
    if v > threshold:
        return failed(f"{named}{v:.3f} above {threshold:g}", value=v, worst=worst, threshold=threshold,
                      values=found)
    return passed(f"{named}{v:.3f} under {threshold:g}", value=v, worst=worst, threshold=threshold, values=found)


def has_ready_replicas(snapshot: ClusterSnapshot, model: str, namespace: str | None = None) -> Verdict:
    ready_ = [p for p in snapshot.replicas(model, namespace) if p.ready]
    if not ready_:
        return failed(f"model {model} has zero Ready replicas: every request fails", model=model)
    return passed(f"model {model}: {len({p.group for p in ready_})} Ready replicas", model=model)


# --- recovery: the pure judge ----------------------------------------------------------------------
@dataclass(frozen=True)
class Sample:
    at: float  # epoch seconds the values are for
    values: dict[str, float] = field(default_factory=dict)  # series -> value; empty: no series
    error: str = ""  # the query failed at this moment (Prometheus down): nothing is known

    def worst(self) -> tuple[str, float] | None:
        return max(self.values.items(), key=lambda kv: kv[1]) if self.values else None

    def healthy(self, threshold: float) -> bool:
        worst = self.worst()
        return worst is not None and worst[1] <= threshold

    def breached(self, threshold: float) -> bool:
        """Seen hurting: a series over the threshold, or no series at all (every replica gone, or
        none finished a request). A failed query is not a breach: it is not knowing."""
        return not self.error and not self.healthy(threshold)


@dataclass(frozen=True)
class Recovery:
    threshold: float
    deadline: float  # seconds after the fault by which the indicator must be back and held
    hold: float  # seconds it must stay healthy to count as recovered
    blind: float  # seconds after the fault before a healthy sample may count (rate window + scrape)
    expect_impact: bool = True  # the fault should hurt: a pass needs a breach, then a recovery
    scrape: float = 0.0  # a breach seen sooner than one scrape after the fault was there before it
    absent_for: float | None = None  # no series for this long is a breach (default: `blind`)

    def __post_init__(self) -> None:
        if self.deadline <= 0 or self.hold < 0 or self.blind < 0:
            raise SloError(f"deadline must be positive and hold, blind not negative (got {self})")
        if self.blind + self.hold > self.deadline:
            raise SloError(f"deadline {self.deadline:g} s is shorter than the blind window ({self.blind:g} s: rate "
                           f"window + scrape interval) plus hold ({self.hold:g} s): no verdict could ever pass")


def _breach(seen: list[Sample], fault_at: float, r: Recovery) -> Sample | None:
    """The first sample that shows the fault: a series over the threshold, or no series at all for
    `absent_for` seconds (every replica gone). One missing scrape is not impact; a failed query
    is not knowing, never impact."""
    absent_for = r.blind if r.absent_for is None else r.absent_for
    absent_since: Sample | None = None
    for s in seen:
        if s.error:
            absent_since = None
        elif not s.values:
            absent_since = absent_since or s
            if s.at - absent_since.at >= absent_for:
                return absent_since
        else:
            absent_since = None
            if not s.healthy(r.threshold) and s.at >= fault_at + r.scrape:
                return s
    return None


def judge(samples: list[Sample], fault_at: float, r: Recovery, final: bool) -> Verdict | None:
    """The verdict over the samples so far; None while undecided (`final`: the deadline is here).
    Only samples from the fault to its deadline count."""
    due = fault_at + r.deadline
    seen = sorted((s for s in samples if fault_at <= s.at <= due), key=lambda s: s.at)
    breach = _breach(seen, fault_at, r)
    good_since: float | None = None  # start of the current healthy streak that may count
    last_bad: Sample | None = None
    for i, s in enumerate(seen):
        if not s.healthy(r.threshold):
            good_since, last_bad = None, s
        elif good_since is None and s.at >= fault_at + r.blind and (
                not r.expect_impact or (breach is not None and s.at > breach.at)):
            good_since = s.at
        if good_since is not None and s.at - good_since >= r.hold:
            seen = seen[:i + 1]  # decided here, as a probe following it live would have been
            break
    now = seen[-1].at if seen else fault_at
    peak = _peak(seen)
    details: dict[str, Any] = {
        "fault_at": fault_at, "threshold": r.threshold, "hold": r.hold, "deadline": r.deadline,
        "blind_until": r.blind, "expect_impact": r.expect_impact,
        "breach_after": None if breach is None else round(breach.at - fault_at, 3),
        "recovered_after": None, "worst": peak[0] if peak else None, "peak": peak[1] if peak else None,
        "series": [{"at": s.at, "values": dict(s.values), **({"error": s.error} if s.error else {})} for s in seen],
    }
    worst = f"; worst {peak[0]}, peak {peak[1]:.3f}" if peak and peak[1] > r.threshold else ""
    already = next((s for s in seen if s.at < fault_at + r.scrape and not s.healthy(r.threshold) and s.values), None)
    if r.expect_impact and already is not None:
        name, value = already.worst() or ("?", math.nan)
        return failed(f"already over {r.threshold:g} when the fault was applied ({name} at {value:.3f}): its impact "
                      "cannot be told apart; is the steady state met?", outcome="unknown", **details)
    if good_since is not None and now - good_since >= r.hold:
        details["recovered_after"] = round(good_since - fault_at, 3)
        if breach is None:
            return passed(f"held under {r.threshold:g} for {r.hold:g} s from {r.blind:g} s after the fault "
                          f"(budget {r.deadline:g} s)", outcome="held", **details)
        return passed(f"breached {details['breach_after']:.1f} s after the fault, back under {r.threshold:g} after "
                      f"{details['recovered_after']:.1f} s and held {r.hold:g} s (budget {r.deadline:g} s){worst}",
                      outcome="recovered", **details)
    hopeless = (good_since if good_since is not None else now) + r.hold > due
    if not final and not (hopeless and (breach is not None or not r.expect_impact)):
        return None
    if not any(s.values for s in seen) and (breach is None or all(s.error for s in seen)):
        return failed(f"no data within {r.deadline:g} s of the fault: {NO_DATA}",
                      outcome="unknown", **details)
    if r.expect_impact and breach is None:
        peak_text = f" (worst {peak[0]}, peak {peak[1]:.3f})" if peak else ""
        return failed(f"no impact observed: under {r.threshold:g} for {r.deadline:g} s after the fault{peak_text}; "
                      "did the fault land?", outcome="no_impact", **details)
    state = (f"never back under {r.threshold:g}" if good_since is None
             else f"under {r.threshold:g} since {good_since - fault_at:.1f} s, not held {r.hold:g} s in time")
    bad = last_bad.worst() if last_bad is not None else None
    if bad:
        last = f"; {bad[0]} last at {bad[1]:.3f}"
    elif last_bad is not None:
        last = f"; last: {'query failed' if last_bad.error else 'no series'}"
    else:
        last = ""
    return failed(f"not recovered within {r.deadline:g} s ({state}){last}{worst}", outcome="not_recovered",
                  **details)


def _peak(seen: list[Sample]) -> tuple[str, float] | None:
    worsts = [w for s in seen if (w := s.worst()) is not None]
    return max(worsts, key=lambda kv: kv[1]) if worsts else None


# --- recovery: the thin fetcher ------------------------------------------------------------------
def scrape_interval(url: str, job: str | None = None, timeout: float = 5.0) -> float:
    """Seconds between scrapes of `job` (else the global interval), from Prometheus's own config."""
    try:
        request = urllib.request.Request(f"{url.rstrip('/')}/api/v1/status/config", headers=_auth())
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            config = yaml.safe_load(json.loads(reply.read())["data"]["yaml"])
    except Exception as exc:  # noqa: BLE001 - any failure means "cannot tell": say so
        raise metric_names.query_failed(f"reading the scrape interval from {url} (else give scrape_interval)", exc,
                                        SloError) from None
    interval = (config.get("global") or {}).get("scrape_interval", "1m")
    for scrape in config.get("scrape_configs") or []:
        if job and scrape.get("job_name") == job:
            interval = scrape.get("scrape_interval", interval)
    return seconds(str(interval))


def history(prom: Any, ind: Indicator, start: float, end: float, step: float) -> list[Sample]:
    """The indicator from `start` to `end` (a range query), one sample per step: a step where no
    series had a value is a sample with no data, not a gap."""
    first, last = round(start), round(end)  # the client sends whole seconds; Prometheus steps from there
    if last - first < step:
        return []
    step = max(step, (last - first) / MAX_POINTS)  # Prometheus answers at most 11,000 points a series
    try:
        result = prom.custom_query_range(ind.query, start_time=dt.datetime.fromtimestamp(first, dt.UTC),
                                         end_time=dt.datetime.fromtimestamp(last, dt.UTC), step=f"{step:g}")
    except Exception as exc:  # noqa: BLE001
        raise metric_names.query_failed(f"PromQL range {ind.query!r}", exc, SloError) from None
    by_time: dict[float, dict[str, float]] = {}
    for row in _one_unless_by(result, ind):
        name = _series_name(row["metric"], ind)
        for at, text in row["values"]:
            if not math.isnan(float(text)):
                by_time.setdefault(round(float(at), 3), {})[name] = float(text)
    grid = [round(first + i * step, 3) for i in range(int((last - first) // step) + 1)]
    return [Sample(at, by_time.get(at, {})) for at in grid]


def recovered_within(prom: Any, ind: Indicator, fault_at: float, r: Recovery, interval: float = 1.0,
                     clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> Verdict:
    """Judge the indicator from the fault on: its history first, then live every `interval` s,
    until the verdict is decided (at the latest at the deadline)."""
    values(prom, ind)  # bad PromQL or an unreachable Prometheus is an error now, not a red verdict later
    due = fault_at + r.deadline
    samples = history(prom, ind, fault_at, min(clock(), due), interval)
    while True:
        now = clock()
        if now <= due:  # a probe started late judges what the deadline saw, from the history
            try:
                samples.append(Sample(now, values(prom, ind)))
            except (SloError, NoData) as exc:
                samples.append(Sample(now, {}, str(exc)))  # no data is never healthy
            events.publish({"topic": "slo", "indicator": ind.name, "query": ind.query, "worst": samples[-1].worst(),
                     "error": samples[-1].error, "threshold": r.threshold, "left": due - now, "at": now,
                     "phase": "blind" if now < fault_at + r.blind else "holding" if samples[-1].healthy(r.threshold)
                     else "breached" if samples[-1].breached(r.threshold) else "unknown"})
        verdict = judge(samples, fault_at, r, final=now >= due)
        if verdict is not None:
            return verdict
        sleep(max(0.0, min(interval, due - now)))
