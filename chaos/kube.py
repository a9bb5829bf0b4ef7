"""The one place that talks to the Kubernetes API.

Every call goes through `Kube._call`, which turns `ApiException`s into `chaos.errors.KubeError`
subclasses and retries what is worth retrying: 5xx, dropped connections, and 429 from the
server's rate limiting (honouring Retry-After). A 429 from the Eviction API means "blocked by a
PodDisruptionBudget" and is never retried here: the caller decides.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import random
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit

import anyio
import httpcore
import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.config import incluster_config
from kubernetes.dynamic import DynamicClient
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential_jitter,
)

from chaos import __version__, written
from chaos.errors import Conflict, KubeError, NotFound, SpecError, TooManyRequests
from chaos.vocabulary import local_testbed_kubeconfig, quiet_thread, ready

T = TypeVar("T")
A = TypeVar("A")
FIELD_MANAGER = "kilocard"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# Requests in flight at once for batched calls: bounded, enough to keep a busy apiserver fed; the
# connection pool matches it (a request beyond the pool opens, and then drops, a TLS connection).
MAX_IN_FLIGHT = 64
# Items per LIST request: kubectl's and the informers' page. At 100,000 cards a node list is 60 MB
# of JSON in one piece without it.
LIST_PAGE = 500
# How long one watch request lasts before it is re-armed from its resourceVersion.
WATCH_SECONDS = 60
_in_batch = threading.local()
# Every retry this process made, by cause (429, 5xx, connection): a run's journal says how hard
# the cluster pushed back (kilocard.api_retries).
_retried: Counter[str] = Counter()
_retried_lock = threading.Lock()


def _mark_batch_worker() -> None:
    _in_batch.active = True
    quiet_thread()
_STATUS_ERRORS: dict[int, type[KubeError]] = {404: NotFound, 409: Conflict, 429: TooManyRequests}


def _to_kube_error(exc: Exception, what: str) -> KubeError:
    if isinstance(exc, ApiException):
        reason = exc.reason or ""
        message = reason
        if exc.body:
            try:
                message = json.loads(exc.body).get("message", reason)
            except (ValueError, AttributeError):
                message = str(exc.body)[:300]
        kind = _STATUS_ERRORS.get(exc.status or 0, KubeError)
        return kind(f"{what}: {exc.status} {message}", status=exc.status or 0, reason=reason)
    return KubeError(f"{what}: {exc}")


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        status = exc.status or 0
        return status >= 500 or (status == 429 and not getattr(exc, "_kilocard_no_retry", False))
    return isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError))


def _cause(exc: BaseException | None) -> str:
    status = (exc.status or 0) if isinstance(exc, ApiException) else 0
    return "429" if status == 429 else "5xx" if status else "connection"


def _count_retry(state: RetryCallState) -> None:
    _counted(_cause(state.outcome.exception() if state.outcome else None))


def _counted(cause: str) -> None:
    with _retried_lock:
        _retried[cause] += 1


def retries() -> dict[str, int]:
    """The retries this process has made so far, by cause."""
    with _retried_lock:
        return dict(_retried)


def _retry_after(exc: BaseException | None) -> float | None:
    """The server's Retry-After, in seconds (header names are case-insensitive: HTTP/2 sends them
    in lower case)."""
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _wait(state: RetryCallState) -> float:
    after = _retry_after(state.outcome.exception() if state.outcome else None)
    return after if after is not None else float(wait_exponential_jitter(multiplier=0.2, max=5)(state))


def _tuned(configuration: client.Configuration, pool: int) -> client.Configuration:
    """The connection pool matches the batch width. urllib3 would silently retry a 429 that
    carries Retry-After (three times, unseen); `Kube._call` retries it instead, so it is counted
    and a PodDisruptionBudget's 429 on an eviction is never retried. Dropped connections are still
    retried where they happen."""
    configuration.connection_pool_maxsize = pool
    configuration.retries = urllib3.Retry(total=3, respect_retry_after_header=False)
    return configuration


class _RawWatch(watch.Watch):
    """A watch that hands events over as the apiserver sent them (no model decoding)."""

    def get_return_type(self, func: Any) -> None:
        return None


def _cut_on_stop(stop: threading.Event, done: threading.Event, watching: list[watch.Watch]) -> None:
    """Once `stop` is set, shut the current watch's response, and any opened after it, until the
    follower is done: its blocked read ends now, not at the watch's timeout."""
    quiet_thread()
    while not stop.wait(0.2):
        if done.is_set():
            return
    while not done.wait(0.1):
        for watcher in list(watching):
            response = getattr(watcher, "_resp", None)  # set by Watch.stream for the request it reads
            if response is not None:
                try:
                    response.shutdown()
                except (RuntimeError, ValueError, OSError):
                    pass  # already closed, or its connection already gone


