"""Chaos Toolkit probes: thin wrappers that fetch, run a pure probe and return its verdict as a
dict. Tolerance: {type: regex, target: verdict, pattern: "^ok$"} (built in; no extras needed).
No `from __future__ import annotations`: discovery reads the real annotations.

Configuration keys (optional): `kilocard_kubeconfig`, `kilocard_context`,
`kilocard_card_resource`, `kilocard_prometheus_url` (default http://127.0.0.1:6450, the testbed's),
`kilocard_run_id` and `kilocard_ledger_dir` (where an SLO probe reads when the run's fault was
applied, unless given `fault_at`), `kilocard_scrape_interval` (seconds; else read from Prometheus).
"""

import functools
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from chaos import ledger
from chaos.actions import run_id_of
from chaos.errors import KubeError
from chaos.kube import Kube
from chaos.vocabulary import LOCAL_TESTBED_PROMETHEUS, local_testbed_kubeconfig
from probes import capacity, device_taints, hung, metric_names, placement, remediation, slo, snapshot, tp_groups
from probes.errors import NoData, ProbeError
from probes.verdict import NO_DATA, failed

__all__ = [
    "capacity_fits",
    "devices_tainted_within",
    "no_hung_groups",
    "placement_holds",
    "remediated_within",
    "room_to_reschedule",
    "slo_recovered_within",
    "slo_under",
    "tp_groups_recovered_within",
    "tp_groups_whole",
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
            return failed(f"no data: {exc}: {NO_DATA}", outcome="unknown").to_json()
    return judged


def _kube(cfg: Optional[Dict[str, Any]]) -> Kube:
    cfg = cfg or {}
    return Kube.connect(cfg.get("kilocard_kubeconfig"), cfg.get("kilocard_context"), local_testbed_kubeconfig())


def _snapshot(cfg: Optional[Dict[str, Any]], namespace: Optional[str]) -> snapshot.ClusterSnapshot:
    kube = _kube(cfg)
    try:
        return snapshot.fetch(kube, (cfg or {}).get("kilocard_card_resource"), namespace)
    finally:
        kube.close()


PROMETHEUS_URL = LOCAL_TESTBED_PROMETHEUS
XID_FAULT = "gpu-xid"  # the fault kind whose records devices_tainted_within judges (chaos.agent.kinds.xid)


def _prom(cfg: Optional[Dict[str, Any]]) -> Any:
    return slo.connect((cfg or {}).get("kilocard_prometheus_url", PROMETHEUS_URL))


@_unknown_without_data
def placement_holds(model: str, topology_key: str = "kubernetes.io/hostname", namespace: str = None,
                    max_skew: int = 1, guaranteed: bool = False,
                    configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """Replicas honour their anti-affinity (required: one per domain; else skew <= max_skew);
    with `guaranteed`, only a required rule (anti-affinity or DoNotSchedule spread) passes."""
    return placement.anti_affinity(_snapshot(configuration, namespace), model, topology_key, namespace,
                                   max_skew, guaranteed).to_json()


@_unknown_without_data
def tp_groups_whole(model: str = None, namespace: str = None,
                    configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """Every TP group on as few nodes as its size needs, complete, not partially Ready."""
    return tp_groups.check(_snapshot(configuration, namespace), model, namespace).to_json()


@_unknown_without_data
def tp_groups_recovered_within(model: str, budget: float, namespace: str = None,
                               configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """Within `budget` s of the run's first fault (from its ledger), every TP group of the model
    is whole, Ready, off every node the run's faults hit as a node, and as many pods as its workloads ask
    for: a group still waiting for a rank stuck on a dead node fails, a killed replica not yet
    replaced fails, and none is judged before the fault could show."""
    cfg = configuration or {}
    kube = _kube(cfg)
    try:
        records = _applied(cfg, kube)
        fault_at = min(r.applied_at for r in records)
        return tp_groups.recovered_within(kube, model, _faulted_nodes(records), fault_at, budget, namespace,
                                          cfg.get("kilocard_card_resource")).to_json()
    finally:
        kube.close()


@_unknown_without_data
def capacity_fits(model: str, qps: float, prompt_tokens: int, output_tokens: int, latency_seconds: float,
                  headroom: float = 0.25, losing_nodes: List[str] = None, namespace: str = None,
                  configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """The free KV cache of Ready replicas covers the demand with headroom (optionally after
    losing some nodes)."""
    demand = capacity.Demand(qps, prompt_tokens, output_tokens, latency_seconds)
    return capacity.fits(_snapshot(configuration, namespace), model, demand, headroom,
                         losing_nodes=tuple(losing_nodes or ()), namespace=namespace).to_json()


@_unknown_without_data
def room_to_reschedule(model: str, losing_nodes: List[str] = None, namespace: str = None,
                       configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """The model's Pending replicas, and those the loss of `losing_nodes` (default: of any one of
    its nodes) would displace, have nodes with room: free cards in one piece, taints tolerated,
    anti-affinity kept."""
    lost = tuple(losing_nodes) if losing_nodes is not None else None
    return capacity.room(_snapshot(configuration, namespace), model, lost, namespace=namespace).to_json()


def _indicator(prom: Any, indicator: str, model: str, namespace: Optional[str], window: str,
               per: str, query: Optional[str]) -> slo.Indicator:
    if per not in ("replica", "model"):
        raise ProbeError(f"per: expected 'replica' or 'model', got {per!r}")
    return slo.indicator(prom, indicator, model, namespace, window, by="pod" if per == "replica" else None,
                         query=query)


@_unknown_without_data
def slo_under(model: str, indicator: str = "ttft_p95", threshold: float = 0.5, per: str = "replica",
              namespace: str = None, window: str = "1m", query: str = None,
              configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """The indicator (ttft_p95, itl_p95, error_ratio, promql) is under the threshold now, for the
    worst replica (per: replica) or the model (per: model); no samples is not healthy."""
    prom = _prom(configuration)
    return slo.under(prom, _indicator(prom, indicator, model, namespace, window, per, query), threshold).to_json()


@_unknown_without_data
def slo_recovered_within(model: str, deadline: float, indicator: str = "ttft_p95", threshold: float = 0.5,
                         hold: float = 10.0, per: str = "replica", expect_impact: bool = True,
                         namespace: str = None, window: str = "30s", query: str = None, fault_at: float = None,
                         configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """After the fault (`fault_at`, else when the run's last fault was applied, from its ledger):
    with `expect_impact`, the indicator breaches the threshold and comes back under it, held
    `hold` s, within `deadline` s of the fault; never judged healthy before the metric could show
    the fault (rate window + scrape interval). "No impact observed" is its own outcome, not a pass."""
    cfg = configuration or {}
    prom = _prom(cfg)
    ind = _indicator(prom, indicator, model, namespace, window, per, query)
    if fault_at is None:
        fault_at = _fault_time(cfg)
    scrape = float(cfg["kilocard_scrape_interval"]) if cfg.get("kilocard_scrape_interval") else slo.scrape_interval(
        cfg.get("kilocard_prometheus_url", PROMETHEUS_URL), _job(prom, ind))
    recovery = slo.Recovery(threshold, deadline, hold, ind.window_seconds + scrape, expect_impact, scrape)
    verdict = slo.recovered_within(prom, ind, fault_at, recovery, interval=min(scrape, 5.0))
    return {**verdict.to_json(), "indicator": indicator, "query": ind.query, "per": per}


@_unknown_without_data
def no_hung_groups(model: str, namespace: str = None, window: str = "30s",
                   configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """No TP group of the model is hung: every replica whose pods have all been Ready for `window`
    finished requests over it while the model had demand. One that finished none, or whose lead
    exports no series (a frozen rank 0), is named; no series, or no demand, is not a pass. After
    a fault of this run, it judges only once the window lies wholly after the fault (plus a
    scrape): a window still holding the requests served before the stall would pass blind."""
    cfg = configuration or {}
    applied = _applied_times(cfg)
    if applied:
        scrape = float(cfg["kilocard_scrape_interval"]) if cfg.get("kilocard_scrape_interval") else \
            slo.scrape_interval(cfg.get("kilocard_prometheus_url", PROMETHEUS_URL))
        time.sleep(max(0.0, max(applied) + slo.seconds(window) + scrape - time.time()))
    figures = hung.fetch(_prom(configuration), model, namespace, window)
    return hung.judge(_snapshot(configuration, namespace), figures, model, window, namespace).to_json()


def _applied_times(cfg: Dict[str, Any]) -> List[float]:
    """When this run's faults were applied (none yet: an empty list, not an error)."""
    kube = _kube(cfg)
    try:
        return [r.applied_at for r in _records(cfg, kube) if r.applied_at]
    finally:
        kube.close()


def _ledger_dir(cfg: Dict[str, Any]) -> Path:
    return Path(cfg["kilocard_ledger_dir"]) if cfg.get("kilocard_ledger_dir") else ledger.default_dir()


def _fault_time(cfg: Dict[str, Any]) -> float:
    kube = _kube(cfg)
    try:
        at = max(r.applied_at for r in _applied(cfg, kube))
    finally:
        kube.close()
    if at > time.time():
        raise ProbeError(f"run {run_id_of(cfg)}: fault applied in the future ({at}); check the clocks")
    return at


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
def remediated_within(models: List[str], budget: float, node: str = None, namespace: str = None,
                      path: str = "quarantine", configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """Within budget, on `path`: `quarantine` (the node cordoned and tainted or labelled, and
    drained) or `out-of-service` (a lost node tainted out of service or deleted, its stuck pods
    removed, TP groups whole); either way the models' replicas Ready elsewhere. `node` defaults
    to the one node the run's faults hit (from its ledger)."""
    if path not in remediation.PATHS:
        raise ProbeError(f"path: expected one of {', '.join(remediation.PATHS)}, got {path!r}")
    cfg = configuration or {}
    kube = _kube(cfg)
    try:
        if node is None:
            hit = sorted(_faulted_nodes(_applied(cfg, kube)))
            if len(hit) != 1:
                raise ProbeError(f"node: the run's faults hit {len(hit)} nodes ({', '.join(hit) or 'none'}); "
                                 "name the one whose remediation to judge")
            node = hit[0]
        cards = cfg.get("kilocard_card_resource")
        return remediation.within(kube, node, tuple(models), budget, namespace, cards, path).to_json()
    finally:
        kube.close()


@_unknown_without_data
def devices_tainted_within(budget: float, driver: str = "gpu.nvidia.com",
                           configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """Within `budget` s of each XID fault of the run still applied (from its ledger), the DRA
    driver has tainted that card's device (`gpu-<card>` in its node's ResourceSlices) NoSchedule or
    NoExecute: the per-card twin of remediated_within. Waits while a card is untainted and within
    budget; names each card untainted when its budget ran out, or tainted late. A run with no XID
    fault applied is not a pass (outcome unknown)."""
    cfg = configuration or {}
    kube = _kube(cfg)
    try:
        faults = [device_taints.XidFault(str(r.target["node"]), int(r.target["card"]), r.applied_at)
                  for r in _records(cfg, kube) if r.kind == XID_FAULT and r.state == "applied" and r.applied_at]
        return device_taints.within(kube, faults, budget, driver).to_json()
    finally:
        kube.close()


def _faulted_nodes(records: List[ledger.Record]) -> set:
    """The nodes the faults hit as nodes (a card, its network, its kubelet), not the nodes of the
    pods a kill ended: a killed pod's replacement may well come back on its old node."""
    return {str(r.target["node"]) for r in records if r.target.get("node") and "name" not in r.target}


def _records(cfg: Dict[str, Any], kube: Kube) -> List[ledger.Record]:
    """The run's ledger: this process's files, which every fault is written to before it is
    applied, else (a probe in another process) the cluster's markers too."""
    directory, run_id = _ledger_dir(cfg), run_id_of(cfg)
    return ledger.records(None, directory, run_id) or ledger.records(kube, directory, run_id)


def _applied(cfg: Dict[str, Any], kube: Kube) -> List[ledger.Record]:
    """The run's faults applied so far (its ledger); none is an error: nothing to time from."""
    records = [r for r in _records(cfg, kube) if r.applied_at]
    if not records:
        raise ProbeError(f"run {run_id_of(cfg)} has applied no fault yet: nothing to time a recovery from")
    return records
