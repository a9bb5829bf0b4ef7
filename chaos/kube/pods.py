"""Pods: listed and read as plain JSON on the bulk connection (typed where a caller still wants a
model), killed by DELETE (many at once) or through the Eviction API."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from chaos.errors import KubeError
from chaos.kube.api import STRATEGIC_MERGE_PATCH, Api, kind_path


class Pods(Api):
    def list_pods(
        self, namespace: str | None = None, label_selector: str | None = None, field_selector: str | None = None
    ) -> client.V1PodList:
        kwargs = {k: v for k, v in (("label_selector", label_selector), ("field_selector", field_selector)) if v}
        if namespace:
            return self._call(f"list pods in {namespace}", self.core.list_namespaced_pod, namespace, **kwargs)
        return self._call("list pods", self.core.list_pod_for_all_namespaces, **kwargs)

    def list_pods_raw(
        self, namespace: str | None = None, label_selector: str | None = None, field_selector: str | None = None,
        cached: bool = False, metadata_only: bool = False,
    ) -> list[dict[str, Any]]:
        """Pods as plain JSON (see `list_raw`)."""
        return self.list_raw(f"list pods in {namespace}" if namespace else "list pods", kind_path("pods", namespace),
                             label_selector, field_selector, cached, metadata_only)

    def read_pod(self, namespace: str, name: str) -> client.V1Pod:
        return self._call(f"get pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace)

    def read_pod_raw(self, namespace: str, name: str) -> dict[str, Any]:
        """A pod as the API's plain JSON (its status' containerIDs as the runtime spells them), on
        the bulk connection (never the typed client's import)."""
        return self._call(f"get pod {namespace}/{name}", self._get, kind_path("pods", namespace, name), {})

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self._call(f"patch pod {namespace}/{name}", self._send, "PATCH", kind_path("pods", namespace, name), patch,
                   STRATEGIC_MERGE_PATCH)

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None, uid: str | None = None) -> None:
        """DELETE a pod; with `uid`, only that incarnation (not a same-named replacement)."""
        self._call(f"delete pod {namespace}/{name}", self._send, *_pod_delete(namespace, name, grace_seconds, uid))

    def delete_pods(self, pods: list[tuple[str, str, str | None]], grace_seconds: int | None = None
                    ) -> list[KubeError | None]:
        """DELETE many (namespace, name, uid) pods at once (`send_all`); one outcome per pod."""
        return self.send_all("delete pods", [_pod_delete(ns, name, grace_seconds, uid) for ns, name, uid in pods])

    def evict_pod(self, namespace: str, name: str, uid: str | None = None, grace_seconds: int | None = None) -> None:
        """Evict through the Eviction API; TooManyRequests means a PDB (or rate limit) refused it."""
        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        options: dict[str, Any] = {}
        if uid:
            options["preconditions"] = {"uid": uid}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        if options:
            body["deleteOptions"] = options
        self._call(f"evict pod {namespace}/{name}", self._send, "POST",
                   kind_path("pods", namespace, name, "eviction"), body, retry_429=False)


def _pod_delete(namespace: str, name: str, grace_seconds: int | None, uid: str | None
                ) -> tuple[str, str, dict[str, Any]]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if grace_seconds is not None:
        body["gracePeriodSeconds"] = grace_seconds
    if uid:
        body["preconditions"] = {"uid": uid}
    return "DELETE", kind_path("pods", namespace, name), body


def pod_ready(pod: client.V1Pod) -> bool:
    if pod.metadata.deletion_timestamp is not None:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
