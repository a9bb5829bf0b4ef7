"""Chaos Toolkit probes: thin wrappers that fetch, run a pure probe and return its verdict as a
dict. Tolerance: {type: regex, target: verdict, pattern: "^ok$"} (built in; no extras needed).
No `from __future__ import annotations`: discovery reads the real annotations.

Configuration keys (optional): `kilocard_kubeconfig`, `kilocard_context`,
`kilocard_card_resource`, `kilocard_prometheus_url` (default http://127.0.0.1:6450, the testbed's),
`kilocard_run_id` and `kilocard_ledger_dir` (the run whose faults start a budgeted probe's clock),
`kilocard_scrape_interval` (seconds; else read from Prometheus).

Time zero of a budgeted probe (chaos.timezero, docs/verdicts.md): the run's first or last
disruption (its faults from its ledger, and every other driver's action), else its `since`.
"""

import bisect
import contextlib
import functools
import logging
import time
from pathlib import Path
from typing import Any, Callable, Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

from chaos import ledger, record, timezero
from chaos.actions import run_id_of
from chaos.agent import kinds
from chaos.errors import KilocardError, KubeError
from chaos.follower import Follower
from chaos.kube import Kube
from chaos.settings import Settings
from chaos.vocabulary import DRA_DRIVER, describe_target
from probes import (
    capacity,
    client_errors,
    device_taints,
    hung,
    incident,
    kv,
    metric_names,
    placement,
    pulls,
    remediation,
    slo,
    snapshot,
    spread,
    straggler,
    tp_groups,
)
from probes.errors import NoData, ProbeError
from probes.verdict import unknown

_LOG = logging.getLogger(__name__)

__all__ = [
    "capacity_fits",
    "client_errors_within",
    "devices_tainted_within",
    "image_pulls_failed",
    "incident_symptoms",
    "kv_cache_within",
    "no_hung_groups",
    "placement_holds",
    "remediated_within",
    "room_to_reschedule",
    "slo_recovered_within",
    "slo_under",
    "straggler_named_within",
    "tp_groups_recovered_within",
    "tp_groups_whole",
    "traffic_spread_within",
]


def _unknown_without_data(probe: Callable[..., Dict[str, Any]]) -> Callable[..., Dict[str, Any]]:
    """A probe whose source did not answer (Prometheus down, the apiserver gone past the
    retries) returns a failed verdict, outcome "unknown": never a pass, and said as what it is."""
    @functools.wraps(probe)  # the signature stays the probe's: Chaos Toolkit checks arguments against it
    def judged(*args: Any, **kwargs: Any) -> Dict[str, Any]:
        try:
            return probe(*args, **kwargs)
        except (NoData, KubeError) as exc:
            if isinstance(exc, KubeError) and 0 < exc.status < 500 and exc.status != 429:
                raise  # the apiserver answered no (a 403, a 404): that is not missing data
            return unknown(f"no data: {exc}").to_json()
    return judged


def _kube(cfg: Optional[Dict[str, Any]]) -> Kube:
    return Settings.of(cfg).kube()


def _snapshot(cfg: Optional[Dict[str, Any]], namespace: Optional[str]) -> snapshot.ClusterSnapshot:
    kube = _kube(cfg)
    try:
        return snapshot.fetch(kube, Settings.of(cfg).card_resource, namespace)
    finally:
        kube.close()


XID_FAULT = "gpu-xid"  # the fault kind whose records devices_tainted_within judges (chaos.agent.kinds.xid)


def _prom(cfg: Optional[Dict[str, Any]]) -> Any:
    return Settings.of(cfg).prometheus()


