"""ConfigMaps: the in-cluster ledger, a game day's gates, MindX DL's device-info; read as plain
JSON, changed by read-modify-write."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chaos.kube.api import MERGE_PATCH, Api, kind_path


class ConfigMaps(Api):
    """Every verb plain JSON on the bulk connection: a run's ledger is written and read here, and
    the typed client would cost its API module's import (most of a run's start-up)."""

    def list_config_maps(self, namespace: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        return self.list_raw(f"list configmaps in {namespace}", kind_path("configmaps", namespace), label_selector)

    def read_config_map(self, namespace: str, name: str) -> dict[str, Any]:
        """A ConfigMap (NotFound if there is none)."""
        return self._call(f"get configmap {namespace}/{name}", self._get, kind_path("configmaps", namespace, name), {})

    def create_config_map(self, namespace: str, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        self._call(f"create configmap {namespace}/{name}", self._send, "POST", kind_path("configmaps", namespace), body)

    def patch_config_map(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """A JSON merge patch (RFC 7386): maps merge, a null removes its key."""
        self._call(f"patch configmap {namespace}/{name}", self._send, "PATCH",
                   kind_path("configmaps", namespace, name), patch, MERGE_PATCH)

    def update_config_map(self, namespace: str, name: str, change: Callable[[dict[str, Any]], dict[str, Any] | None],
                          attempts: int = 20) -> dict[str, Any]:
        """Read-modify-write of a ConfigMap (`_read_modify_write`): `change(config_map)` returns the patch."""
        return self._read_modify_write(f"patch configmap {namespace}/{name}",
                                       lambda: self.read_config_map(namespace, name),
                                       lambda patch: self.patch_config_map(namespace, name, patch), change, attempts)

    def delete_config_map(self, namespace: str, name: str) -> None:
        self._call(f"delete configmap {namespace}/{name}", self._send, "DELETE",
                   kind_path("configmaps", namespace, name), {})

