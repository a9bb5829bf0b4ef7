"""ConfigMaps: the in-cluster ledger, a game day's gates, MindX DL's device-info; read as plain
JSON, changed by read-modify-write."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client

from chaos.kube.api import Api


class ConfigMaps(Api):
    def list_config_maps(self, namespace: str, label_selector: str | None = None) -> list[client.V1ConfigMap]:
        kwargs = {"label_selector": label_selector} if label_selector else {}
        result = self._call(f"list configmaps in {namespace}", self.core.list_namespaced_config_map, namespace,
                            **kwargs)
        return list(result.items)

    def read_config_map(self, namespace: str, name: str) -> dict[str, Any]:
        """A ConfigMap as plain JSON (NotFound if there is none)."""
        reply = self._call(f"get configmap {namespace}/{name}", self.core.read_namespaced_config_map, name,
                           namespace, _preload_content=False)
        return dict(json.loads(reply.data))

    def create_config_map(self, namespace: str, body: dict[str, Any]) -> client.V1ConfigMap:
        name = body["metadata"]["name"]
        return self._call(f"create configmap {namespace}/{name}", self.core.create_namespaced_config_map,
                          namespace, body)

    def patch_config_map(self, namespace: str, name: str, patch: dict[str, Any]) -> client.V1ConfigMap:
        return self._call(f"patch configmap {namespace}/{name}", self.core.patch_namespaced_config_map,
                          name, namespace, patch)

    def update_config_map(self, namespace: str, name: str, change: Callable[[dict[str, Any]], dict[str, Any] | None],
                          attempts: int = 20) -> dict[str, Any]:
        """Read-modify-write of a ConfigMap (`_read_modify_write`): `change(config_map)` returns the patch."""
        return self._read_modify_write(f"patch configmap {namespace}/{name}",
                                       lambda: self.read_config_map(namespace, name),
                                       lambda patch: self.patch_config_map(namespace, name, patch), change, attempts)

    def delete_config_map(self, namespace: str, name: str) -> None:
        self._call(f"delete configmap {namespace}/{name}", self.core.delete_namespaced_config_map, name, namespace)
