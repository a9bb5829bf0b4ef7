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
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests
import yaml
from prometheus_api_client import PrometheusConnect

from chaos import events
from chaos.vocabulary import LAST_DISRUPTION, loopback
from probes import metric_names
from probes.errors import NoData, ProbeError
from probes.snapshot import ClusterSnapshot
from probes.verdict import RECOVERED_AFTER_SECONDS, Contract, Verdict, budgeted, failed, passed, unknown

# The names each indicator may be stored under, in the order they are tried (any spelling).
TTFT_NAMES = ("vllm:time_to_first_token_seconds_bucket", "sglang:time_to_first_token_seconds_bucket")
ITL_NAMES = ("vllm:inter_token_latency_seconds_bucket", "vllm:time_per_output_token_seconds_bucket",
             "sglang:inter_token_latency_seconds_bucket", "sglang:time_per_output_token_seconds_bucket")
GATEWAY_REQUESTS = "kilocard_sim_requests_total"  # the testbed's gateway; a parameter for others
GATEWAY_FAILED = "kilocard_sim_requests_failed_total"
INDICATORS = ("ttft_p95", "itl_p95", "error_ratio", "promql")
REPLICA = "pod"  # `by` for one series per replica, whichever label this Prometheus names the pod with
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


CA_ENV = "KILOCARD_PROMETHEUS_CA"  # a CA bundle (a file) for a Prometheus whose certificate a private CA signed
INSECURE_ENV = "KILOCARD_PROMETHEUS_INSECURE"  # "1": no TLS verification, and a token may go in cleartext
BASIC_ENV = "KILOCARD_PROMETHEUS_BASIC_AUTH"  # "user:password" (Prometheus's own web config, a proxy's)
CERT_ENV, KEY_ENV = "KILOCARD_PROMETHEUS_CERT", "KILOCARD_PROMETHEUS_KEY"  # a client certificate (mutual TLS)
# "Name: value" lines sent with every call: a multi-tenant backend's tenant (Grafana Mimir's and
# Cortex's X-Scope-OrgID, Thanos's THANOS-TENANT), or what a gateway in front asks for.
HEADERS_ENV = "KILOCARD_PROMETHEUS_HEADERS"


def headers_of(text: str, where: str) -> dict[str, str]:
    """`Name: value` lines as headers; a line that is not one is refused, naming `where`."""
    found = {}
    for line in filter(None, (raw.strip() for raw in text.splitlines())):
        name, colon, value = line.partition(":")
        if not colon or not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name.strip()) or not value.strip():
            raise SloError(f"{where}: expected a header as 'Name: value' (X-Scope-OrgID: team-a), got {line!r}")
        found[name.strip()] = value.strip()
    return found


def session(url: str) -> requests.Session:
    """One HTTP session for every call to Prometheus: TLS verified (against $KILOCARD_PROMETHEUS_CA
    if set, else the system's CAs) unless $KILOCARD_PROMETHEUS_INSECURE=1; a client certificate
    when one is given; a bearer token or basic auth (one Authorization, never both), never sent in
    cleartext beyond this machine unless that same switch allows it; and the headers asked for (a
    tenant)."""
    insecure = os.environ.get(INSECURE_ENV, "") == "1"
    ca = os.environ.get(CA_ENV, "").strip()
    headers = _auth()
    basic = os.environ.get(BASIC_ENV, "").strip()
    if headers and basic:
        raise SloError("a Prometheus bearer token and basic auth both given: it takes one Authorization; give one")
    user, colon, password = basic.partition(":")
    if basic and not (colon and user):
        raise SloError("Prometheus basic auth: expected 'user:password'")
    where = urllib.parse.urlsplit(url)
    if (headers or basic) and where.scheme != "https" and not loopback(where.hostname or "") and not insecure:
        raise SloError(f"refusing to send the Prometheus credentials in cleartext to {url}: use https://, or allow "
                       "it with --prometheus-insecure")
    cert, key = os.environ.get(CERT_ENV, "").strip(), os.environ.get(KEY_ENV, "").strip()
    if bool(cert) != bool(key):
        raise SloError("a Prometheus client certificate needs both its certificate and its key")
    found = requests.Session()
    found.verify = False if insecure else (ca or True)
    if cert:
        found.cert = (cert, key)
    if basic:
        found.auth = (user, password)
    found.headers.update(headers_of(os.environ.get(HEADERS_ENV, ""), f"${HEADERS_ENV}"))
    found.headers.update(headers)
    return found


