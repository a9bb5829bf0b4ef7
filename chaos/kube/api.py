"""The connection every verb module builds on: one cluster's API client, its calls (`_call`:
errors as chaos.errors, retries as chaos.kube.retry says), batches with bounded concurrency, the
bulk HTTP/2 connection's requests, plain-JSON lists, and the one read-modify-write loop."""

from __future__ import annotations

import functools
import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self, TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config import incluster_config
from tenacity import Retrying, retry_if_exception, stop_after_delay

from chaos.errors import Conflict, KubeError, SpecError
from chaos.kube.bulk import Bulk
from chaos.kube.connection import (
    MAX_IN_FLIGHT,
    SERVICE_ACCOUNT_DIR,
    NotingREST,
    is_file,
    kubeconfig_named,
    tuned,
    user_agent,
)
from chaos.kube.retry import cause, count_retry, counted, kube_error, retry_after, retryable, wait
from chaos.vocabulary import local_testbed_kubeconfig, quiet_thread

T = TypeVar("T")
A = TypeVar("A")
# Items per LIST request: kubectl's and the informers' page. At 100,000 cards a list of nodes is
# 60 MB of JSON in one piece without it.
LIST_PAGE = 500
MERGE_PATCH = "application/merge-patch+json"  # RFC 7386, for a patch sent as plain JSON
# What the generated client sends a mapping patch of a built-in kind as: lists merge by their
# merge key (a node's conditions by type), as kubectl's patches do.
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
# A list's items with their metadata only (uid, labels, deletionTimestamp), as the informers'
# metadata client asks: about half a pod's bytes, and nothing of its spec or status to decode.
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
_in_batch = threading.local()
# Each kind a verb or a watch names, by its API group's prefix, and whether it lives in a namespace.
KINDS = {"pods": ("/api/v1", True), "nodes": ("/api/v1", False), "namespaces": ("/api/v1", False),
         "configmaps": ("/api/v1", True), "events": ("/api/v1", True), "serviceaccounts": ("/api/v1", True),
         "secrets": ("/api/v1", True), "poddisruptionbudgets": ("/apis/policy/v1", True),
         "networkpolicies": ("/apis/networking.k8s.io/v1", True), "resourceslices": ("/apis/resource.k8s.io/v1", False)}


def kind_path(kind: str, namespace: str | None = None, name: str = "", sub: str = "") -> str:
    """The one spelling of a kind's path: its collection in `namespace` (or across all, with
    None), one object by `name`, or a subresource of it."""
    prefix, namespaced = KINDS[kind]
    where = f"{prefix}/namespaces/{namespace}/{kind}" if namespaced and namespace else f"{prefix}/{kind}"
    return where + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")


def mark_batch_worker() -> None:
    _in_batch.active = True
    quiet_thread()


