"""Chaos Toolkit probes: thin wrappers that fetch, run a pure probe and return its verdict as a
dict. Tolerance: {type: regex, target: verdict, pattern: "^ok$"} (built in; no extras needed).
No `from __future__ import annotations`: discovery reads the real annotations.

Configuration keys (optional): `kilocard_kubeconfig`, `kilocard_context`,
`kilocard_card_resource`, `kilocard_prometheus_url` (default http://127.0.0.1:6450, the testbed's).
"""

from typing import Any, Dict, List, Optional

from chaos.kube import Kube
from probes import capacity, placement, remediation, slo, snapshot, tp_groups

__all__ = [
    "capacity_fits",
    "room_to_reschedule",
    "placement_holds",
    "remediated_within",
    "tp_groups_whole",
    "ttft_p95_recovered_within",
    "ttft_p95_under",
]


def _kube(cfg: Optional[Dict[str, Any]]) -> Kube:
    cfg = cfg or {}
    return Kube.from_kubeconfig(cfg.get("kilocard_kubeconfig"), cfg.get("kilocard_context"))


def _snapshot(cfg: Optional[Dict[str, Any]], namespace: Optional[str]) -> snapshot.ClusterSnapshot:
    kube = _kube(cfg)
    try:
        return snapshot.fetch(kube, (cfg or {}).get("kilocard_card_resource", "nvidia.com/gpu"), namespace)
    finally:
        kube.close()


def _prom(cfg: Optional[Dict[str, Any]]) -> Any:
    return slo.connect((cfg or {}).get("kilocard_prometheus_url", "http://127.0.0.1:6450"))


def placement_holds(model: str, topology_key: str = "kubernetes.io/hostname", namespace: str = None,
                    max_skew: int = 1, configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """Replicas honour their anti-affinity (required: one per domain; else skew <= max_skew)."""
    return placement.anti_affinity(_snapshot(configuration, namespace), model, topology_key, namespace,
                                   max_skew).to_json()


def tp_groups_whole(model: str = None, namespace: str = None,
                    configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """Every TP group on as few nodes as its size needs, complete, not partially Ready."""
    return tp_groups.check(_snapshot(configuration, namespace), model, namespace).to_json()


def capacity_fits(model: str, qps: float, prompt_tokens: int, output_tokens: int, latency_seconds: float,
                  headroom: float = 0.25, losing_nodes: List[str] = None, namespace: str = None,
                  configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """The free KV cache of Ready replicas covers the demand with headroom (optionally after
    losing some nodes)."""
    demand = capacity.Demand(qps, prompt_tokens, output_tokens, latency_seconds)
    return capacity.fits(_snapshot(configuration, namespace), model, demand, headroom,
                         losing_nodes=tuple(losing_nodes or ()), namespace=namespace).to_json()


def room_to_reschedule(model: str, losing_nodes: List[str] = None, namespace: str = None,
                       configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """The model's Pending replicas, and those the loss of `losing_nodes` (default: of any one of
    its nodes) would displace, have nodes with room: free cards in one piece, taints tolerated,
    anti-affinity kept."""
    lost = tuple(losing_nodes) if losing_nodes is not None else None
    return capacity.room(_snapshot(configuration, namespace), model, lost, namespace=namespace).to_json()


def ttft_p95_under(model: str, threshold: float = 0.5, namespace: str = None, window: str = "1m",
                   configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """P95 time to first token of a model is under the threshold now (no samples: not healthy)."""
    prom = _prom(configuration)
    return slo.under(prom, slo.p95_ttft(prom, model, namespace, window), threshold).to_json()


def ttft_p95_recovered_within(model: str, deadline: float, threshold: float = 0.5, hold: float = 10.0,
                              namespace: str = None, window: str = "30s",
                              configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """P95 TTFT back under the threshold and held `hold` s, within `deadline` s."""
    prom = _prom(configuration)
    return slo.recovered_within(prom, slo.p95_ttft(prom, model, namespace, window), threshold, hold,
                                deadline).to_json()


def remediated_within(node: str, models: List[str], budget: float, namespace: str = None,
                      configuration: Dict[str, Any] = None) -> Dict[str, Any]:
    """The node is quarantined and drained, and the models' replicas Ready elsewhere, within budget."""
    kube = _kube(configuration)
    try:
        return remediation.within(kube, node, tuple(models), budget, namespace).to_json()
    finally:
        kube.close()
