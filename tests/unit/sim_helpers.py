"""Building simulator worlds from plain pod objects, and reading histograms like Prometheus."""

from __future__ import annotations

from typing import Any

from testbed.simulator.world import World


def pod(name: str, node: str, model: str, cards: int, ready: bool = True, labels: dict[str, str] | None = None,
        uid: str | None = None) -> dict[str, Any]:
    """A pod as the API's JSON carries it."""
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}",
                     "labels": {"kilocard.io/model": model, **(labels or {})}},
        "spec": {"nodeName": node, "containers": [{
            "name": "vllm", "args": ["--served-model-name", model],
            "resources": {"limits": {"nvidia.com/gpu": str(cards)}}}]},
        "status": {"conditions": [{"type": "Ready", "status": str(ready)}]},
    }


def world_with(*pods: dict[str, Any], nodes: int = 2) -> World:
    w = World("nvidia.com/gpu")
    for i in range(nodes):
        w.upsert_node(f"n{i}", 8)
    for p in pods:
        w.upsert_pod(p)
    return w


def quantile(q: float, bounds: tuple[float, ...], cumulative: list[float], total: float) -> float:
    """histogram_quantile as Prometheus computes it (linear within the bucket)."""
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, count in zip(bounds, cumulative, strict=True):
        if count >= rank:
            return lower + (bound - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = bound, count
    return bounds[-1]
