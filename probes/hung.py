"""Hung TP groups: every pod Ready, nothing served. A frozen rank (a hung collective, a stopped
process) leaves its pods Running and Ready, so the gateway keeps sending the group its share of
the traffic, which queues; readiness probes and placement checks see nothing wrong.

The verdict (`judge`, pure) is per replica, never averaged: a model-level rate hides one hung
group among healthy ones. A replica (its TP group, whole) is judged once every one of its pods
has been Ready for at least the window W (one that just started is settling, not hung; a pod
without a transition time is judged); its series are its lead's (rank 0's), labelled `pod` and
`namespace`. A judged replica is
    - hung when it exported no series at all over W while Ready (its lead's scrape fails: a
      frozen rank 0), or when it finished no request over W (increase of its finished-request
      counter: 0) while its own queue says it holds requests it does not serve: requests
      running now (> 0), or waiting now (> 0), or the waiting queue grown over W. The gauges
      are read as they stand: a frozen engine stops updating them (vLLM V1's frontend takes
      them from the engine core's outputs), so a queue that froze holding running requests
      still tells, and one that froze empty (nothing running or waiting at the moment of the
      freeze, likely only at a very low rate) reads as idle: a hang this verdict misses. An
      engine that exports neither gauge is hung when it finished none while the model had
      demand (another replica progressing, or the gateway counting requests);
    - idle when it finished none and is not hung (nothing running or waiting, its queue not
      grown): at a low rate a healthy replica may finish none in a window;
    - progressing when it finished at least one request over W.
A healthy replica whose requests in flight all run longer than W finishes none within W: it
reads as hung, so W must exceed the longest request's latency.
The verdict fails (outcome "hung") naming each hung replica (namespace/model, group, pods,
nodes, and the figures that made it hung), and passes ("progressing") only when every judged
replica progressed or was idle, with demand seen. It never passes blind (outcome "unknown"): no
series for any replica of the model, no replica to judge, or no demand at all (no replica
finished a request or holds one, the gateway counted none: idle cannot be told from hung) is a
failed verdict; Prometheus not answering is NoData (the fetcher).

`fetch` (the thin fetcher) asks Prometheus, per lead pod over W:
    finished  sum by (namespace, pod) (increase(<vllm:request_success_total | sglang:num_requests_total>[W]))
    running   sum by (namespace, pod) (<vllm:num_requests_running | sglang:num_running_reqs>)
    waiting   sum by (namespace, pod) (<vllm:num_requests_waiting | sglang:num_queue_reqs>), and its
              delta over W
    demand    sum(increase(kilocard_sim_requests_total[W])) (the gateway's; none: not known)
each with model_name (and namespace) matchers, names and pod and namespace labels in whichever
spelling Prometheus stores (metric_names.locate).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from chaos.vocabulary import LAST_DISRUPTION
from probes import metric_names, slo
from probes.snapshot import ClusterSnapshot, PodView, whole_and_ready
from probes.verdict import NO_DATA, Contract, Verdict, failed, passed

FINISHED_NAMES = ("vllm:request_success_total", "sglang:num_requests_total")
RUNNING_NAMES = ("vllm:num_requests_running", "sglang:num_running_reqs")
WAITING_NAMES = ("vllm:num_requests_waiting", "sglang:num_queue_reqs")


@dataclass(frozen=True)
class Progress:
    """One replica's figures over the window, from its lead's series."""

    finished: float  # requests finished (the counter's increase)
    waiting: float | None = None  # requests waiting now
    waiting_change: float | None = None  # how much the queue grew (delta over the window)
    running: float | None = None  # requests in flight now (in the engine's batches)


@dataclass(frozen=True)
class Figures:
    """What Prometheus said of a model at `at`: per lead pod (namespace, pod name) with a finished
    counter, and the gateway's requests over the window (None: no gateway counter)."""

    at: float
    replicas: dict[tuple[str, str], Progress] = field(default_factory=dict)
    demand: float | None = None


