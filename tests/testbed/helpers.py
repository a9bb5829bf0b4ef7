from __future__ import annotations

from collections import Counter
from typing import Any

from chaos.kube import Kube, pod_ready


def ready_pods(kube: Kube, namespace: str, model: str) -> list[Any]:
    return [p for p in kube.list_pods(namespace, f"kilocard.io/model={model}").items if pod_ready(p)]


def wait_ready(kube: Kube, namespace: str, model: str, count: int, timeout: float = 60) -> list[Any]:
    """Block (on a watch) until exactly `count` pods of `model` are Ready; return them."""
    pods = kube.wait_until(
        "pods", lambda items: sum(pod_ready(p) for p in items) == count, timeout=timeout,
        namespace=namespace, label_selector=f"kilocard.io/model={model}")
    return [p for p in pods if pod_ready(p)]


def per_node(pods: list[Any]) -> Counter[str]:
    return Counter(p.spec.node_name for p in pods)


def workload(objects: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """The Deployment of `model` among fleet manifests."""
    return next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == model)
