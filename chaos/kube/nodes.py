"""Nodes: read (typed, or plain JSON), created on the bulk connection, patched, changed by
read-modify-write."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client

from chaos.kube.api import STRATEGIC_MERGE_PATCH, Api, kind_path


class Nodes(Api):
    def list_nodes(self, label_selector: str | None = None) -> list[client.V1Node]:
        kwargs = {"label_selector": label_selector} if label_selector else {}
        return list(self._call("list nodes", self.core.list_node, **kwargs).items)

    def list_nodes_raw(self, label_selector: str | None = None, cached: bool = False) -> list[dict[str, Any]]:
        """Nodes as plain JSON (see `list_raw`)."""
        return self.list_raw("list nodes", kind_path("nodes"), label_selector, None, cached)

    def read_node(self, name: str) -> client.V1Node:
        return self._call(f"get node {name}", self.core.read_node, name)

    def create_node(self, body: dict[str, Any]) -> None:
        """Create a node on the bulk connection, the reply not decoded (a testbed creates thousands)."""
        self._call(f"create node {body['metadata']['name']}", self._send, "POST", kind_path("nodes"), body)

    def patch_node(self, name: str, patch: dict[str, Any], resource_version: str | None = None) -> None:
        """Strategic-merge patch; with `resource_version`, only if the node has not changed since
        it was read (else Conflict: read again and recompute)."""
        if resource_version is not None:
            patch = {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": resource_version}}
        self._call(f"patch node {name}", self._send, "PATCH", kind_path("nodes", name=name), patch,
                   STRATEGIC_MERGE_PATCH)

    def read_node_raw(self, name: str) -> dict[str, Any]:
        """A node as the API's plain JSON (taints keep `timeAdded`, which typed models rename)."""
        return self._call(f"get node {name}", self._get, kind_path("nodes", name=name), {})

    def update_node(self, name: str, change: Callable[[dict[str, Any]], dict[str, Any] | None],
                    attempts: int = 20) -> dict[str, Any]:
        """Read-modify-write of a node (`_read_modify_write`): `change(node)` returns the patch."""
        return self._read_modify_write(f"patch node {name}", lambda: self.read_node_raw(name),
                                       lambda patch: self.patch_node(name, patch), change, attempts)

    def patch_node_status(self, name: str, patch: dict[str, Any]) -> None:
        self._call(f"patch node {name} status", self._send, "PATCH", kind_path("nodes", name=name, sub="status"),
                   patch, STRATEGIC_MERGE_PATCH)

    def delete_node(self, name: str) -> None:
        self._call(f"delete node {name}", self._send, "DELETE", kind_path("nodes", name=name), {})


def node_ready(node: client.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