@_unknown_without_data
def placement_holds(model: str, topology_key: str = "kubernetes.io/hostname", namespace: Optional[str] = None,
                    max_skew: int = 1, guaranteed: bool = False,
                    configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Replicas honour their anti-affinity (required: one per domain; else skew <= max_skew);
    with `guaranteed`, only a required rule (anti-affinity or DoNotSchedule spread) passes."""
    return placement.anti_affinity(_snapshot(configuration, namespace), model, topology_key, namespace,
                                   max_skew, guaranteed).to_json()


@_unknown_without_data
def tp_groups_whole(model: Optional[str] = None, namespace: Optional[str] = None,
                    configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Every TP group on as few nodes as its size needs, complete, not partially Ready."""
    return tp_groups.check(_snapshot(configuration, namespace), model, namespace).to_json()


@_unknown_without_data
def tp_groups_recovered_within(model: str, budget: float, namespace: Optional[str] = None,
                               since: Optional[float] = None,
                               configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """At some moment within `budget` s of time zero (the run's first fault, else the end of the
    last action before this probe, else `since`), every TP group of the model is whole and Ready,
    off every node the run's faults hit as a node, and as many pods as its workloads ask for: a
    group still waiting for a rank stuck on a dead node fails, a killed replica not yet replaced
    fails. A probe reached after its budget judges the run's record of the interval."""
    cfg = configuration or {}
    kube = _kube(cfg)
    try:
        records = _applied_records(cfg, kube)
        zero, zero_is = time_zero(cfg, kube, since, first=True)
        return tp_groups.recovered_within(kube, model, _faulted_nodes(records), zero, budget, namespace,
                                          Settings.of(cfg).card_resource, zero_is, _settled(cfg, records)).to_json()
    finally:
        kube.close()


@_unknown_without_data
def image_pulls_failed(model: str, namespace: Optional[str] = None, since: Optional[float] = None,
                       configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The replacements of the model made since time zero (the run's first disruption: its first fault or another
    driver's first action, else `since`) failed their image pulls before they were
    Ready: a registry outage met the cold-start path (probes/pulls.py). Needs the run's record."""
    cfg = configuration or {}
    kube = _kube(cfg)
    try:
        zero = time_zero(cfg, kube, since, first=True)[0]
        found = snapshot.recorded(kube, Settings.of(cfg).card_resource, namespace, zero)
        if found is None:
            raise NoData("image_pulls_failed reads the run's record from time zero (kilocard run's follower); "
                         "none reaches back that far")
        return pulls.judge([(m.at, [pulls.PodAt(p.uid, p.name, p.ready, p.waiting)
                                    for p in m.snapshot.replicas(model, namespace)]) for m in found],
                           model, zero).to_json()
    finally:
        kube.close()


@_unknown_without_data
def capacity_fits(model: str, qps: float, prompt_tokens: int, output_tokens: int, latency_seconds: float,
                  headroom: float = 0.25, losing_nodes: Optional[List[str]] = None, namespace: Optional[str] = None,
                  configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The free KV cache of Ready replicas covers the demand with headroom (optionally after
    losing some nodes)."""
    demand = capacity.Demand(qps, prompt_tokens, output_tokens, latency_seconds)
    return capacity.fits(_snapshot(configuration, namespace), model, demand, headroom,
                         losing_nodes=tuple(losing_nodes or ()), namespace=namespace).to_json()


@_unknown_without_data
def room_to_reschedule(model: str, losing_nodes: Optional[List[str]] = None, namespace: Optional[str] = None,
                       configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The model's Pending replicas, and those the loss of `losing_nodes` (default: of any one of
    its nodes) would displace, have nodes with room: free cards in one piece, taints tolerated,
    anti-affinity kept."""
    lost = tuple(losing_nodes) if losing_nodes is not None else None
    return capacity.room(_snapshot(configuration, namespace), model, lost, namespace=namespace).to_json()


def _indicator(prom: Any, indicator: str, model: str, namespace: Optional[str], window: str,
               per: str, query: Optional[str]) -> slo.Indicator:
    if per not in ("replica", "model"):
        raise ProbeError(f"per: expected 'replica' or 'model', got {per!r}")
    return slo.indicator(prom, indicator, model, namespace, window, by=slo.REPLICA if per == "replica" else None,
                         query=query)


@_unknown_without_data
def slo_under(model: str, indicator: str = "ttft_p95", threshold: float = 0.5, per: str = "replica",
              namespace: Optional[str] = None, window: str = "1m", query: Optional[str] = None,
              configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The indicator (ttft_p95, itl_p95, error_ratio, promql) is under the threshold now, for the
    worst replica (per: replica) or the model (per: model); no samples is not healthy, and per
    replica, neither is a replica Ready for longer than the window plus a scrape that exports no
    series (it completes nothing: its quantile is NaN)."""
    cfg = configuration or {}
    prom = _prom(cfg)
    ind = _indicator(prom, indicator, model, namespace, window, per, query)
    expected = None
    if ind.by is not None:
        settle = ind.window_seconds + _scrape(cfg, lambda: _job(prom, ind))
        expected = expected_series(_snapshot(cfg, namespace), model, namespace, time.time() - settle)
    return slo.under(prom, ind, threshold, expected).to_json()


def expected_series(s: snapshot.ClusterSnapshot, model: str, namespace: Optional[str], settled_by: float) -> Set[str]:
    """The replicas that must export a per-replica series now: each group's lead (rank 0), its
    group wholly Ready since `settled_by` (a replica that just started has no rate yet)."""
    return {lead for lead, since in snapshot.ready_leads(s.replicas(model, namespace)).items() if since <= settled_by}


def _scrape(cfg: Dict[str, Any], job: Callable[[], Optional[str]] = lambda: None) -> float:
    """Seconds between scrapes: configured, else Prometheus's own for `job()` (else its global one)."""
    settings = Settings.of(cfg)
    if settings.scrape_interval is not None:
        return settings.scrape_interval
    return slo.scrape_interval(settings.prometheus_url, job())


@_unknown_without_data
def incident_symptoms(symptoms: Dict[str, Any], expect: str = "reproduced", fixed: Optional[Dict[str, Any]] = None,
                      namespaces: Optional[List[str]] = None, step: float = 1.0, first_at: float = 0.0,
                      since: Optional[float] = None, configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """A replayed incident's symptoms (probes.incident), from time zero (the replay's first fault,
    less `first_at`, its offset in the timeline; else `since`) to now: with expect "reproduced",
    every recorded alert fired again and every recorded replica was deleted and its replacement
    scheduled, started and Ready again (the phases recorded), each within the tolerance of its
    recorded offset; with "fixed", none came back, or each
    within its budget in `fixed`. Alerts from Prometheus's ALERTS series (one range query, `step`
    s), replicas from the namespaces' Events and the run's own pod kills, Ready from the pods'
    Ready conditions (read only when a symptom or budget asks for it), each SLO symptom's
    indicator per replica (one range query each)."""
    if expect not in incident.EXPECT:
        raise ProbeError(f"expect: expected one of {', '.join(incident.EXPECT)}, got {expect!r}")
    bad = incident.problems(symptoms, fixed, "incident_symptoms")
    if bad:
        raise ProbeError("; ".join(bad))
    cfg = configuration or {}
    kube = _kube(cfg)
    try:
        zero = time_zero(cfg, kube, since, first=True)[0] - float(first_at)
        until = time.time()
        series: List[Dict[str, Any]] = []
        readings: Dict[str, List[incident.Reading]] = {}
        start = zero - 3 * step  # a firing (a breach) that starts at the range's start began before time zero
        if symptoms.get("alerts") or symptoms.get("slo"):  # replicas alone need no Prometheus
            prom = _prom(cfg)
            if symptoms.get("alerts"):
                try:
                    series = record.alert_series(prom, start, until, step)
                except Exception as exc:  # noqa: BLE001 - the client raises many kinds; query_failed sorts them
                    raise metric_names.query_failed("PromQL range ALERTS", exc, ProbeError) from None
            readings = {incident.slo_key(s): record.slo_readings(prom, s, start, until, step, zero)
                        for s in symptoms.get("slo") or []}
        _, alerts = record.faults_from_alerts(series, step, until, {})
        firings = [incident.Firing(a["name"], a["labels"], round(a["firing_at"] - zero, 3),
                                   None if a["resolved_at"] is None else round(a["resolved_at"] - zero, 3))
                   for a in alerts]
        killed = [(r.applied_at, f"{r.target.get('namespace', '')}/{r.target['name']}")
                  for r in _applied_records(cfg, kube) if r.target.get("name") and r.target.get("uid")]  # a pod
        every: List[Optional[str]] = [None]  # every namespace
        events = record.events(kube, list(namespaces) if namespaces else every, zero, until)
        ready = record.ready_times(record.pods(kube, ["default", *namespaces] if namespaces else every)) if any(
            "ready" in r for r in symptoms.get("replicas") or []) or "ready_within" in (
            (fixed or {}).get("replicas") or {}) else {}
    finally:
        kube.close()
    replaced = [incident.Replacement.of(r) for r in record.recovery_from_events(events, zero, killed, ready)]
    horizon = round(until - zero, 3)
    if expect == incident.FIXED:
        return incident.fixed(symptoms, fixed or {}, firings, replaced, horizon, readings).to_json()
    return incident.reproduced(symptoms, firings, replaced, horizon, readings).to_json()


@_unknown_without_data
def slo_recovered_within(model: str, budget: Optional[float] = None, indicator: str = "ttft_p95",
                         threshold: float = 0.5, hold: float = 10.0, per: str = "replica", expect_impact: bool = True,
                         namespace: Optional[str] = None, window: str = "30s", query: Optional[str] = None,
                         fault_at: Optional[float] = None, since: Optional[float] = None,
                         deadline: Optional[float] = None,
                         configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Over the whole interval from time zero (`fault_at` if given, else the run's last disruption:
    its last fault or another driver's last action, else `since`) to `budget` s after it:
    with `expect_impact`, the indicator breaches the threshold, then is back under it and stays
    there to the deadline, for at least `hold` s; without, it holds (or comes back and stays) the
    same way. Never judged healthy before the metric could show the fault (rate window + scrape
    interval); a replica that goes silent while its pod is Ready is not health, and an absence is
    impact only where the cluster corroborates it (the pod not Ready, nothing Ready, the gateway
    failing requests). "No impact observed" is its own outcome, not a pass."""
    budget = _renamed("budget", budget, "deadline", deadline)
    cfg = configuration or {}
    prom = _prom(cfg)
    ind = _indicator(prom, indicator, model, namespace, window, per, query)
    kube = _kube(cfg)
    try:
        zero = fault_at if fault_at is not None else time_zero(cfg, kube, since)[0]
        scrape = _scrape(cfg, lambda: _job(prom, ind))
        with _recording(kube):
            expected = _serving_at(cfg, kube, model, namespace, zero) if ind.by is not None else frozenset()
            recovery = slo.Recovery(threshold, budget, hold, ind.window_seconds + scrape, expect_impact, scrape,
                                    replicas=ind.by is not None, expected=expected)
            annotate = _Corroboration(kube, prom, model, namespace, window, min(scrape, 5.0), recovery.blind)
            verdict = slo.recovered_within(prom, ind, zero, recovery, interval=min(scrape, 5.0), annotate=annotate)
    finally:
        kube.close()
    return {**verdict.to_json(), "indicator": indicator, "query": ind.query, "per": per}


def straggler_named_within(model: str, budget: float, ratio: float = 1.3, hold: float = 15.0,
                           namespace: Optional[str] = None, window: str = "30s", fault_at: Optional[float] = None,
                           since: Optional[float] = None,
                           configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Within `budget` s of time zero (`fault_at` if given, else the run's last disruption: its last fault or another
    driver's last action, else `since`), one replica of the model was at least
    `ratio` times its peers' median P95 inter-token latency on every sample for `hold` s: named
    from the replicas' own series, never from the fault's record (probes/straggler.py). Unseen
    samples (a Ready replica silent) never read as "no straggler"."""
    cfg = configuration or {}
    prom = _prom(cfg)
    ind = _indicator(prom, "itl_p95", model, namespace, window, "replica", None)
    kube = _kube(cfg)
    try:
        zero = fault_at if fault_at is not None else time_zero(cfg, kube, since)[0]
        scrape = _scrape(cfg, lambda: _job(prom, ind))
        rule = straggler.Rule(ratio, hold, budget, blind=ind.window_seconds + scrape)
        step = min(scrape, 5.0)
        with _recording(kube):
            while True:
                now = time.time()
                samples = slo.history(prom, ind, zero - max(ind.window_seconds, step), min(now, zero + budget), step)
                verdict = straggler.judge(_with_ready(kube, model, namespace, samples, rule.blind), zero, rule)
                if verdict.details.get("outcome") in ("named", "already") or now >= zero + budget + scrape:
                    break
                time.sleep(step)
    finally:
        kube.close()
    return {**verdict.to_json(), "indicator": "itl_p95", "query": ind.query}


def _with_ready(kube: Kube, model: str, namespace: Optional[str], samples: List[slo.Sample],
                settle: float) -> List[straggler.Sample]:
    """The samples with the replicas that must show a series at each (`_ready_at`)."""
    ready = _ready_at(kube, model, namespace, [s.at for s in samples], settle)
    return [straggler.Sample(s.at, s.values, r, s.error) for s, r in zip(samples, ready, strict=True)]


def _ready_at(kube: Kube, model: str, namespace: Optional[str], times: List[float],
              settle: float) -> List[Optional[FrozenSet[str]]]:
    """At each time, the replicas (their leads) whose groups had been wholly Ready for `settle` s,
    from the run's follower's record; None where it does not reach back."""
    states = snapshot.readiness(kube, namespace, model, min(times)) if times else []
    at = [state.at for state in states]
    out: List[Optional[FrozenSet[str]]] = []
    for t in times:
        i = _bisect(at, t)
        out.append(None if i < 0 else frozenset(lead for lead, since in states[i].leads.items() if since <= t - settle))
    return out


def client_errors_within(budget: float, hold: float = 10.0, max_window: Optional[float] = None,
                         min_requests: int = 5, fault_at: Optional[float] = None, since: Optional[float] = None,
                         configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The requests the experiment's own load sent from time zero (`fault_at` if given, else the
    run's last disruption: its last fault or another driver's last action, else `since`) failed
    only inside one error window that ended within `budget` s (and lasted at most `max_window` s),
    then every request was answered for `hold` s: what the clients saw (probes/client_errors.py).
    Waits for the interval's end and for the requests sent in it to finish."""
    from chaos import load

    offered = load.running()
    if offered is None:
        raise ProbeError("client_errors_within: no built-in load runs in this process: give the experiment a "
                         "`kilocard` load (extensions: [{name: kilocard, load: {...}}])")
    cfg = configuration or {}
    kube = _kube(cfg)
    try:
        zero = fault_at if fault_at is not None else time_zero(cfg, kube, since)[0]
    finally:
        kube.close()
    end = zero + budget + hold
    time.sleep(max(0.0, end - time.time()))
    # The requests sent in the interval finish within the load's timeout (a hang is a timeout).
    give_up = time.time() + offered.spec.timeout_seconds + 1.0
    while True:
        samples, pending = offered.seen()
        waiting = tuple(offered.started_at + t for t in pending if offered.started_at + t <= end)
        if not waiting or time.time() >= give_up:
            break
        time.sleep(0.2)
    requests = [client_errors.Request(offered.started_at + s.sent, s.error, s.aborted) for s in samples]
    rule = client_errors.Rule(budget, hold, max_window, min_requests)
    return client_errors.judge(requests, zero, rule, waiting).to_json()


@_unknown_without_data
def kv_cache_within(model: str, duration: float, max_preemptions: float = 0.0, max_usage: float = 1.0,
                    min_usage: float = 0.01, namespace: Optional[str] = None, fault_at: Optional[float] = None,
                    since: Optional[float] = None, configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """For `duration` s from time zero (`fault_at` if given, else the run's last disruption: its last fault or another
    driver's last action, else `since`), no replica of the model preempted
    more than `max_preemptions` requests and none's KV-cache usage passed `max_usage`, each replica
    on its own; and some replica's usage reached `min_usage` (the load reached it): probes/kv.py.
    Waits for the interval's end; a replica Ready for three scrapes and silent is unseen, never
    within bounds."""
    cfg = configuration or {}
    prom = _prom(cfg)
    counter = metric_names.locate(prom, kv.PREEMPTION_NAMES, model, namespace)
    gauge = metric_names.locate(prom, kv.KV_USAGE_NAMES, model, namespace)
    queries = [_by_replica(prom, model, "max", found) for found in (counter, gauge)]
    kube = _kube(cfg)
    try:
        zero = fault_at if fault_at is not None else time_zero(cfg, kube, since)[0]
        # The whole interval, even once a bound is passed: how many preempted, and for how long, is
        # the finding (the run waits as long for the scenario that holds).
        (counts, usage), ready = _replica_histories(cfg, kube, prom, model, namespace, counter.name, queries,
                                                    zero, zero + duration, 0.0)
        samples = [kv.Sample(c.at, c.values, u.values, r, c.error or u.error)
                   for c, u, r in zip(counts, usage, ready, strict=True)]
        verdict = kv.judge(samples, zero, kv.Bounds(duration, max_preemptions, max_usage, min_usage))
    finally:
        kube.close()
    return {**verdict.to_json(), "queries": [q.query for q in queries]}


@_unknown_without_data
def traffic_spread_within(model: str, budget: float, hold: float = 10.0, share_window: float = 10.0,
                          min_share: float = 0.5, namespace: Optional[str] = None, fault_at: Optional[float] = None,
                          since: Optional[float] = None,
                          configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The model's traffic is spread over its replicas again within `budget` s of time zero
    (`fault_at` if given, else the run's last disruption: its last fault or another driver's
    last action, else `since`) and stays so for `hold` s: each replica Ready through the trailing
    `share_window` s finished at least `min_share` of an even share of the model's requests in it, each
    on its own (probes/spread.py). Waits for the interval's end; a Ready replica without a series
    is unseen, never an even share."""
    cfg = configuration or {}
    prom = _prom(cfg)
    counter = metric_names.locate(prom, hung.FINISHED_NAMES, model, namespace)
    query = _by_replica(prom, model, "sum", counter)
    kube = _kube(cfg)
    try:
        zero = fault_at if fault_at is not None else time_zero(cfg, kube, since)[0]
        (history,), ready = _replica_histories(cfg, kube, prom, model, namespace, counter.name, [query], zero,
                                               zero + budget + hold, share_window)
        samples = [spread.Sample(h.at, h.values, r, h.error) for h, r in zip(history, ready, strict=True)]
        verdict = spread.judge(samples, zero, spread.Rule(budget, hold, share_window, min_share))
    finally:
        kube.close()
    return {**verdict.to_json(), "query": query.query}


def _by_replica(prom: Any, model: str, how: str, found: metric_names.Stored) -> slo.Indicator:
    """A series per replica (its lead pod) of a located metric, its label sets folded by `how`."""
    by = found.pod_label("per replica")
    return slo.indicator(prom, "promql", model, query=f"{how} by ({by}) ({found.name}{{{found.matchers}}})", by=by)


def _replica_histories(cfg: Dict[str, Any], kube: Kube, prom: Any, model: str, namespace: Optional[str],
                       name: str, queries: List[slo.Indicator], zero: float, end: float,
                       before: float) -> Tuple[List[List[slo.Sample]], List[Optional[FrozenSet[str]]]]:
    """Once `end` and a scrape have passed: each query's history from `before` s ahead of time
    zero to `end`, and at each of its samples the replicas that must show a series there, those
    Ready for three scrapes by the run's follower (an engine's series land at the first scrape
    after it serves)."""
    scrape = _scrape(cfg, lambda: _job(prom, slo.Indicator(model, "", "", None, name)))
    step = min(scrape, 5.0)
    with _recording(kube):
        time.sleep(max(0.0, end + scrape - time.time()))
        histories = [slo.history(prom, q, zero - before - 2 * step, end, step) for q in queries]
        ready = _ready_at(kube, model, namespace, [s.at for s in histories[0]], 3 * scrape)
    return histories, ready


def _serving_at(cfg: Dict[str, Any], kube: Kube, model: str, namespace: Optional[str], zero: float) -> FrozenSet[str]:
    """The replicas wholly Ready at time zero, by their leads: each must show a series in the
    interval judged, whether or not it had served a rate window by then. The cluster at time
    zero as the run's follower recorded it; without a record reaching back, the pods Ready since
    before it now (a replica killed and recreated since is then not known)."""
    card_resource = Settings.of(cfg).card_resource
    at_zero = snapshot.recorded_at(kube, card_resource, namespace, zero)
    if at_zero is None:
        at_zero = snapshot.fetch(kube, card_resource, namespace)
    return frozenset(expected_series(at_zero, model, namespace, zero))


def _renamed(name: str, value: Optional[float], old: str, given: Optional[float]) -> float:
    """An argument that once had another name (an experiment written before may still say it);
    the experiment's schema lets exactly one through."""
    if given is None:
        if value is None:
            raise ProbeError(f"{name}: required")
        return value
    if value is not None:
        raise ProbeError(f"{name} and {old} (its old name) both given")
    _LOG.warning("%s: the argument '%s' is now called '%s'", name, old, name)
    return given


class _Corroboration:
    """What the cluster says at each sample's time, for what a missing series means: the model's
    pods and their readiness (the run's follower's record), the replicas that must show a series
    by then (all pods Ready for `settle` s: a rate window and a scrape), and the gateway's failed
    requests (asked only when a series is missing)."""

    def __init__(self, kube: Kube, prom: Any, model: str, namespace: Optional[str], window: str,
                 step: float, settle: float) -> None:
        self.kube, self.prom = kube, prom
        self.model, self.namespace, self.window, self.step, self.settle = model, namespace, window, step, settle
        self.failing: Dict[float, float] = {}

    def __call__(self, samples: List[slo.Sample]) -> List[slo.Sample]:
        if not samples:
            return samples
        states = snapshot.readiness(self.kube, self.namespace, self.model, min(s.at for s in samples))
        times = [state.at for state in states]
        missing = _missing(samples)
        if missing:
            self._failures(min(missing), max(missing))
        out = []
        for s in samples:
            i = _bisect(times, s.at)
            failing = self._at(self.failing, s.at) if s.at in missing else 0.0
            impact = f"the gateway failed {failing:.2f} requests/s" if failing > 0 else ""
            if i < 0:
                out.append(slo.Sample(s.at, s.values, s.error, None, impact))
                continue
            due = frozenset(lead for lead, since in states[i].leads.items() if since <= s.at - self.settle)
            out.append(slo.Sample(s.at, s.values, s.error, states[i].pods, impact, due))
        return out

    def _failures(self, start: float, end: float) -> None:
        known = self.failing and min(self.failing) <= start and max(self.failing) >= end
        if not known:
            self.failing = slo.failures(self.prom, self.model, self.namespace, self.window, start - self.step,
                                        end + self.step, self.step)

    def _at(self, series: Dict[float, float], at: float) -> float:
        """The value at the latest time at or before `at`, within a step."""
        before = [t for t in series if at - self.step <= t <= at]
        return series[max(before)] if before else 0.0


def _missing(samples: List[slo.Sample]) -> Set[float]:
    """The times of samples that lack a series an earlier one had, or have none: where an absence must be told."""
    seen: Set[str] = set()
    found: Set[float] = set()
    for s in sorted(samples, key=lambda s: s.at):
        if not s.values or not seen <= set(s.values):
            found.add(s.at)
        seen |= set(s.values)
    return found


def _bisect(times: List[float], at: float) -> int:
    """The index of the last time at or before `at` (-1: none)."""
    return bisect.bisect_right(times, at) - 1


@contextlib.contextmanager
def _recording(kube: Kube) -> Iterator[None]:
    """The run's follower records the cluster; a probe with none (plain `chaos run`) records it
    from its own start (a watch the RBAC does not allow: no record, pods not known)."""
    if snapshot.source_for(kube) is not None:
        yield
        return
    try:
        follower = Follower(kube).start()
    except KilocardError:
        yield
        return
    try:
        yield
    finally:
        follower.stop()


@_unknown_without_data
def no_hung_groups(model: str, namespace: Optional[str] = None, window: str = "30s", since: Optional[float] = None,
                   configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """No TP group of the model is hung: every replica whose pods have all been Ready for `window`
    finished requests over it while the model had demand. One that finished none, or whose lead
    exports no series (a frozen rank 0), is named; no series, or no demand, is not a pass. After
    time zero (the run's last disruption, else `since`), it
    judges only once the window lies wholly after it (plus a scrape): a window still holding the
    requests served before the stall would pass blind."""
    cfg = configuration or {}
    zero = _time_zero_if_any(cfg, since)
    if zero is not None:
        time.sleep(max(0.0, zero[0] + slo.seconds(window) + _scrape(cfg) - time.time()))
    figures = hung.fetch(_prom(configuration), model, namespace, window)
    return hung.judge(_snapshot(configuration, namespace), figures, model, window, namespace).to_json()


def _ledger_dir(cfg: Dict[str, Any]) -> Path:
    return Settings.of(cfg).ledger_dir or ledger.default_dir()


def time_zero(cfg: Dict[str, Any], kube: Optional[Kube], since: Optional[float] = None,
              first: bool = False, faults: Optional[List[Any]] = None) -> Tuple[float, str]:
    """(time zero, what it is): the run's `first` disruption, else its last (chaos.timezero: its
    faults from the ledger, or those given, and every other driver's action before the probe),
    else `since`; none of them is an error: nothing to time from."""
    found = _time_zero_or_none(cfg, kube, since, first, faults)
    if found is None:
        raise ProbeError(f"run {run_id_of(cfg)} has applied no fault and run no action yet, and the probe has no "
                         "`since`: nothing to time from")
    at, what = found
    if at > time.time():
        raise ProbeError(f"run {run_id_of(cfg)}: time zero {at} is in the future ({what}); check the clocks")
    return at, what


def _time_zero_if_any(cfg: Dict[str, Any], since: Optional[float]) -> Optional[Tuple[float, str]]:
    """Time zero, if there is one yet (a probe in the steady state has none)."""
    kube = _kube(cfg)
    try:
        return _time_zero_or_none(cfg, kube, since)
    finally:
        kube.close()


def _time_zero_or_none(cfg: Dict[str, Any], kube: Optional[Kube], since: Optional[float] = None,
                       first: bool = False, faults: Optional[List[Any]] = None) -> Optional[Tuple[float, str]]:
    records = _records(cfg, kube) if faults is None else faults
    applied = [(r.applied_at, f"{r.kind} on {describe_target(r.target)}") for r in records if r.applied_at]
    return timezero.choose(applied, timezero.others(run_id_of(cfg)), first, since)


def _job(prom: Any, ind: slo.Indicator) -> Optional[str]:
    """The scrape job behind the indicator's series, for its scrape interval."""
    if not ind.metric:
        return None  # a query of one's own: the global interval
    try:
        found = prom.custom_query(f"count by (job) ({ind.metric})")
    except Exception as exc:  # noqa: BLE001 - sorted by query_failed
        raise metric_names.query_failed(f"PromQL count by (job) ({ind.metric})", exc) from None
    return found[0]["metric"].get("job") if found else None


@_unknown_without_data
def remediated_within(models: List[str], budget: float, node: Optional[str] = None, namespace: Optional[str] = None,
                      path: str = "quarantine", since: Optional[float] = None,
                      configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """At some moment within `budget` s of time zero (the run's first disruption: its first fault on the
    node, else its first, or another driver's first action, else `since`), on `path`:
    `quarantine` (the node cordoned and tainted or labelled, and drained) or `out-of-service` (a
    lost node tainted out of service or deleted, its stuck pods removed, TP groups whole and
    Ready); either way the models' replicas Ready elsewhere. `node` defaults to the one node the
    run's faults hit (from its ledger)."""
    if path not in remediation.PATHS:
        raise ProbeError(f"path: expected one of {', '.join(remediation.PATHS)}, got {path!r}")
    cfg = configuration or {}
    kube = _kube(cfg)
    try:
        records = _applied_records(cfg, kube)
        if node is None:
            hit = sorted(_faulted_nodes(records))
            if len(hit) != 1:
                raise ProbeError(f"node: the run's faults hit {len(hit)} nodes ({', '.join(hit) or 'none'}); "
                                 "name the one whose remediation to judge")
            node = hit[0]
        on_node = [r for r in records if r.target.get("node") == node]
        zero, zero_is = time_zero(cfg, kube, since, first=True, faults=on_node or records)
        cards = Settings.of(cfg).card_resource
        return remediation.within(kube, node, tuple(models), budget, namespace, cards, path, fault_at=zero,
                                  zero_is=zero_is, settled=_settled(cfg, records)).to_json()
    finally:
        kube.close()


@_unknown_without_data
def devices_tainted_within(budget: float, driver: str = DRA_DRIVER,
                           configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Within `budget` s of each XID fault of the run (from its ledger), the DRA driver has
    tainted that card's device (`gpu-<card>` in its node's ResourceSlices) NoSchedule or NoExecute:
    the per-card twin of remediated_within. Waits while a card is untainted and within budget;
    names each card untainted when its budget ran out, or tainted late. A run with no XID fault,
    or one reverted before the probe could see its taint, is not a pass (outcome unknown)."""
    cfg = configuration or {}
    kube = _kube(cfg)
    try:
        faults = [device_taints.XidFault(str(r.target["node"]), int(r.target["card"]), r.applied_at,
                                         reverted=r.state != "applied")
                  for r in _records(cfg, kube) if r.kind == XID_FAULT and r.applied_at]
        return device_taints.within(kube, faults, budget, driver).to_json()
    finally:
        kube.close()


def _faulted_nodes(records: List[ledger.Record]) -> Set[str]:
    """The nodes the faults hit as nodes (a card, its network, its kubelet), not the nodes of the
    pods a kill ended (a killed pod's replacement may well come back on its old node) nor those
    a fault leaves fit to serve what they run (a registry outage: their images are on disk)."""
    return {str(r.target["node"]) for r in records
            if r.target.get("node") and "name" not in r.target and not kinds.leaves_fit(r.kind)}


def _records(cfg: Dict[str, Any], kube: Optional[Kube]) -> List[ledger.Record]:
    """The run's ledger: this process's files, which every fault is written to before it is
    applied, else (a probe in another process) the cluster's markers too."""
    directory, run_id = _ledger_dir(cfg), run_id_of(cfg)
    return ledger.records(None, directory, run_id) or (ledger.records(kube, directory, run_id) if kube else [])


def _settled(cfg: Dict[str, Any], records: List[ledger.Record]) -> Optional[float]:
    """When the run's disruptions so far were done: its faults' applies returned, other drivers'
    actions ended (their writes caught up with then): their changes are all older, and no moment
    is judged before the view holds them (a kill by another driver is judged once it is seen)."""
    return max([*(r.applied_until or r.applied_at for r in records),
                *(a.ended for a in timezero.others(run_id_of(cfg)))], default=None)


def _applied_records(cfg: Dict[str, Any], kube: Kube) -> List[ledger.Record]:
    """The run's faults applied so far (its ledger), maybe none (another driver's faults)."""
    return [r for r in _records(cfg, kube) if r.applied_at]