CONTRACTS = (
    Contract(
        "no_hung_groups", "probe",
        asserts="every replica of the model judged (its pods all Ready for at least the window) progressed or "
                "was idle over the window, and the model had demand",
        time_zero=f"after {LAST_DISRUPTION}, the probe waits until its window lies wholly after time zero plus a "
                  "scrape; with none, now",
        interval="one window W ending now, per replica (never averaged over the model)",
        missing="a judged replica whose lead exports no series is hung (its scrape fails: a frozen rank 0); no "
                "series for any replica, no replica to judge, or no demand at all is unknown",
        exceptions="Prometheus or the apiserver not answering: unknown; bad PromQL, a 4xx or a bug: error",
        outcomes=(("progressing", "ok: every judged replica finished requests or held none, with demand"),
                  ("hung", "failed: a replica finished none while running or waiting requests (or, with no "
                           "gauges, while the model had demand), or exported nothing, named"),
                  ("unknown", "nothing to judge, or idle cannot be told from hung")),
        judge=("probes.hung.judge", "probes.hung._holds", "chaos.timezero.choose")),
)


# --- the judge (pure) -------------------------------------------------------------------------------
def judge(snapshot: ClusterSnapshot, figures: Figures, model: str, window: str = "30s",
          namespace: str | None = None) -> Verdict:
    """Fails naming every hung replica of `model`; passes only when every judged one progressed."""
    w = slo.seconds(window)
    groups: dict[str, list[PodView]] = defaultdict(list)
    for pod in sorted(snapshot.replicas(model, namespace), key=lambda pod: pod.rank):
        groups[pod.group].append(pod)
    ready = {k: m for k, m in groups.items() if whole_and_ready(m)}
    judged = {k: m for k, m in ready.items()
              if all(p.ready_since is None or figures.at - p.ready_since >= w for p in m)}
    settling = sorted(set(ready) - set(judged))
    seen = {k: figures.replicas.get((m[0].namespace, m[0].name)) for k, m in groups.items()}
    counted = {k: got for k in judged if (got := seen[k]) is not None}
    details: dict[str, Any] = {"model": model, "namespace": namespace, "window": window, "at": figures.at,
                               "demand": figures.demand, "settling": settling,
                               "replicas": [_figures(k, m, seen[k]) for k, m in sorted(judged.items())]}
    if not any(seen.values()):
        return failed(f"{model}: no series for any replica's lead (labels pod, namespace) over {window}: {NO_DATA}",
                      outcome="unknown", **details)
    if not judged:
        return failed(f"{model}: no replica Ready for {window} to judge ({len(settling)} settling): {NO_DATA}",
                      outcome="unknown", **details)
    progressed = {k for k, p in counted.items() if p.finished > 0}
    demand = any(p is not None and p.finished > 0 for p in seen.values()) or (figures.demand or 0) > 0
    hung = sorted([k for k in judged if k not in counted]
                  + [k for k, p in counted.items() if p.finished <= 0 and _holds(p, demand)])
    if hung:
        named = "; ".join(_named(k, judged[k], seen[k], window, len(progressed)) for k in hung)
        return failed(f"{model}: {len(hung)} of {len(judged)} Ready replicas hung: {named}", outcome="hung",
                      hung=hung, **details)
    if not demand:
        return failed(f"{model}: no demand over {window} (no replica finished a request or holds one, the "
                      f"gateway counted none): idle cannot be told from hung: {NO_DATA}", outcome="unknown",
                      **details)
    fewest = min(counted, key=lambda k: counted[k].finished)
    settled = f", {len(settling)} settling" if settling else ""
    idle = len(judged) - len(progressed)
    said = f" or held no request ({idle} idle, " if idle else " ("
    return passed(f"{model}: every Ready replica progressed over {window}{said}{len(judged)} judged{settled}; "
                  f"fewest finished: {fewest}, {counted[fewest].finished:.0f})", outcome="progressing", **details)


def _holds(p: Progress, demand: bool) -> bool:
    """Does a replica that finished nothing hold requests it does not serve? Its own queue says
    so (running, waiting, or waiting grown); an engine that exports neither gauge is judged by
    the model's demand. (At a low rate a healthy replica may finish none in a window: with
    nothing running or waiting, that is not a hang.)"""
    if p.running is None and p.waiting is None and p.waiting_change is None:
        return demand
    return (p.running or 0) > 0 or (p.waiting or 0) > 0 or (p.waiting_change or 0) > 0