class Prometheus(PrometheusConnect):  # type: ignore[misc]  # the client is untyped
    """A connection, and the pod and namespace labels the user named for its series (else probed)."""

    def __init__(self, url: str, labels: metric_names.Labels) -> None:
        super().__init__(url, session=session(url))  # the token rides on the session's headers
        self.labels = labels


def connect(url: str, labels: metric_names.Labels | None = None) -> Prometheus:
    return Prometheus(url, labels or metric_names.Labels())


def seconds(duration: str) -> float:
    """A Prometheus duration ("30s", "1m30s", "500ms") in seconds."""
    parts = _DURATION.findall(duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise SloError(f"not a Prometheus duration: {duration!r} (expected e.g. 30s, 1m, 1m30s)")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


CONTRACTS = (
    Contract(
        "slo_under", "probe",
        asserts="the indicator is at or under the threshold now: per replica, the worst replica's series (named), "
                "and every group's lead Ready for longer than the window plus a scrape exports one; per model, "
                "the one series",
        time_zero="none: the state now",
        interval="one instant query; its rate window (`window`) is what the value averages over",
        missing="no series at all is unknown; a lead Ready past the window with no series (it completes "
                "nothing: its quantile is NaN) is unknown, never the worst of the rest; the failures counter of "
                "error_ratio must exist in Prometheus with the labels the ratio matches on (else error)",
        exceptions="Prometheus not answering: unknown; bad PromQL, a 4xx, a refused TLS handshake, a metric no "
                   "engine exports: error",
        outcomes=(("ok", "under, every expected replica seen"), ("failed", "a series over the threshold, named"),
                  ("unknown", "no samples, or a replica Ready and silent")),
        judge=("probes.slo.under",)),
    Contract(
        "slo_recovered_within", "probe",
        asserts="over the whole interval, the indicator ends healthy: healthy from some moment R to the deadline, "
                "R no earlier than the blind window's end and at least `hold` before the deadline; with "
                "`expect_impact`, a breach (a sample seen hurting, one scrape or more after time zero: one "
                "sooner may predate the fault) comes before R; without it, either no breach at all (held) or a "
                "breach then R (recovered)",
        time_zero=f"`fault_at` if given, else {LAST_DISRUPTION}",
        interval="every sample from time zero to time zero + `deadline`, whole (a range query a scrape after the "
                 "deadline, plus the live samples), never only the first `hold`; samples before time zero only "
                 "say which series existed; a replica wholly Ready at time zero counts as seen from the start, its "
                 "first series or not (one that had served no rate window when the fault came): its lead, from "
                 "the run's follower's record of the cluster at time zero, else from the groups Ready since "
                 "before it now (a replica recreated since is then not known)",
        missing="a sample is healthy when every series present is at or under the threshold and no replica "
                "seen before, Ready at time zero, or settled since (all its pods Ready for a rate window and a "
                "scrape at that sample: a replacement under a new name; known from the run's follower's record) is "
                "missing while its pod lives; over the threshold is a "
                "breach; a replica missing while its pod is not Ready is a breach (the pod corroborates it); "
                "missing while Ready or of "
                "unknown readiness, or no series at all, is a breach only when corroborated (nothing Ready, the "
                "gateway failing requests) and otherwise unknown; a replica whose pod is terminating or gone "
                "drops out; a failed query is unknown. An unknown sample after the breach counts from and before "
                "R makes a hold unknown",
        exceptions="Prometheus not answering at the start or at the deadline: unknown; bad PromQL, a 4xx, settings "
                   "that could never pass (deadline < blind + hold): error",
        outcomes=(("held", "ok: no breach, healthy from the blind window's end to the deadline"),
                  ("recovered", "ok: a breach, then healthy to the deadline for at least hold"),
                  ("not_recovered", "failed: a breach, and not healthy for hold by the deadline (decided early "
                                    "once a breach leaves less than hold)"),
                  ("no_impact", "failed: expect_impact and every sample healthy"),
                  ("unknown", "no data, a breach already there at time zero (over the threshold in the "
                              "scrape up to it, and no healthy sample between that and the first breach "
                              "counted, or the deadline if none), or samples not seen where the verdict "
                              "needs them")),
        judge=("probes.slo.classify", "probes.slo.judge", "probes.slo._Judged", "probes.slo._final_streak",
               "chaos.timezero.choose")),
)


# --- indicators --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Indicator:
    """A query and how to read it: one series per `by` label value (None: one series, `name`)."""

    name: str
    query: str
    window: str = ""  # the rate window its query uses ("": a query given whole)
    by: str | None = None
    metric: str | None = None  # the stored series it reads, as resolved (its scrape job sets the interval)

    @property
    def window_seconds(self) -> float:
        return seconds(self.window)


def indicator(prom: Any, kind: str, model: str | None = None, namespace: str | None = None, window: str = "30s",
              by: str | None = REPLICA, quantile: float = 0.95, query: str | None = None,
              requests_metric: str = GATEWAY_REQUESTS, failed_metric: str = GATEWAY_FAILED) -> Indicator:
    """The PromQL of an indicator for a model, per replica (`by` REPLICA: one series per pod, by
    the label this Prometheus names pods with), per model (`by=None`) or by a label given as is,
    with the metric names and label spellings this Prometheus actually stores."""
    seconds(window)
    if kind in ("ttft_p95", "itl_p95"):
        stored = metric_names.locate(prom, TTFT_NAMES if kind == "ttft_p95" else ITL_NAMES, model, namespace)
        label = stored.pod_label(f"{kind} per replica") if by == REPLICA else by
        group = f"le, {label}" if label else "le"
        promql = (f"histogram_quantile({quantile:g}, sum by ({group}) "
                  f"(rate({stored.name}{{{stored.matchers}}}[{window}])))")
        return Indicator(model or kind, promql, window, label, stored.name)
    if kind == "error_ratio":
        total = metric_names.locate(prom, (requests_metric,), model, namespace)
        failures = _failures_counter(prom, failed_metric, total.matchers)
        # Known by name and labels, the counter may still have no series for this model: no failure yet is 0.
        promql = (f"(sum(rate({failures}{{{total.matchers}}}[{window}])) or vector(0)) / "
                  f"sum(rate({total.name}{{{total.matchers}}}[{window}]))")
        return Indicator(model or kind, promql, window, None, total.name)  # the gateway knows models, not replicas
    if kind == "promql":
        if not query:
            raise SloError("indicator promql needs a query")
        return Indicator(model or "query", query, window, by)
    raise SloError(f"unknown indicator {kind!r}; expected one of {', '.join(INDICATORS)}")


def _failures_counter(prom: Any, name: str, matchers: str) -> str:
    """The failures counter as Prometheus stores it, which must exist and carry the labels the
    ratio matches on: a misspelled or differently labelled counter would read 0 % errors forever."""
    try:
        stored = metric_names.resolve(prom, name)
    except metric_names.MetricNotFound:
        raise SloError(f"the failures counter {name} is not in Prometheus: misspelled, or the gateway exports it "
                       "only after a first failure (export it at 0 from the start)") from None
    labels = [m.split("=", 1)[0] for m in matchers.split(",") if m]
    try:
        metric_names.resolve(prom, stored, ",".join(f'{label}!=""' for label in labels))
    except metric_names.MetricNotFound:
        raise SloError(f"the failures counter {stored} has no series with the labels {', '.join(labels)} the "
                       "ratio matches on: its failures would never be counted") from None
    return stored


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


def request_seconds(prom: Any, model: str, namespace: str | None, output_tokens: int,
                    window: str = "5m") -> float | None:
    """How long a request of `output_tokens` tokens takes on the model now: its engines' mean TTFT
    plus that many of their mean inter-token latency (each histogram's sum over its count over
    `window`); None while it serves nothing."""
    means = []
    for names in (TTFT_NAMES, ITL_NAMES):
        stored = metric_names.locate(prom, names, model, namespace)
        base = stored.name.removesuffix("_bucket")
        means.append(value(prom, f"sum(rate({base}_sum{{{stored.matchers}}}[{window}])) / "
                                 f"sum(rate({base}_count{{{stored.matchers}}}[{window}]))"))
    ttft, itl = means
    return None if ttft is None or itl is None else ttft + output_tokens * itl


def value(prom: Any, query: str) -> float | None:
    """One number from an instant query; None when there are no samples or the result is NaN."""
    return next(iter(values(prom, Indicator("value", query)).values()), None)


def under(prom: Any, query: str | Indicator, threshold: float, expected: set[str] | None = None) -> Verdict:
    """Now: every series at or under the threshold; the worst named. No samples is not healthy,
    and neither is a replica `expected` to export a series (a lead Ready for longer than the
    rate window) that exports none: a replica that completes nothing has a NaN quantile, and the
    worst of the rest would speak for it."""
    ind = query if isinstance(query, Indicator) else Indicator("value", query)
    found = values(prom, ind)
    silent = sorted((expected or set()) - set(found))
    if not found:
        return unknown(f"no samples for {ind.query}", value=None, threshold=threshold, silent=silent)
    worst, v = max(found.items(), key=lambda kv: kv[1])
    named = f"{worst}: " if ind.by else ""
    figures = {"value": v, "worst": worst, "threshold": threshold, "values": found}
    if v > threshold:
        return failed(f"{named}{v:.3f} above {threshold:g}", **figures)
    if silent:
        return unknown(f"{', '.join(silent)} Ready but exporting no series (completing no request?); the rest "
                       f"{v:.3f} at worst", **figures, silent=silent)
    return passed(f"{named}{v:.3f} under {threshold:g}", **figures)


def has_ready_replicas(snapshot: ClusterSnapshot, model: str, namespace: str | None = None) -> Verdict:
    ready_ = [p for p in snapshot.replicas(model, namespace) if p.ready]
    if not ready_:
        return failed(f"model {model} has zero Ready replicas: every request fails", model=model)
    return passed(f"model {model}: {len({p.group for p in ready_})} Ready replicas", model=model)


# --- recovery: the pure judge ----------------------------------------------------------------------
HEALTHY, BREACH, UNKNOWN_STATE = "healthy", "breach", "unknown"
_PHASES = {HEALTHY: "holding", BREACH: "breached", UNKNOWN_STATE: "unknown"}  # as the live view says them


@dataclass(frozen=True)
class Sample:
    at: float  # epoch seconds the values are for
    values: dict[str, float] = field(default_factory=dict)  # series -> value; NaN dropped; empty: no series
    error: str = ""  # the query failed at this moment (Prometheus down): nothing is known
    # The model's live pods at `at` (name -> Ready; terminating and deleted ones absent); None: not known.
    pods: dict[str, bool] | None = None
    impact: str = ""  # what says an absence here is the fault's impact (the gateway failing requests, ...)
    # Replicas that must show a series by now, seen before or not: all its pods Ready for a rate
    # window and a scrape (a replacement under a new name that serves nothing is not health).
    expected: frozenset[str] = frozenset()

    def worst(self) -> tuple[str, float] | None:
        return max(self.values.items(), key=lambda kv: kv[1]) if self.values else None


@dataclass(frozen=True)
class Seen:
    """A sample as judged: its state, and why."""

    sample: Sample
    state: str  # healthy | breach | unknown
    why: str
    over: bool = False  # a value over the threshold (not an absence)

    @property
    def at(self) -> float:
        return self.sample.at


def classify(samples: list[Sample], threshold: float, replicas: bool,
             expected: frozenset[str] = frozenset()) -> list[Seen]:
    """Each sample's state, in time order. A series once seen (`replicas`: one per replica), or
    expected (`expected` from the start, a sample's own from it on) whether seen or not, and
    missing now: its pod terminating or gone drops it (the replica was removed); its pod not
    Ready is an absence the pod corroborates (breach); its pod Ready, or not known, is a silence
    that only `impact` makes a breach (else unknown). No series at all is a breach when nothing
    is Ready or `impact` says why, else unknown. A failed query is unknown."""
    known: set[str] = set(expected) if replicas else set()
    out = []
    for s in sorted(samples, key=lambda s: s.at):
        if s.error:
            out.append(Seen(s, UNKNOWN_STATE, f"query failed: {s.error}"))
            continue
        known |= (set(s.values) | s.expected) if replicas else set()
        worst = s.worst()
        missing = sorted(known - set(s.values))
        pods = s.pods
        down = [m for m in missing if pods is not None and pods.get(m) is False]
        silent = [m for m in missing if pods is None or pods.get(m) is True]
        nothing_ready = pods is not None and not any(pods.values())
        if worst is not None and worst[1] > threshold:
            out.append(Seen(s, BREACH, f"{worst[0]} at {worst[1]:.3f}", over=True))
        elif down:
            out.append(Seen(s, BREACH, f"{', '.join(down)} not Ready, no series"))
        elif worst is None:
            corroborated = s.impact or ("no Ready replica" if nothing_ready else "")
            out.append(Seen(s, BREACH, f"no series: {corroborated}") if corroborated
                       else Seen(s, UNKNOWN_STATE, "no series, and nothing says why"))
        elif silent:
            said = f"{', '.join(silent)} {'Ready' if pods is not None else 'of unknown readiness'} with no series"
            out.append(Seen(s, BREACH, f"{said}: {s.impact}") if s.impact else Seen(s, UNKNOWN_STATE, said))
        else:
            out.append(Seen(s, HEALTHY, f"{worst[0]} at {worst[1]:.3f}"))
    return out


@dataclass(frozen=True)
class Recovery:
    threshold: float
    budget: float  # seconds after the fault: the interval judged, whole, ends there (the deadline)
    hold: float  # seconds it must have been healthy by the deadline to count as recovered
    blind: float  # seconds after the fault before a healthy sample may count (rate window + scrape)
    expect_impact: bool = True  # the fault should hurt: a pass needs a breach, then a recovery
    scrape: float = 0.0  # a value over the threshold within a scrape of the fault may predate it
    replicas: bool = True  # one series per replica (a series that vanishes is judged by its pod)
    # Replicas whose series counts as seen from the start though none was yet (the leads Ready at
    # time zero): a replica that had not served a rate window when the fault came is not silence.
    expected: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.budget <= 0 or self.hold < 0 or self.blind < 0 or self.scrape < 0:
            raise SloError(f"budget must be positive and hold, blind, scrape not negative (got {self})")
        if self.blind + self.hold > self.budget:
            raise SloError(f"budget {self.budget:g} s is shorter than the blind window ({self.blind:g} s: rate "
                           f"window + scrape interval) plus hold ({self.hold:g} s): no verdict could ever pass")


def judge(samples: list[Sample], fault_at: float, r: Recovery, final: bool) -> Verdict | None:
    """The verdict over the interval from the fault to its deadline, judged whole; None while
    undecided. `final`: no more samples will come (the deadline is here); before that, only a
    failure no later sample can undo is decided. Samples before the fault only say which series
    existed (a series that vanishes after is judged by its pod)."""
    j = _Judged(samples, fault_at, r)
    return j.at_deadline() if final else j.early()


def at_deadline(samples: list[Sample], fault_at: float, r: Recovery) -> Verdict:
    """`judge` once every sample is in."""
    return _Judged(samples, fault_at, r).at_deadline()


class _Judged:
    """The samples of one interval, classified, with what a verdict on them needs."""

    def __init__(self, samples: list[Sample], fault_at: float, r: Recovery) -> None:
        self.fault_at, self.r, self.deadline = fault_at, r, fault_at + r.budget
        seen = classify([s for s in samples if s.at <= self.deadline], r.threshold, r.replicas, r.expected)
        self.judged = [x for x in seen if x.at >= fault_at]
        # A value over the threshold in the scrape before the fault was there before it; one in the
        # scrape after may be either: it is neither the fault's impact nor its absence.
        self.counts_from = fault_at + (r.scrape if r.expect_impact else 0.0)
        self.breach = next((x for x in self.judged if x.state == BREACH and x.at >= self.counts_from), None)
        self.already = _already(seen, fault_at, r, self.breach) if r.expect_impact else None
        self.streak = _final_streak(self.judged, fault_at + r.blind)
        self.last_bad = next((x for x in reversed(self.judged) if x.state != HEALTHY), None)
        self.peak = _peak([x.sample for x in self.judged])
        self.details: dict[str, Any] = {
            "fault_at": fault_at, "threshold": r.threshold, "hold": r.hold, **budgeted(r.budget, None),
            "blind_until": r.blind, "expect_impact": r.expect_impact,
            "breach_after": None if self.breach is None else round(self.breach.at - fault_at, 3),
            "worst": self.peak[0] if self.peak else None,
            "peak": self.peak[1] if self.peak else None, "impact_seen": self.breach is not None,
            "series": [{"at": x.at, "values": dict(x.sample.values), "state": x.state,
                        **({"error": x.sample.error} if x.sample.error else {}),
                        **({"why": x.why} if x.state != HEALTHY else {})} for x in self.judged],
        }
        over = self.peak is not None and self.peak[1] > r.threshold
        self.worst = f"; worst {self.peak[0]}, peak {self.peak[1]:.3f}" if self.peak and over else ""

    def early(self) -> Verdict | None:
        """Decided before the deadline: a breach already there at the fault that lasted into the
        first breach counted, or a breach so close to the deadline that no healthy run after it
        can last `hold`."""
        if self.already is not None:
            # Until a breach is counted, a healthy sample may yet come and clear it.
            return self.already_over(self.already) if self.breach is not None else None
        bad = self.last_bad
        # At the deadline less hold or later, the healthy samples after it (strictly later, none past the
        # deadline) cannot span `hold`.
        if (bad is not None and bad.state == BREACH and bad.at >= self.counts_from
                and bad.at + self.r.hold >= self.deadline):
            return self.not_recovered(bad)
        return None

    def at_deadline(self) -> Verdict:
        r, judged, breach, streak, details = self.r, self.judged, self.breach, self.streak, self.details
        if self.already is not None:
            return self.already_over(self.already)
        if not any(x.sample.values for x in judged) and breach is None:
            return unknown(f"no data within {r.budget:g} s of the fault", **details)
        recovered = streak is not None and judged[-1].at - streak >= r.hold
        if recovered and streak is not None:
            details.update(budgeted(r.budget, streak - self.fault_at))
        gaps = [x for x in judged if x.state == UNKNOWN_STATE and x.at >= self.counts_from
                and (streak is None or x.at < streak)]
        if r.expect_impact and breach is None:
            if gaps:
                return unknown(f"no impact seen in {r.budget:g} s, and not seen {_span(gaps, self.fault_at)} "
                               f"({gaps[0].why})", **details)
            since = self.counts_from - self.fault_at
            counted = _peak([x.sample for x in judged if x.at >= self.counts_from])
            if counted is None:  # what was seen came before a breach could count
                return unknown(f"no impact seen, and no sample from {since:g} s to the deadline ({r.budget:g} s)",
                               **details)
            # Over in the scrape after the fault, it may be from before it (see counts_from).
            first = next((x for x in judged if x.over and x.at < self.counts_from), None)
            then = f"; {first.why} at {first.at - self.fault_at:.1f} s may predate the fault" if first else ""
            return failed(f"no impact observed: under {r.threshold:g} from {since:g} to {r.budget:g} s after the "
                          f"fault (worst {counted[0]}, peak {counted[1]:.3f}){then}; did the fault land?",
                          outcome="no_impact", **details)
        if recovered and breach is not None:
            return passed(f"breached {details['breach_after']:.1f} s after the fault ({breach.why}), back under "
                          f"{r.threshold:g} after {details[RECOVERED_AFTER_SECONDS]:.1f} s and held to the deadline "
                          f"({r.budget:g} s){self.worst}", outcome="recovered", **details)
        if recovered:
            if gaps:
                back = details[RECOVERED_AFTER_SECONDS]
                return unknown(f"under {r.threshold:g} from {back:.1f} s to the deadline, but "
                               f"not seen before, {_span(gaps, self.fault_at)} ({gaps[0].why})", **details)
            return passed(f"held under {r.threshold:g} from {r.blind:g} s after the fault to the deadline "
                          f"({r.budget:g} s)", outcome="held", **details)
        if breach is None:
            said = (self.last_bad.why if self.last_bad else
                    f"its samples end {judged[-1].at - self.fault_at:.1f} s after the fault")
            return unknown(f"not seen healthy for {r.hold:g} s by the deadline ({r.budget:g} s): {said}", **details)
        return self.not_recovered(self.last_bad or breach)

    def already_over(self, already: Seen) -> Verdict:
        return unknown(f"already over {self.r.threshold:g} when the fault was applied ({already.why}): its impact "
                       "cannot be told apart; is the steady state met?", **self.details)

    def not_recovered(self, last_bad: Seen) -> Verdict:
        r, zero = self.r, self.fault_at
        # `last_bad` is the last sample not healthy: whatever follows it is.
        healthy_after = next((x.at for x in self.judged if x.at > last_bad.at), None)
        state = (f"never back under {r.threshold:g}" if healthy_after is None else
                 f"under {r.threshold:g} since {healthy_after - zero:.1f} s, not held {r.hold:g} s by the deadline")
        return failed(f"not recovered within {r.budget:g} s ({state}); last: {last_bad.why} at "
                      f"{last_bad.at - zero:.1f} s{self.worst}", outcome="not_recovered", **self.details)


def _already(seen: list[Seen], fault_at: float, r: Recovery, breach: Seen | None) -> Seen | None:
    """The breach already there at the fault (over in the scrape before it), unless a healthy sample
    came between it and the first breach counted (or, with none, the deadline): a rate window that
    read healthy after it holds none of it, so a breach after that one is the fault's."""
    before = [x for x in seen if x.over and fault_at - r.scrape <= x.at < fault_at]
    if not before:
        return None
    last = before[-1]
    cleared = any(x.state == HEALTHY and x.at > last.at and (breach is None or x.at < breach.at) for x in seen)
    return None if cleared else last


def _final_streak(judged: list[Seen], counts_from: float) -> float | None:
    """When the run of healthy samples that ends the interval starts (no earlier than
    `counts_from`); None when the interval does not end healthy."""
    start = None
    for x in reversed(judged):
        if x.state != HEALTHY:
            break
        if x.at >= counts_from:
            start = x.at
    return start


def _span(found: list[Seen], fault_at: float) -> str:
    """When the samples were, from the fault: "at 12.0 s" or "from 12.0 s to 20.0 s"."""
    first, last = found[0].at - fault_at, found[-1].at - fault_at
    return f"at {first:.1f} s" if first == last else f"from {first:.1f} s to {last:.1f} s"


def _peak(samples: list[Sample]) -> tuple[str, float] | None:
    worsts = [w for s in samples if (w := s.worst()) is not None]
    return max(worsts, key=lambda kv: kv[1]) if worsts else None


# --- recovery: the thin fetcher ------------------------------------------------------------------
def scrape_interval(url: str, job: str | None = None, timeout: float = 5.0) -> float:
    """Seconds between scrapes of `job` (else the global interval), from Prometheus's own config."""
    try:
        with session(url) as http:
            # verify given outright: requests would let $REQUESTS_CA_BUNDLE override the session's
            reply = http.get(f"{url.rstrip('/')}/api/v1/status/config", timeout=timeout, verify=http.verify)
            reply.raise_for_status()
            config = yaml.safe_load(reply.json()["data"]["yaml"])
    except SloError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure means "cannot tell": say so
        # A tenant gate or a PromQL-compatible backend may not serve Prometheus's own configuration.
        raise metric_names.query_failed(f"reading the scrape interval from {url} (else give the configuration "
                                        "kilocard_scrape_interval, in seconds)", exc, SloError) from None
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


def failures(prom: Any, model: str, namespace: str | None, window: str, start: float, end: float, step: float,
             failed_metric: str = GATEWAY_FAILED) -> dict[float, float]:
    """The gateway's failed requests per second for the model, from `start` to `end`, by time
    (a range query): what corroborates that a missing series is the fault's impact. A gateway
    that stores no failures counter corroborates nothing."""
    first, last = round(start), round(end)
    if last - first < step:
        last = first + math.ceil(step)
    try:
        stored = metric_names.locate(prom, (failed_metric,), model, namespace)
        result = prom.custom_query_range(f"sum(rate({stored.name}{{{stored.matchers}}}[{window}]))",
                                         start_time=dt.datetime.fromtimestamp(first, dt.UTC),
                                         end_time=dt.datetime.fromtimestamp(last, dt.UTC), step=f"{step:g}")
    except metric_names.MetricNotFound:
        return {}
    except Exception as exc:  # noqa: BLE001 - sorted by query_failed
        raise metric_names.query_failed(f"the gateway's failures for {model}", exc, SloError) from None
    return {round(float(at), 3): float(v) for row in result for at, v in row["values"] if not math.isnan(float(v))}


def recovered_within(prom: Any, ind: Indicator, fault_at: float, r: Recovery, interval: float = 1.0,
                     annotate: Callable[[list[Sample]], list[Sample]] = lambda samples: samples,
                     clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> Verdict:
    """Judge the indicator from the fault to its deadline: its history first, then live every
    `interval` s (for the live view, and a failure no later sample can undo), and a scrape after
    the deadline the whole interval again from Prometheus's record (a live query that failed
    leaves no hole where Prometheus has the data). `annotate` adds what the cluster says at each sample's time
    (its pods' readiness, the gateway's failures): what a missing series means."""
    values(prom, ind)  # bad PromQL or an unreachable Prometheus is an error now, not a red verdict later
    deadline = fault_at + r.budget
    start = fault_at - max(ind.window_seconds, interval)  # which series the fault found
    samples = history(prom, ind, start, min(clock(), deadline), interval)
    live: list[Sample] = []
    while (now := clock()) < deadline:
        try:
            live.append(Sample(now, values(prom, ind)))
        except (SloError, NoData) as exc:
            live.append(Sample(now, {}, str(exc)))  # no data is never healthy
        told = annotate(samples + live)
        seen = classify(told, r.threshold, r.replicas, r.expected)
        events.publish({"topic": "slo", "indicator": ind.name, "query": ind.query, "worst": live[-1].worst(),
                        "error": live[-1].error, "threshold": r.threshold, "left": deadline - now, "at": now,
                        "phase": "blind" if now < fault_at + r.blind else _PHASES[seen[-1].state]})
        verdict = judge(told, fault_at, r, final=False)
        if verdict is not None:
            return verdict
        sleep(max(0.0, min(interval, deadline - now)))
    sleep(max(0.0, deadline + r.scrape - clock()))  # Prometheus holds every scrape up to the deadline
    whole = history(prom, ind, start, deadline, interval) + [s for s in live if not s.error]
    return at_deadline(annotate(whole), fault_at, r)