def _noting_writes(request: Callable[..., Any]) -> Callable[..., Any]:
    """The generated client's request, with its writes to pods and nodes recorded (`written`)."""
    def noted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        reply = request(method, url, *args, **kwargs)
        if method != "GET" and reply.status < 400:
            written.note(method, urlsplit(url).path, reply.read())  # kept: the caller's read() gets it too
        return reply

    return noted


COMPONENT_ENV = "KILOCARD_COMPONENT"


def user_agent() -> str:
    """`kilocard/<version> (<component>)`: the toolkit, or a testbed process that names itself in
    $KILOCARD_COMPONENT."""
    return f"kilocard/{__version__} ({os.environ.get(COMPONENT_ENV, 'toolkit')})"


def _kubeconfig_named(kubeconfig: str | os.PathLike[str] | None) -> bool:
    return bool(kubeconfig or os.environ.get("KUBECONFIG") or Path("~/.kube/config").expanduser().is_file())


def cluster_named(kubeconfig: str | os.PathLike[str] | None = None) -> bool:
    """Has the user named a cluster (a kubeconfig, $KUBECONFIG, ~/.kube/config, or a pod's own)?
    If not, the local testbed is the one meant."""
    return _kubeconfig_named(kubeconfig) or bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _error(status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> ApiException | None:
    """The ApiException the generated client raises for this reply (None under 400)."""
    if status < 400:
        return None
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    error = ApiException(status=status, reason=reason, body=body.decode(errors="replace"))
    error.headers = urllib3.HTTPHeaderDict([(k.decode(), v.decode()) for k, v in headers])
    return error


# What a request on the bulk connection can fail with short of a reply: retried as a dropped
# connection (Kube._call).
# httpcore's anyio backend lets a TLS stream the peer closed mid-write (an apiserver restarting)
# out as anyio's own EndOfStream or BrokenResourceError, not as a NetworkError.
_DROPPED = (httpcore.NetworkError, httpcore.ProtocolError, httpcore.TimeoutException, OSError,
            anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError)
_TIMEOUTS = {"timeout": {"connect": 30.0, "read": 30.0, "write": 30.0, "pool": 30.0}}
# A request's whole life on the bulk connection, queueing included: requests waiting on a
# connection that cannot open would otherwise each wait out their own connect timeout in turn.
_REQUEST_SECONDS = 60.0


class _Bulk:
    """One HTTP/2 connection for the bulk hot path (pod DELETE and eviction, LISTs as plain JSON,
    node creation), opened on first use: every request of a thousand-pod kill is a stream on it,
    so a fresh process pays one TLS handshake instead of one per worker, and the apiserver serves
    one connection. httpcore (httpx's transport) drives it from an event loop of its own (its
    HTTP/2 is not safe to share between threads); httpx's client layer above it is left out (CPU
    per DELETE measured here: httpx 1.8 ms, httpcore 1.5 ms, bench/raw_h2.py's bare h2 0.4 ms).
    Callers hand it requests."""

    def __init__(self, c: client.Configuration) -> None:
        tls = ssl.create_default_context(cafile=c.ssl_ca_cert or None)
        if not c.verify_ssl:
            tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
        if c.cert_file:
            tls.load_cert_chain(c.cert_file, c.key_file)
        self.host = c.host.rstrip("/")
        # A kubeconfig's tls-server-name: the name sent and verified, as the generated client does.
        self.extensions = {**_TIMEOUTS, **({"sni_hostname": c.tls_server_name} if c.tls_server_name else {})}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name="kube-bulk", daemon=True)
        self.thread.start()

        async def opened() -> httpcore.AsyncConnectionPool:
            # Requests that come while the first connection opens are queued on it, as it may be
            # HTTP/2 (the apiserver allows 250 streams on one); behind a proxy that speaks only
            # HTTP/1.1, up to MAX_IN_FLIGHT connections serve them instead.
            return httpcore.AsyncConnectionPool(ssl_context=tls, http1=True, http2=True, max_connections=MAX_IN_FLIGHT,
                                                proxy=httpcore.Proxy(c.proxy) if c.proxy else None)

        self.pool = self._run(opened())

    def _serve(self) -> None:
        quiet_thread()
        self.loop.run_forever()

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def _request(self, method: str, path: str, body: bytes | None, headers: list[tuple[str, str]]
                       ) -> tuple[int, bytes, list[tuple[bytes, bytes]]] | ConnectionError:
        try:
            reply = await asyncio.wait_for(self.pool.request(method, self.host + path, headers=headers, content=body,
                                                             extensions=self.extensions), _REQUEST_SECONDS)
        except (TimeoutError, *_DROPPED) as exc:
            return ConnectionError(f"{method} {path}: {exc!r}")
        return reply.status, reply.content, reply.headers

    def request_all(self, requests: list[tuple[str, str, str]], headers: dict[str, str]) -> list[Exception | None]:
        """(method, path, body) requests, all in flight at once; None for a reply under 400, else
        the ApiException (or ConnectionError) it makes."""
        fields = list(headers.items())

        async def every() -> list[Exception | None]:
            # One request that raised something unforeseen keeps its own outcome; the others theirs.
            replies = await asyncio.gather(*(self._request(m, p, b.encode(), fields) for m, p, b in requests),
                                           return_exceptions=True)
            for (method, path, _body), reply in zip(requests, replies, strict=True):
                if isinstance(reply, tuple) and reply[0] < 400:
                    written.note(method, path, reply[1])
            return [r if isinstance(r, BaseException) else _error(*r) for r in replies]  # type: ignore[misc]

        return self._run(every())  # type: ignore[no-any-return]

    def get_all(self, paths: list[str], headers: dict[str, str]) -> list[bytes | Exception]:
        """GETs all in flight at once: each reply's body, or the error it makes."""
        fields = list(headers.items())

        async def every() -> list[bytes | Exception]:
            replies = await asyncio.gather(*(self._request("GET", p, None, fields) for p in paths),
                                           return_exceptions=True)
            return [r if isinstance(r, BaseException) else (_error(*r) or r[1]) for r in replies]  # type: ignore[misc]

        return self._run(every())  # type: ignore[no-any-return]

    def get(self, path: str, params: dict[str, str], headers: dict[str, str]) -> bytes | Exception:
        """The reply's body, or the error it makes (decoded by the caller: a 60 MB list decoded
        here would stall every other stream)."""
        return self.get_all([f"{path}?{urlencode(params)}" if params else path], headers)[0]

    def close(self) -> None:
        self._run(self.pool.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class Kube:
    """A connection to one cluster: typed APIs plus a dynamic client for manifests."""

    def __init__(self, api_client: client.ApiClient, retry_seconds: float = 30.0) -> None:
        # Who is calling, for the cluster's audit log: kilocard, and which part of it.
        api_client.user_agent = user_agent()
        api_client.rest_client.request = _noting_writes(api_client.rest_client.request)
        self.api_client = api_client
        self.context: str | None = None  # the kubeconfig context; None in-cluster
        self.source = "a client made by hand"  # where the connection came from, as reports name it
        self._dynamic: DynamicClient | None = None
        self._retry_seconds = retry_seconds
        self._batch_pool: ThreadPoolExecutor | None = None
        self._batch_lock = threading.Lock()
        self._bulk: _Bulk | None = None

    # The typed APIs are made on first use: importing CoreV1Api's module takes a second, which a
    # fresh `kilocard fault pod-kill` (lists and DELETEs on the bulk connection) never needs.
    @functools.cached_property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api_client)

    @functools.cached_property
    def policy(self) -> client.PolicyV1Api:
        return client.PolicyV1Api(self.api_client)

    @functools.cached_property
    def networking(self) -> client.NetworkingV1Api:
        return client.NetworkingV1Api(self.api_client)

    @functools.cached_property
    def version_api(self) -> client.VersionApi:
        return client.VersionApi(self.api_client)

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str] | None = None, context: str | None = None, pool: int = MAX_IN_FLIGHT
    ) -> Kube:
        configuration = client.Configuration()
        try:
            config.load_kube_config(
                config_file=str(path) if path else None, context=context, client_configuration=configuration
            )
        except (config.ConfigException, OSError) as exc:
            raise SpecError(f"kubeconfig {path or os.environ.get('KUBECONFIG') or '~/.kube/config'}: {exc}") from None
        kube = cls(client.ApiClient(_tuned(configuration, pool)))
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
    def in_cluster(cls, account_dir: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR, pool: int = MAX_IN_FLIGHT) -> Kube:
        """The pod's ServiceAccount (a runner Job, the reaper CronJob): the token and CA that
        Kubernetes mounts, and KUBERNETES_SERVICE_HOST/PORT. The token is re-read as it rotates."""
        configuration = client.Configuration()
        account = Path(account_dir)
        try:
            incluster_config.InClusterConfigLoader(str(account / "token"), str(account / "ca.crt")).load_and_set(
                configuration)
        except config.ConfigException as exc:
            raise SpecError(f"in-cluster configuration ({account}): {exc}") from None
        kube = cls(client.ApiClient(_tuned(configuration, pool)))
        kube.source = "the pod's ServiceAccount (in-cluster)"
        return kube

    @classmethod
    def connect(cls, kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None,
                fallback: str | os.PathLike[str] | None = None) -> Kube:
        """The cluster the user means: `kubeconfig` if given, else $KUBECONFIG or ~/.kube/config,
        else the pod's ServiceAccount when running in a cluster, else `fallback` (the local testbed's
        kubeconfig), else a SpecError saying what was tried."""
        if _kubeconfig_named(kubeconfig):
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
                                                      initializer=_mark_batch_worker)
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
            retry=retry_if_exception(_retryable),
            wait=_wait,
            before_sleep=_count_retry,
            stop=stop_after_delay(self._retry_seconds),
            reraise=True,
        )
        try:
            return retrying(attempt)
        except (ApiException, urllib3.exceptions.HTTPError, ConnectionError) as exc:
            raise _to_kube_error(exc, what) from None

    def _h2(self) -> _Bulk:
        with self._batch_lock:
            if self._bulk is None:
                self._bulk = _Bulk(self.api_client.configuration)
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

    def _send(self, method: str, path: str, body: dict[str, Any]) -> None:
        """A bare request on the bulk connection, with the client's credentials: the generated
        client spends more CPU building and decoding a call than the apiserver spends serving it."""
        (reply,) = self._h2().request_all([(method, path, json.dumps(body))], self._headers())
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
            if _retryable(reply):
                again = self._once_more(reply, what, self._send, *requests[index])
                return again if isinstance(again, KubeError) else None
            return _to_kube_error(reply, what)

        outcomes: list[KubeError | None] = [None] * len(requests)
        failed = [i for i, reply in enumerate(replies) if reply is not None]
        for index, outcome in zip(failed, self.batch(settled, failed), strict=True):
            outcomes[index] = outcome
        return outcomes

    def _once_more(self, failed: Exception, what: str, fn: Callable[..., T], *args: Any) -> T | KubeError:
        """A bulk request that failed as `_call` retries (5xx, 429, a dropped connection), sent
        again through `_call`: its first failure counts as a retry and waits as `_call` would
        before its own."""
        _counted(_cause(failed))
        time.sleep(min(_retry_after(failed) or random.uniform(0.1, 0.3), 5.0))
        try:
            return self._call(what, fn, *args)
        except KubeError as exc:
            return exc

    # --- cluster ---------------------------------------------------------------------------
    def server_version(self) -> str:
        info = self._call("get version", self.version_api.get_code)
        return str(info.git_version)

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
        """Every object of a kind (in `namespace`, else everywhere) as plain JSON."""
        what = f"list {kind} in {namespace or 'every namespace'}"
        resource = self._call(what, self.dynamic.resources.get, api_version=api_version, kind=kind)
        found = self._call(what, self.dynamic.get, resource, namespace=namespace)
        return [item.to_dict() for item in found.items]

    # --- nodes -----------------------------------------------------------------------------
    def list_nodes(self, label_selector: str | None = None) -> list[client.V1Node]:
        kwargs = {"label_selector": label_selector} if label_selector else {}
        return list(self._call("list nodes", self.core.list_node, **kwargs).items)

    def list_nodes_raw(self, label_selector: str | None = None, cached: bool = False) -> list[dict[str, Any]]:
        """Nodes as plain JSON (see `list_raw`)."""
        return self.list_raw("list nodes", "/api/v1/nodes", label_selector, None, cached)

    def read_node(self, name: str) -> client.V1Node:
        return self._call(f"get node {name}", self.core.read_node, name)

    def create_node(self, body: dict[str, Any]) -> None:
        """Create a node on the bulk connection, the reply not decoded (a testbed creates thousands)."""
        self._call(f"create node {body['metadata']['name']}", self._send, "POST", "/api/v1/nodes", body)

    def patch_node(self, name: str, patch: dict[str, Any], resource_version: str | None = None) -> client.V1Node:
        """Strategic-merge patch; with `resource_version`, only if the node has not changed since
        it was read (else Conflict: read again and recompute)."""
        if resource_version is not None:
            patch = {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": resource_version}}
        return self._call(f"patch node {name}", self.core.patch_node, name, patch)

    def read_node_raw(self, name: str) -> dict[str, Any]:
        """A node as the API's plain JSON (taints keep `timeAdded`, which typed models rename)."""
        return json.loads(self._call(f"get node {name}", self.core.read_node, name, _preload_content=False).data)

    def update_node(self, name: str, change: Callable[[dict[str, Any]], dict[str, Any] | None],
                    attempts: int = 20) -> dict[str, Any]:
        """Read-modify-write with optimistic concurrency: `change(node)` (plain JSON) returns the
        patch to make from what it read (None: nothing to do); the patch carries the
        resourceVersion it was computed from, and a 409 (someone wrote in between) reads and
        recomputes."""
        for _ in range(attempts):
            node = self.read_node_raw(name)
            patch = change(node)
            if patch is None:
                return node
            try:
                self.patch_node(name, patch, node["metadata"]["resourceVersion"])
                return node
            except Conflict:
                continue
        raise Conflict(f"patch node {name}: still conflicting after {attempts} attempts", status=409)

    def patch_node_status(self, name: str, patch: dict[str, Any]) -> client.V1Node:
        return self._call(f"patch node {name} status", self.core.patch_node_status, name, patch)

    def delete_node(self, name: str) -> None:
        self._call(f"delete node {name}", self.core.delete_node, name)

    # --- namespaces ------------------------------------------------------------------------
    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        body = {"metadata": {"name": name, "labels": labels or {}}}
        self._call(f"create namespace {name}", self.core.create_namespace, body)

    def delete_namespace(self, name: str) -> None:
        self._call(f"delete namespace {name}", self.core.delete_namespace, name)

    def namespace_labels(self, name: str) -> dict[str, str]:
        return dict(self._call(f"get namespace {name}", self.core.read_namespace, name).metadata.labels or {})

    def list_namespaces(self, label_selector: str | None = None) -> list[client.V1Namespace]:
        kwargs = {"label_selector": label_selector} if label_selector else {}
        return list(self._call("list namespaces", self.core.list_namespace, **kwargs).items)

    # --- config maps (the in-cluster fault ledger) ---------------------------------------------
    def list_config_maps(self, namespace: str, label_selector: str | None = None) -> list[client.V1ConfigMap]:
        kwargs = {"label_selector": label_selector} if label_selector else {}
        result = self._call(f"list configmaps in {namespace}", self.core.list_namespaced_config_map, namespace,
                            **kwargs)
        return list(result.items)

    def create_config_map(self, namespace: str, body: dict[str, Any]) -> client.V1ConfigMap:
        name = body["metadata"]["name"]
        return self._call(f"create configmap {namespace}/{name}", self.core.create_namespaced_config_map,
                          namespace, body)

    def patch_config_map(self, namespace: str, name: str, patch: dict[str, Any]) -> client.V1ConfigMap:
        return self._call(f"patch configmap {namespace}/{name}", self.core.patch_namespaced_config_map,
                          name, namespace, patch)

    def update_config_map(self, namespace: str, name: str, change: Callable[[dict[str, Any]], dict[str, Any] | None],
                          attempts: int = 20) -> dict[str, Any]:
        """Read-modify-write as `update_node`: `change(config_map)` returns the patch (None: nothing
        to do), sent with the resourceVersion it was computed from; a 409 reads and recomputes."""
        for _ in range(attempts):
            current = self.read_config_map(namespace, name)
            patch = change(current)
            if patch is None:
                return current
            version = {"resourceVersion": current["metadata"]["resourceVersion"]}
            try:
                self.patch_config_map(namespace, name, {**patch, "metadata": {**patch.get("metadata", {}), **version}})
                return current
            except Conflict:
                continue
        raise Conflict(f"patch configmap {namespace}/{name}: still conflicting after {attempts} attempts", status=409)

    def delete_config_map(self, namespace: str, name: str) -> None:
        self._call(f"delete configmap {namespace}/{name}", self.core.delete_namespaced_config_map, name, namespace)

    def ensure_namespace(self, name: str) -> None:
        """Create the namespace unless it exists (a least-privilege caller may only read it)."""
        try:
            self._call(f"get namespace {name}", self.core.read_namespace, name)
        except NotFound:
            try:
                self.create_namespace(name)
            except Conflict:
                pass

    # --- network policies ---------------------------------------------------------------------
    def create_network_policy(self, namespace: str, body: dict[str, Any]) -> Any:
        name = body["metadata"]["name"]
        return self._call(f"create networkpolicy {namespace}/{name}",
                          self.networking.create_namespaced_network_policy, namespace, body)

    def delete_network_policy(self, namespace: str, name: str) -> None:
        self._call(f"delete networkpolicy {namespace}/{name}", self.networking.delete_namespaced_network_policy,
                   name, namespace)

    def list_network_policies(self, namespace: str, label_selector: str | None = None) -> list[Any]:
        kwargs = {"label_selector": label_selector} if label_selector else {}
        return list(self._call(f"list networkpolicies in {namespace}",
                               self.networking.list_namespaced_network_policy, namespace, **kwargs).items)

    # --- secrets ---------------------------------------------------------------------------
    def read_secret(self, namespace: str, name: str) -> dict[str, bytes]:
        """The decoded data of a Secret."""
        secret = self._call(f"get secret {namespace}/{name}", self.core.read_namespaced_secret, name, namespace)
        return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}

    # --- events ----------------------------------------------------------------------------
    def record_event(self, kind: str, name: str, namespace: str, reason: str, message: str, component: str,
                     uid: str | None = None) -> None:
        """A core Event about an object, as controllers write them (what `kilocard record` reads back)."""
        at = time.time()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
        body = {"metadata": {"generateName": f"{name}.", "namespace": namespace},
                "involvedObject": {"kind": kind, "name": name, "namespace": namespace if kind != "Node" else "",
                                   **({"uid": uid} if uid else {})},
                "reason": reason, "message": message, "type": "Normal", "source": {"component": component},
                "firstTimestamp": now, "lastTimestamp": now, "count": 1,
                # eventTime keeps the microseconds (the timestamps above have whole seconds).
                "eventTime": now.replace("Z", f".{int(at % 1 * 1e6):06d}Z"), "action": reason,
                "reportingComponent": component, "reportingInstance": component}
        self._call(f"create event {reason} on {kind} {name}", self.core.create_namespaced_event, namespace, body)

    # --- pods ------------------------------------------------------------------------------
    def list_pods(
        self, namespace: str | None = None, label_selector: str | None = None, field_selector: str | None = None
    ) -> client.V1PodList:
        kwargs = {k: v for k, v in (("label_selector", label_selector), ("field_selector", field_selector)) if v}
        if namespace:
            return self._call(f"list pods in {namespace}", self.core.list_namespaced_pod, namespace, **kwargs)
        return self._call("list pods", self.core.list_pod_for_all_namespaces, **kwargs)

    def list_pods_raw(
        self, namespace: str | None = None, label_selector: str | None = None, field_selector: str | None = None,
        cached: bool = False,
    ) -> list[dict[str, Any]]:
        """Pods as plain JSON (see `list_raw`)."""
        if namespace:
            return self.list_raw(f"list pods in {namespace}", f"/api/v1/namespaces/{namespace}/pods", label_selector,
                                 field_selector, cached)
        return self.list_raw("list pods", "/api/v1/pods", label_selector, field_selector, cached)

    def list_raw(self, what: str, path: str, label_selector: str | None = None, field_selector: str | None = None,
                 cached: bool = False) -> list[dict[str, Any]]:
        """Every item of a list as plain JSON, on the bulk connection, LIST_PAGE items a request
        (limit/continue): target selection and snapshots read a handful of fields, and the typed
        client costs more than the request (decoding 200 pods took 100 ms; its API module's import
        took a second in a fresh process). `cached` reads with resourceVersion=0: served from the
        apiserver's watch cache, no etcd read, possibly a moment behind (a probe's snapshot; never
        the choice of what to break). The watch cache answers in one reply whatever the limit."""
        params = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector),
                                    ("limit", str(LIST_PAGE)), ("resourceVersion", "0" if cached else None)) if v}
        items: list[dict[str, Any]] = []
        while True:
            page = self._call(what, self._get, path, params)
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
            # Later pages name the list's snapshot by the token alone.
            params = {k: v for k, v in params.items() if k != "resourceVersion"} | {"continue": token}

    def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        reply = self._h2().get(path, params, self._headers())
        if isinstance(reply, Exception):
            raise reply
        return json.loads(reply)  # type: ignore[no-any-return]

    def read_pod(self, namespace: str, name: str) -> client.V1Pod:
        return self._call(f"get pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace)

    def read_pod_raw(self, namespace: str, name: str) -> dict[str, Any]:
        """A pod as the API's plain JSON (its status' containerIDs as the runtime spells them), on
        the bulk connection (never the typed client's import)."""
        return self._call(f"get pod {namespace}/{name}", self._get, f"/api/v1/namespaces/{namespace}/pods/{name}", {})

    def read_pods_raw(self, pods: list[tuple[str, str]]) -> list[dict[str, Any] | KubeError]:
        """Many (namespace, name) pods at once, every GET a stream on the bulk connection, from one
        thread: a pod kill reads every pod it killed back. One result per pod; those that failed as
        `_call` retries are read again one by one."""
        paths = [f"/api/v1/namespaces/{ns}/pods/{name}" for ns, name in pods]
        replies = self._h2().get_all(paths, self._headers())

        def settled(index: int) -> dict[str, Any] | KubeError:
            failure, what = replies[index], f"get pod {pods[index][0]}/{pods[index][1]}"
            assert isinstance(failure, Exception)
            if _retryable(failure):
                return self._once_more(failure, what, self._get, paths[index], {})
            return _to_kube_error(failure, what)

        found: list[dict[str, Any] | KubeError] = [{} if isinstance(r, Exception) else json.loads(r) for r in replies]
        failed = [i for i, reply in enumerate(replies) if isinstance(reply, Exception)]
        for index, result in zip(failed, self.batch(settled, failed), strict=True):
            found[index] = result
        return found

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> client.V1Pod:
        return self._call(f"patch pod {namespace}/{name}", self.core.patch_namespaced_pod, name, namespace, patch)

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
                   f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body, retry_429=False)

    def watch_pods(
        self,
        namespace: str,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 60,
    ) -> Iterator[tuple[str, client.V1Pod]]:
        """Pod events (ADDED/MODIFIED/DELETED) from `resource_version` on, until the timeout."""
        kwargs: dict[str, Any] = {"timeout_seconds": timeout_seconds}
        if label_selector:
            kwargs["label_selector"] = label_selector
        if resource_version:
            kwargs["resource_version"] = resource_version
        stream = watch.Watch().stream(self.core.list_namespaced_pod, namespace, **kwargs)
        try:
            for event in stream:
                yield event["type"], event["object"]
        except ApiException as exc:
            raise _to_kube_error(exc, f"watch pods in {namespace}") from None

    # --- workloads -------------------------------------------------------------------------
    # --- following state, by watch ------------------------------------------------------------
    def events(
        self,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        until: float | None = None,
        stop: threading.Event | None = None,
        raw: bool = False,
        cached: bool = False,
        breaks: bool = False,
    ) -> Iterator[tuple[str, Any]]:
        """List `kind` ("pods", "nodes", "poddisruptionbudgets", "configmaps"), yield ("SYNC", [objects]), then
        follow its watch, yielding (ADDED|MODIFIED|DELETED, object). A watch that expires or
        whose resourceVersion is too old (410) is resumed or re-listed (a new SYNC). Ends at
        `until` (monotonic time) or when `stop` is set. `raw` yields plain JSON objects: a
        long-running follower of a busy cluster spends most of its CPU decoding typed models.
        `cached` lists from the apiserver's watch cache (resourceVersion=0, as `list_raw`). With
        `breaks`, a dropped connection is yielded as ("BROKEN", None) before it is ridden out: from
        then until the next SYNC, what was followed may be out of date."""
        # The watch decodes events by the list method's documented return type: pass the bound
        # API method itself (not a wrapper), with its positional arguments.
        namespaced, everywhere = {
            "nodes": (None, self.core.list_node),
            "pods": (self.core.list_namespaced_pod, self.core.list_pod_for_all_namespaces),
            "poddisruptionbudgets": (self.policy.list_namespaced_pod_disruption_budget,
                                     self.policy.list_pod_disruption_budget_for_all_namespaces),
            "configmaps": (self.core.list_namespaced_config_map, self.core.list_config_map_for_all_namespaces),
        }[kind]
        lister, args = (namespaced, (namespace,)) if namespace and namespaced else (everywhere, ())
        kwargs: dict[str, Any] = {"label_selector": label_selector} if label_selector else {}
        listing = {**kwargs, "resource_version": "0"} if cached else kwargs
        # A stopped follower's watch is cut at once (`_cut_on_stop`), so it can watch for long:
        # re-arming every few seconds to notice a stop was most of a run's API requests.
        watching: list[watch.Watch] = []
        done = threading.Event()
        if stop is not None:
            threading.Thread(target=_cut_on_stop, args=(stop, done, watching), name="watch-stop", daemon=True).start()
        try:
            version = None
            while not (stop and stop.is_set()):
                if version is None:
                    if raw:
                        data = json.loads(self._call(f"list {kind}", lister, *args, _preload_content=False,
                                                     **listing).data)
                        version, items = data["metadata"]["resourceVersion"], list(data.get("items") or [])
                    else:
                        listed = self._call(f"list {kind}", lister, *args, **listing)
                        version, items = listed.metadata.resource_version, list(listed.items)
                    yield "SYNC", items
                remaining = float(WATCH_SECONDS) if until is None else until - time.monotonic()
                if remaining <= 0:
                    return
                if stop is not None and stop.is_set():
                    return  # stopped while listing: no watch to open
                watcher = _RawWatch() if raw else watch.Watch()
                watching[:] = [watcher]
                try:
                    for event in watcher.stream(lister, *args, resource_version=version,
                                                timeout_seconds=max(1, min(WATCH_SECONDS, int(remaining))), **kwargs):
                        obj = event["object"]
                        version = obj["metadata"]["resourceVersion"] if raw else obj.metadata.resource_version
                        yield event["type"], obj
                        if (stop and stop.is_set()) or (until is not None and time.monotonic() > until):
                            return
                except ApiException as exc:
                    if exc.status != 410:  # 410 Gone: our resourceVersion is too old; list again
                        raise _to_kube_error(exc, f"watch {kind}") from None
                    version = None
                except (urllib3.exceptions.HTTPError, ConnectionError) as exc:
                    if stop is not None and stop.is_set():
                        return  # cut short by the stop (`_cut_on_stop`)
                    if stop is None:
                        raise _to_kube_error(exc, f"watch {kind}") from None
                    _counted("connection")
                    if breaks:
                        yield "BROKEN", None
                    stop.wait(1.0)  # a long-running follower rides out an apiserver restart
                    version = None
                finally:
                    watcher.stop()
        finally:
            done.set()

    def wait_until(
        self,
        kind: str,
        condition: Callable[[list[Any]], bool],
        timeout: float,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[Any]:
        """Follow `kind` (see `events`) until `condition` holds over the current objects; return
        them. Raises TimeoutError."""
        objects: dict[str, Any] = {}
        for kind_of_event, obj in self.events(kind, namespace, label_selector, until=time.monotonic() + timeout):
            if kind_of_event == "SYNC":
                objects = {o.metadata.uid: o for o in obj}
            elif kind_of_event == "DELETED":
                objects.pop(obj.metadata.uid, None)
            else:
                objects[obj.metadata.uid] = obj
            if condition(list(objects.values())):
                return list(objects.values())
        raise TimeoutError(f"{kind} did not reach the expected state within {timeout:.0f} s")

    def wait_ready(self, kind: str, at_least: int, timeout: float, namespace: str | None = None,
                   label_selector: str | None = None) -> int:
        """Follow `kind` (plain JSON) until at least `at_least` of its objects are Ready; return how
        many are. O(1) per event: re-counting 1,250 typed nodes on each event took a CPU-minute."""
        ready_now: dict[str, bool] = {}
        count = 0
        for kind_of_event, obj in self.events(kind, namespace, label_selector, until=time.monotonic() + timeout,
                                              raw=True):
            if kind_of_event == "SYNC":
                ready_now = {o["metadata"]["uid"]: ready(o) for o in obj}
                count = sum(ready_now.values())
            else:
                uid = obj["metadata"]["uid"]
                count -= ready_now.pop(uid, False)
                if kind_of_event != "DELETED":
                    ready_now[uid] = ready(obj)
                    count += ready_now[uid]
            if count >= at_least:
                return count
        raise TimeoutError(f"{count}/{at_least} {kind} Ready after {timeout:.0f} s")

    # --- one ConfigMap, read and followed (a game day's gates and abort-all switch) ---------------
    def read_config_map(self, namespace: str, name: str) -> dict[str, Any]:
        """A ConfigMap as plain JSON (NotFound if there is none)."""
        reply = self._call(f"get configmap {namespace}/{name}", self.core.read_namespaced_config_map, name,
                           namespace, _preload_content=False)
        return dict(json.loads(reply.data))

    def watch_config_map(self, namespace: str, name: str, resource_version: str,
                         timeout_seconds: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """Its events (ADDED|MODIFIED|DELETED, plain JSON) after `resource_version`, until the
        apiserver ends the watch at `timeout_seconds`. By field selector on its name, so a Role
        naming it in resourceNames allows the watch."""
        what = f"watch configmap {namespace}/{name}"
        reply = self._call(what, self.core.list_namespaced_config_map, namespace,
                           field_selector=f"metadata.name={name}", resource_version=resource_version, watch=True,
                           timeout_seconds=timeout_seconds, _request_timeout=timeout_seconds + 30,
                           _preload_content=False)
        try:
            for line in watch.watch.iter_resp_lines(reply):
                if not line:
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":  # a Status: 410 when resource_version is too old
                    status = event.get("object") or {}
                    raise KubeError(f"{what}: {status.get('code', 0)} {status.get('message', '')}",
                                    status=int(status.get("code") or 0), reason=str(status.get("reason", "")))
                yield event["type"], event["object"]
        except (urllib3.exceptions.HTTPError, ConnectionError) as exc:
            raise _to_kube_error(exc, what) from None
        finally:
            reply.release_conn()

    # --- DRA: a driver's ResourceSlices (their devices' taints) ----------------------------------
    def list_resource_slices(self, driver: str, node: str | None = None) -> list[dict[str, Any]]:
        """The driver's ResourceSlices (resource.k8s.io/v1) as plain JSON, on `node` only if given."""
        fields = ",".join([f"spec.driver={driver}", *([f"spec.nodeName={node}"] if node else [])])
        return self.list_raw(f"list resourceslices of {driver}", "/apis/resource.k8s.io/v1/resourceslices",
                             field_selector=fields)


def _pod_delete(namespace: str, name: str, grace_seconds: int | None, uid: str | None
                ) -> tuple[str, str, dict[str, Any]]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if grace_seconds is not None:
        body["gracePeriodSeconds"] = grace_seconds
    if uid:
        body["preconditions"] = {"uid": uid}
    return "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body


def pod_ready(pod: client.V1Pod) -> bool:
    if pod.metadata.deletion_timestamp is not None:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))


def node_ready(node: client.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