def _figures(key: str, members: list[PodView], p: Progress | None) -> dict[str, Any]:
    return {"group": key, "pods": [m.name for m in members], "nodes": sorted({m.node or "?" for m in members}),
            "series": p is not None, "finished": None if p is None else p.finished,
            "running": None if p is None else p.running, "waiting": None if p is None else p.waiting,
            "waiting_change": None if p is None else p.waiting_change}


def _named(key: str, members: list[PodView], p: Progress | None, window: str, progressed: int) -> str:
    nodes = ", ".join(sorted({m.node or "?" for m in members}))
    where = (f"{members[0].namespace}/{members[0].model} group {key.split('/', 1)[-1]} "
             f"(pods {', '.join(m.name for m in members)} on {nodes})")
    if p is None:
        return f"{where}: no series over {window} while Ready (its lead's scrape fails)"
    held = [] if p.running is None else [f"running {p.running:.4g}"]
    if p.waiting is not None:
        held.append(f"waiting {p.waiting:.4g}" + ("" if p.waiting_change is None else f" ({p.waiting_change:+.4g})"))
    queue = ", ".join(held) or "no running or waiting gauge: judged by the model's demand"
    others = f" while {progressed} other(s) progressed" if progressed else ""
    return f"{where}: finished 0 over {window}, {queue}{others}"


# --- the thin fetcher ---------------------------------------------------------------------------------
def fetch(prom: Any, model: str, namespace: str | None = None, window: str = "30s",
          requests_metric: str = slo.GATEWAY_REQUESTS) -> Figures:
    """The model's per-replica figures over `window` now. A query that fails raises (NoData when
    Prometheus did not answer); a model without a finished counter has no replicas in it."""
    slo.seconds(window)
    at = time.time()
    try:
        gateway = metric_names.locate(prom, (requests_metric,), model, namespace)
        demand = next(iter(_by_pod(prom, f"sum(increase({gateway.name}{{{gateway.matchers}}}[{window}]))").values()),
                      None)
    except metric_names.MetricNotFound:
        demand = None
    try:
        counter = metric_names.locate(prom, FINISHED_NAMES, model, namespace)
    except metric_names.MetricNotFound:
        return Figures(at, {}, demand)
    by = (counter.namespace or "namespace", counter.pod_label("the hung-group figures"))

    def per_pod(expr: str) -> dict[tuple[str, str], float]:
        return _by_pod(prom, f"sum by ({', '.join(by)}) ({expr})", by)

    finished = per_pod(f"increase({counter.name}{{{counter.matchers}}}[{window}])")
    running: dict[tuple[str, str], float] = {}
    waiting: dict[tuple[str, str], float] = {}
    change: dict[tuple[str, str], float] = {}
    if gauge := _gauge(prom, RUNNING_NAMES, counter.matchers):
        running = per_pod(f"{gauge}{{{counter.matchers}}}")
    if gauge := _gauge(prom, WAITING_NAMES, counter.matchers):
        waiting = per_pod(f"{gauge}{{{counter.matchers}}}")
        change = per_pod(f"delta({gauge}{{{counter.matchers}}}[{window}])")
    return Figures(at, {k: Progress(v, waiting.get(k), change.get(k), running.get(k)) for k, v in finished.items()},
                   demand)


def _gauge(prom: Any, names: tuple[str, ...], matchers: str) -> str | None:
    """The first of `names` Prometheus stores (in any spelling); None: the engine exports none."""
    try:
        return metric_names.resolve_any(prom, names, matchers)
    except metric_names.MetricNotFound:
        return None


def _by_pod(prom: Any, query: str, by: tuple[str, str] = ("namespace", "pod")) -> dict[tuple[str, str], float]:
    """(namespace, pod) -> the value of an instant query (by those labels, as stored); NaN dropped."""
    try:
        rows = prom.custom_query(query)
    except Exception as exc:  # noqa: BLE001 - the client raises many kinds; query_failed sorts them
        raise metric_names.query_failed(f"PromQL {query!r}", exc) from None
    return {(r["metric"].get(by[0], ""), r["metric"].get(by[1], "")): float(r["value"][1]) for r in rows
            if not math.isnan(float(r["value"][1]))}