class Api:
    """A connection to one cluster: its API client (typed APIs made on first use), the bulk
    connection, and the calls every verb goes through."""

    def __init__(self, api_client: client.ApiClient, retry_seconds: float = 30.0) -> None:
        # Who is calling, for the cluster's audit log: kilocard, and which part of it.
        api_client.user_agent = user_agent()
        api_client.rest_client = NotingREST(api_client.configuration)
        self.api_client = api_client
        self.context: str | None = None  # the kubeconfig context; None in-cluster
        self.source = "a client made by hand"  # where the connection came from, as reports name it
        self._retry_seconds = retry_seconds
        self._batch_pool: ThreadPoolExecutor | None = None
        self._batch_lock = threading.Lock()
        self._bulk: Bulk | None = None

    # The typed APIs are made on first use: importing CoreV1Api's module takes a second, which a
    # fresh `kilocard fault pod-kill` (lists and DELETEs on the bulk connection) never needs.
    @functools.cached_property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api_client)

    @functools.cached_property
    def policy(self) -> client.PolicyV1Api:
        return client.PolicyV1Api(self.api_client)

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str] | None = None, context: str | None = None, pool: int = MAX_IN_FLIGHT
    ) -> Self:
        configuration = client.Configuration()
        try:
            config.load_kube_config(
                config_file=str(path) if path else None, context=context, client_configuration=configuration
            )
        except (config.ConfigException, OSError) as exc:
            files = [str(path)] if path else [f for f in os.environ.get("KUBECONFIG", "").split(os.pathsep) if f]
            files = files or ["~/.kube/config"]
            missing = all(not is_file(f) for f in files)  # the client's own words are "No configuration found"
            raise SpecError(f"kubeconfig {os.pathsep.join(files)}: {'no such file' if missing else exc}") from None
        kube = cls(client.ApiClient(tuned(configuration, pool)))
        if context is None:
            _contexts, active = config.list_kube_config_contexts(config_file=str(path) if path else None)
            context = (active or {}).get("name")
        kube.context = context
        named = Path(path or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config").expanduser()
        testbed = local_testbed_kubeconfig()
        kube.source = "the local testbed" if testbed is not None and named.resolve() == Path(testbed).resolve() \
            else f"kubeconfig {named}"
        return kube

    @classmethod
    def in_cluster(cls, account_dir: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR, pool: int = MAX_IN_FLIGHT) -> Self:
        """The pod's ServiceAccount (a runner Job, the reaper CronJob): the token and CA that
        Kubernetes mounts, and KUBERNETES_SERVICE_HOST/PORT. The token is re-read as it rotates."""
        configuration = client.Configuration()
        account = Path(account_dir)
        try:
            incluster_config.InClusterConfigLoader(str(account / "token"), str(account / "ca.crt")).load_and_set(
                configuration)
        except config.ConfigException as exc:
            raise SpecError(f"in-cluster configuration ({account}): {exc}") from None
        kube = cls(client.ApiClient(tuned(configuration, pool)))
        kube.source = "the pod's ServiceAccount (in-cluster)"
        return kube

    @classmethod
    def connect(cls, kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None,
                fallback: str | os.PathLike[str] | None = None) -> Self:
        """The cluster the user means: `kubeconfig` if given, else $KUBECONFIG or ~/.kube/config,
        else the pod's ServiceAccount when running in a cluster, else `fallback` (the local testbed's
        kubeconfig), else a SpecError saying what was tried."""
        if kubeconfig_named(kubeconfig):
            return cls.from_kubeconfig(kubeconfig, context)
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            return cls.in_cluster(os.environ.get("KILOCARD_SERVICE_ACCOUNT_DIR", SERVICE_ACCOUNT_DIR))
        if fallback and Path(fallback).is_file():
            return cls.from_kubeconfig(fallback, context)
        raise SpecError("no cluster: pass --kubeconfig, set $KUBECONFIG, create ~/.kube/config, run in a pod, "
                        "or start the local testbed ('kilocard testbed up')")

    def target(self) -> dict[str, str]:
        """Which cluster this is, as every summary, journal and report names it."""
        return {"source": self.source, "context": self.context or "", "server": str(self.api_client.configuration.host)}

    def close(self) -> None:
        if self._batch_pool is not None:
            self._batch_pool.shutdown()
        if self._bulk is not None:
            self._bulk.close()
            self._bulk = None
        self.api_client.close()

    def batch(self, fn: Callable[[A], T], items: Iterable[A]) -> list[T]:
        """`fn` over `items`, at most MAX_IN_FLIGHT at once, results in order. The workers live as
        long as the connection: starting a hundred threads per batch costs more than the calls.
        A batch started inside a batch worker runs in that worker (no pool deadlock)."""
        todo = list(items)
        if len(todo) <= 1 or getattr(_in_batch, "active", False):
            return [fn(x) for x in todo]
        with self._batch_lock:
            if self._batch_pool is None:
                self._batch_pool = ThreadPoolExecutor(MAX_IN_FLIGHT, thread_name_prefix="kube-batch",
                                                      initializer=mark_batch_worker)
        return list(self._batch_pool.map(fn, todo))

    def _call(self, what: str, fn: Callable[..., T], *args: Any, retry_429: bool = True, **kwargs: Any) -> T:
        def attempt() -> T:
            try:
                return fn(*args, **kwargs)
            except ApiException as exc:
                if exc.status == 429 and not retry_429:
                    exc._kilocard_no_retry = True  # type: ignore[attr-defined]
                raise

        retrying = Retrying(
            retry=retry_if_exception(retryable),
            wait=wait,
            before_sleep=count_retry,
            stop=stop_after_delay(self._retry_seconds),
            reraise=True,
        )
        try:
            return retrying(attempt)
        except (ApiException, urllib3.exceptions.HTTPError, ConnectionError) as exc:
            raise kube_error(exc, what) from None

    def _h2(self) -> Bulk:
        with self._batch_lock:
            if self._bulk is None:
                self._bulk = Bulk(self.api_client.configuration)
            return self._bulk

    def _headers(self) -> dict[str, str]:
        configuration = self.api_client.configuration
        headers = {**self.api_client.default_headers, "Content-Type": "application/json",
                   "Accept": "application/json"}
        token = configuration.get_api_key_with_prefix("BearerToken") or configuration.get_api_key_with_prefix(
            "authorization")
        if token:
            headers["Authorization"] = token
        return headers

    def _send(self, method: str, path: str, body: dict[str, Any], content_type: str = "application/json") -> None:
        """A bare request on the bulk connection, with the client's credentials: the generated
        client spends more CPU building and decoding a call than the apiserver spends serving it."""
        headers = {**self._headers(), "Content-Type": content_type}
        (reply,) = self._h2().request_all([(method, path, json.dumps(body))], headers)
        if isinstance(reply, Exception):
            raise reply

    def send_all(self, what: str, requests: list[tuple[str, str, dict[str, Any]]]) -> list[KubeError | None]:
        """Many (method, path, body) requests at once, from one thread: all of them streams on the
        bulk connection, with no worker per request (64 workers handing requests over cost more CPU
        than the apiserver spends serving them). One outcome per request, None for success; those
        that failed as `_call` retries (5xx, 429, a dropped connection) are retried one by one."""
        replies = self._h2().request_all([(m, p, json.dumps(b)) for m, p, b in requests], self._headers())

        def settled(index: int) -> KubeError | None:
            reply = replies[index]
            assert reply is not None
            if retryable(reply):
                again = self._once_more(reply, what, self._send, *requests[index])
                return again if isinstance(again, KubeError) else None
            return kube_error(reply, what)

        outcomes: list[KubeError | None] = [None] * len(requests)
        failed = [i for i, reply in enumerate(replies) if reply is not None]
        for index, outcome in zip(failed, self.batch(settled, failed), strict=True):
            outcomes[index] = outcome
        return outcomes

    def _once_more(self, failed: Exception, what: str, fn: Callable[..., T], *args: Any) -> T | KubeError:
        """A bulk request that failed as `_call` retries (5xx, 429, a dropped connection), sent
        again through `_call`: its first failure counts as a retry and waits as `_call` would
        before its own."""
        counted(cause(failed))
        time.sleep(min(retry_after(failed) or random.uniform(0.1, 0.3), 5.0))
        try:
            return self._call(what, fn, *args)
        except KubeError as exc:
            return exc

    def list_raw(self, what: str, path: str, label_selector: str | None = None, field_selector: str | None = None,
                 cached: bool = False, metadata_only: bool = False) -> list[dict[str, Any]]:
        """Every item of a list as plain JSON, on the bulk connection, LIST_PAGE items a request
        (limit/continue): target selection and snapshots read a handful of fields, and the typed
        client costs more than the request (decoding 200 pods took 100 ms; its API module's import
        took a second in a fresh process). `cached` reads with resourceVersion=0: served from the
        apiserver's watch cache, no etcd read, possibly a moment behind (a probe's snapshot; never
        the choice of what to break). The watch cache answers in one reply whatever the limit.
        `metadata_only`: each item is its metadata alone (`METADATA_ONLY`)."""
        params = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector),
                                    ("limit", str(LIST_PAGE)), ("resourceVersion", "0" if cached else None)) if v}
        accept = METADATA_ONLY if metadata_only else "application/json"
        items: list[dict[str, Any]] = []
        while True:
            page = self._call(what, self._get, path, params, accept)
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
            # Later pages name the list's snapshot by the token alone.
            params = {k: v for k, v in params.items() if k != "resourceVersion"} | {"continue": token}

    def _get(self, path: str, params: dict[str, str], accept: str = "application/json") -> dict[str, Any]:
        reply = self._h2().get(path, params, {**self._headers(), "Accept": accept})
        if isinstance(reply, Exception):
            raise reply
        return json.loads(reply)  # type: ignore[no-any-return]

    def _read_modify_write(self, what: str, read: Callable[[], dict[str, Any]],
                           write: Callable[[dict[str, Any]], object],
                           change: Callable[[dict[str, Any]], dict[str, Any] | None],
                           attempts: int = 20) -> dict[str, Any]:
        """Optimistic concurrency: `change(current)` (plain JSON) returns the patch to make from what
        it read (None: nothing to do); the patch carries the resourceVersion it was computed from,
        and a 409 (someone wrote in between) reads again and recomputes. Returns what was read."""
        for _ in range(attempts):
            current = read()
            patch = change(current)
            if patch is None:
                return current
            version = {"resourceVersion": current["metadata"]["resourceVersion"]}
            try:
                write({**patch, "metadata": {**patch.get("metadata", {}), **version}})
                return current
            except Conflict:
                continue
        raise Conflict(f"{what}: still conflicting after {attempts} attempts", status=409)
