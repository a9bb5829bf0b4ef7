"""Following state by watch: a kind listed, then followed (re-armed, resumed after 410, riding out
a dropped connection), cut at once when its follower stops; waiting on a condition; one ConfigMap
followed."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import urllib3
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from chaos.errors import KubeError
from chaos.kube.api import Api, kind_path
from chaos.kube.retry import counted, kube_error
from chaos.vocabulary import quiet_thread, ready

# How long one watch request lasts before it is re-armed from its resourceVersion.
WATCH_SECONDS = 60


class RawWatch(watch.Watch):
    """A watch that hands events over as the apiserver sent them (no model decoding)."""

    def get_return_type(self, func: Any) -> None:
        return None


def cut_on_stop(stop: threading.Event, done: threading.Event, watching: list[watch.Watch]) -> None:
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


class Watches(Api):
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
        lister, args = self._lister(kind, namespace, raw)
        kwargs: dict[str, Any] = {"label_selector": label_selector} if label_selector else {}
        listing = {**kwargs, "resource_version": "0"} if cached else kwargs
        # A stopped follower's watch is cut at once (`cut_on_stop`), so it can watch for long:
        # re-arming every few seconds to notice a stop was most of a run's API requests.
        watching: list[watch.Watch] = []
        done = threading.Event()
        if stop is not None:
            threading.Thread(target=cut_on_stop, args=(stop, done, watching), name="watch-stop", daemon=True).start()
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
                watcher = RawWatch() if raw else watch.Watch()
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
                        raise kube_error(exc, f"watch {kind}") from None
                    version = None
                except (urllib3.exceptions.HTTPError, ConnectionError) as exc:
                    if stop is not None and stop.is_set():
                        return  # cut short by the stop (`cut_on_stop`)
                    if stop is None:
                        raise kube_error(exc, f"watch {kind}") from None
                    counted("connection")
                    if breaks:
                        yield "BROKEN", None
                    stop.wait(1.0)  # a long-running follower rides out an apiserver restart
                    version = None
                finally:
                    watcher.stop()
        finally:
            done.set()

    def _lister(self, kind: str, namespace: str | None, raw: bool) -> tuple[Callable[..., Any], tuple[str, ...]]:
        """What lists `kind` (and, given watch=True, watches it), as kubernetes.watch calls it, with
        its positional arguments. Typed: the API method itself, whose documented return type the
        watch decodes events by. Raw: a plain GET of the kind's path, answering the undecoded
        response, so a follower never imports the typed API's module (most of a run's start-up)."""
        if raw:
            return self._raw_lister(kind_path(kind, namespace)), ()
        namespaced, everywhere = {
            "nodes": (None, self.core.list_node),
            "pods": (self.core.list_namespaced_pod, self.core.list_pod_for_all_namespaces),
            "poddisruptionbudgets": (self.policy.list_namespaced_pod_disruption_budget,
                                     self.policy.list_pod_disruption_budget_for_all_namespaces),
            "configmaps": (self.core.list_namespaced_config_map, self.core.list_config_map_for_all_namespaces),
        }[kind]
        return (namespaced, (namespace,)) if namespace and namespaced else (everywhere, ())

    def _raw_lister(self, path: str) -> Callable[..., Any]:
        def get(watch: bool = False, _preload_content: bool = False, label_selector: str | None = None,
                field_selector: str | None = None, resource_version: str | None = None,
                timeout_seconds: int | None = None, _request_timeout: float | None = None) -> Any:
            query = [(k, v) for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector),
                                         ("resourceVersion", resource_version), ("timeoutSeconds", timeout_seconds),
                                         ("watch", "true" if watch else None)) if v is not None]
            request = self.api_client.param_serialize("GET", path, query_params=query, auth_settings=["BearerToken"],
                                                      header_params={"Accept": "application/json"})
            reply = self.api_client.call_api(*request, _request_timeout=_request_timeout)
            if not 200 <= reply.status <= 299:  # as the typed API answers it: the watch resumes on a 410
                reply.read()
                raise ApiException.from_response(http_resp=reply, body=None, data=None)
            return reply.response
        return get

    def wait_until(
        self,
        kind: str,
        condition: Callable[[list[Any]], bool],
        timeout: float,
        namespace: str | None = None,
        label_selector: str | None = None,
        raw: bool = False,
    ) -> list[Any]:
        """Follow `kind` (see `events`; `raw`: as plain JSON) until `condition` holds over the
        current objects; return them. Raises TimeoutError."""
        def uid(o: Any) -> str:
            return str(o["metadata"]["uid"] if raw else o.metadata.uid)

        objects: dict[str, Any] = {}
        for kind_of_event, obj in self.events(kind, namespace, label_selector, until=time.monotonic() + timeout,
                                              raw=raw):
            if kind_of_event == "SYNC":
                objects = {uid(o): o for o in obj}
            elif kind_of_event == "DELETED":
                objects.pop(uid(obj), None)
            else:
                objects[uid(obj)] = obj
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

    def watch_config_map(self, namespace: str, name: str, resource_version: str,
                         timeout_seconds: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """Its events (ADDED|MODIFIED|DELETED, plain JSON) after `resource_version`, until the
        apiserver ends the watch at `timeout_seconds`. By field selector on its name, so a Role
        naming it in resourceNames allows the watch."""
        what = f"watch configmap {namespace}/{name}"
        reply = self._call(what, self._raw_lister(kind_path("configmaps", namespace)),
                           field_selector=f"metadata.name={name}", resource_version=resource_version, watch=True,
                           timeout_seconds=timeout_seconds, _request_timeout=timeout_seconds + 30)
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
            raise kube_error(exc, what) from None
        finally:
            reply.release_conn()
