"""Everything else by kind: manifests applied server-side, objects by kind through the dynamic
client, namespaces, NetworkPolicies, Secrets, Events, DRA ResourceSlices."""

from __future__ import annotations

import base64
import time
from typing import Any

from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from chaos.errors import Conflict, NotFound
from chaos.kube.api import Api, kind_path
from chaos.kube.connection import FIELD_MANAGER


class Objects(Api):
    _dynamic: DynamicClient | None = None

    def server_version(self) -> str:
        return str(self._call("get version", self._get, "/version", {})["gitVersion"])

    @property
    def dynamic(self) -> DynamicClient:
        if self._dynamic is None:
            self._dynamic = self._call("discover API resources", DynamicClient, self.api_client)
        return self._dynamic

    def apply(self, obj: dict[str, Any], dry_run: bool = False) -> Any:
        """Server-side apply of one manifest (idempotent: applying twice changes nothing). With
        `dry_run` the apiserver validates and admits it, and stores nothing (kubectl's
        --dry-run=server)."""
        meta = obj.get("metadata", {})
        what = f"apply {obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name')}".replace(" /", " ")
        resource = self._call(what, self.dynamic.resources.get, api_version=obj["apiVersion"], kind=obj["kind"])
        return self._call(
            what,
            self.dynamic.server_side_apply,
            resource,
            body=obj,
            name=meta.get("name"),
            namespace=meta.get("namespace"),
            field_manager=FIELD_MANAGER,
            force_conflicts=True,
            **({"dry_run": "All"} if dry_run else {}),
        )

    def delete_object(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """DELETE any object by kind (NotFound when it is already gone)."""
        what = f"delete {kind} {namespace + '/' if namespace else ''}{name}"
        resource = self._call(what, self.dynamic.resources.get, api_version=api_version, kind=kind)
        self._call(what, self.dynamic.delete, resource, name=name, namespace=namespace)

    def get_object(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        what = f"get {kind} {namespace + '/' if namespace else ''}{name}"
        resource = self._call(what, self.dynamic.resources.get, api_version=api_version, kind=kind)
        return self._call(what, self.dynamic.get, resource, name=name, namespace=namespace)

    def list_objects(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Every object of a kind (in `namespace`, else everywhere) as plain JSON; NotFound when
        the cluster serves no such kind (a CRD not installed)."""
        what = f"list {kind} in {namespace or 'every namespace'}"
        try:
            resource = self._call(what, self.dynamic.resources.get, api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            raise NotFound(f"{what}: the cluster serves no {kind} of {api_version}") from None
        found = self._call(what, self.dynamic.get, resource, namespace=namespace)
        return [item.to_dict() for item in found.items]

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}
        self._call(f"create namespace {name}", self._send, "POST", kind_path("namespaces"), body)

    def delete_namespace(self, name: str) -> None:
        self._call(f"delete namespace {name}", self._send, "DELETE", kind_path("namespaces", name=name), {})

    def namespace_labels(self, name: str) -> dict[str, str]:
        return dict(self._namespace(name)["metadata"].get("labels") or {})

    def _namespace(self, name: str) -> dict[str, Any]:
        return self._call(f"get namespace {name}", self._get, kind_path("namespaces", name=name), {})

    def ensure_namespace(self, name: str) -> None:
        """Create the namespace unless it exists (a least-privilege caller may only read it)."""
        try:
            self._namespace(name)
        except NotFound:
            try:
                self.create_namespace(name)
            except Conflict:
                pass

    def create_network_policy(self, namespace: str, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        self._call(f"create networkpolicy {namespace}/{name}", self._send, "POST",
                   kind_path("networkpolicies", namespace), body)

    def delete_network_policy(self, namespace: str, name: str) -> None:
        self._call(f"delete networkpolicy {namespace}/{name}", self._send, "DELETE",
                   kind_path("networkpolicies", namespace, name), {})

    def list_network_policies(self, namespace: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        return self.list_raw(f"list networkpolicies in {namespace}", kind_path("networkpolicies", namespace),
                             label_selector)

    def read_service_account(self, namespace: str, name: str) -> dict[str, Any]:
        return self._call(f"get serviceaccount {namespace}/{name}", self._get,
                          kind_path("serviceaccounts", namespace, name), {})

    def read_secret(self, namespace: str, name: str) -> dict[str, bytes]:
        """The decoded data of a Secret."""
        secret = self._call(f"get secret {namespace}/{name}", self._get, kind_path("secrets", namespace, name), {})
        return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}

    def record_event(self, kind: str, name: str, namespace: str, reason: str, message: str, component: str,
                     uid: str | None = None, event_type: str = "Normal") -> None:
        """A core Event about an object, as controllers write them (what `kilocard record` reads back)."""
        at = time.time()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
        body = {"metadata": {"generateName": f"{name}.", "namespace": namespace},
                "involvedObject": {"kind": kind, "name": name, "namespace": namespace if kind != "Node" else "",
                                   **({"uid": uid} if uid else {})},
                "reason": reason, "message": message, "type": event_type, "source": {"component": component},
                "firstTimestamp": now, "lastTimestamp": now, "count": 1,
                # eventTime keeps the microseconds (the timestamps above have whole seconds).
                "eventTime": now.replace("Z", f".{int(at % 1 * 1e6):06d}Z"), "action": reason,
                "reportingComponent": component, "reportingInstance": component}
        self._call(f"create event {reason} on {kind} {name}", self._send, "POST", kind_path("events", namespace), body)

    def list_resource_slices(self, driver: str, node: str | None = None) -> list[dict[str, Any]]:
        """The driver's ResourceSlices (resource.k8s.io/v1) as plain JSON, on `node` only if given."""
        fields = ",".join([f"spec.driver={driver}", *([f"spec.nodeName={node}"] if node else [])])
        return self.list_raw(f"list resourceslices of {driver}", kind_path("resourceslices"),
                             field_selector=fields)
