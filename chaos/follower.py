"""One follower of the cluster for a run: every pod and every node, listed once from the
apiserver's watch cache and then kept current by one watch per kind. While it runs, the run's
snapshots (the guards', the probes', the stop conditions', each re-check of a recovery) are read
from memory: a run costs the apiserver two LISTs and two watches, whatever its length and the
number of replicas, where each snapshot was two LISTs of everything (5.8 MB of nodes at 10,000
cards).

Its view is as fresh as a LIST from the watch cache, which is what the snapshots read before,
and never older than this process's own writes: a snapshot waits until the watch has delivered
every write the process made to a pod or a node (`chaos.written`), so a probe right after a
fault sees the fault. Another driver's writes are caught up with the same way once its action
ends (`catch_up`: one fresh LIST). If the watch cannot catch up in time, or the follower stops on
an error, snapshots are listed again, as without it; and so they are while its watch has dropped
(an apiserver restart) until it has listed again.

It also keeps what it saw, when (`history`): every pod change, and every node change a probe can
see (spec, Ready, cards; not heartbeats). A probe reached after its budget judges the interval
from this record, never from the present state.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chaos import written
from chaos.errors import KilocardError
from chaos.vocabulary import quiet_thread, ready
from probes import snapshot

if TYPE_CHECKING:
    from chaos.kube import Kube

KINDS = ("pods", "nodes")
CATCH_UP_SECONDS = 5.0  # for the watch to deliver this process's own writes
MAX_CHANGES = 200_000  # kept in the history; older ones are folded into its start


@dataclass(frozen=True)
class Change:
    at: float  # when the watch delivered it (epoch seconds)
    kind: str
    key: str
    obj: dict[str, Any] | None  # None: deleted


def _key(kind: str, obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if kind == "pods" else str(meta["name"])


def _version(obj: dict[str, Any]) -> int | None:
    try:
        return int(obj["metadata"]["resourceVersion"])
    except (KeyError, ValueError):
        return None  # not etcd's revision numbers: not comparable, so not waited for


def _seen_by_probes(node: dict[str, Any]) -> tuple[Any, ...]:
    status = node.get("status") or {}
    return node.get("spec"), ready(node), status.get("allocatable"), status.get("capacity")


@dataclass(frozen=True)
class History:
    """Pods and nodes (plain JSON) as they were `at`, and each change after, in order."""

    at: float
    pods: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    changes: list[Change]


def _apply(objects: dict[str, dict[str, Any]], change: Change) -> None:
    if change.obj is None:
        objects.pop(change.key, None)
    else:
        objects[change.key] = change.obj


def _seen(write: written.Write, obj: dict[str, Any] | None) -> bool:
    """Has the followed copy of an object caught up with one of our writes to it?"""
    if obj is None:
        return True  # gone (a delete done, or the object removed since)
    version = _version(obj)
    newer = write.version is None or version is None or version >= write.version
    if write.deleted:  # terminating at least; a DELETE's reply may carry the version before it
        return newer and bool(obj["metadata"].get("deletionTimestamp"))
    return newer


class Follower:
    """Every pod and node of one cluster, in memory, for as long as it runs (`start`, `stop`)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.host = snapshot.host_of(kube)
        self._objects: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in KINDS}
        self._changed = threading.Condition()
        self._pod_changes: Counter[str] = Counter()  # pod events, by namespace
        # Changes any probe may see wherever its pods are: a (re-)list, and a node's spec (cordon,
        # taints), Ready condition or allocatable changing, not its heartbeats.
        self._shared_changes = 0
        self._synced = {kind: threading.Event() for kind in KINDS}
        self._stop = threading.Event()
        self._confirmed = 0  # writes up to this sequence number are in the view
        self._broken: set[str] = set()  # kinds whose watch dropped and is not listed again yet
        self._listeners: list[tuple[str | None, Callable[[str, Any], None]]] = []
        # What it saw, when: the objects at `_base_at`, then each change after (`history`).
        self._base: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in KINDS}
        self._base_at: dict[str, float] = {}
        self._log: list[Change] = []
        self.error: KilocardError | None = None
        self.lists = 0  # LISTs it made (a re-list after a 410 too)
        self._threads = [threading.Thread(target=self._follow, args=(kind,), name=f"follow-{kind}", daemon=True)
                         for kind in KINDS]

    def start(self, timeout: float = 30.0) -> Follower:
        """Follow from now on; returns once both lists are in. Raises the error that stopped it."""
        for thread in self._threads:
            thread.start()
        deadline = time.monotonic() + timeout
        for kind in KINDS:
            self._synced[kind].wait(max(0.0, deadline - time.monotonic()))
        if self.error is not None or not all(e.is_set() for e in self._synced.values()):
            self.stop()
            raise self.error or KilocardError(f"following pods and nodes: no list within {timeout:g} s")
        snapshot.read_from(self)
        return self

    def stop(self) -> None:
        """Stop following (its watches are cut at once, not at their timeout)."""
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        snapshot.stop_reading_from(self)
        for thread in self._threads:
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(timeout=5)

    @property
    def alive(self) -> bool:
        return (self.error is None and not self._stop.is_set() and not self._broken
                and all(t.is_alive() for t in self._threads))

    def _follow(self, kind: str) -> None:
        quiet_thread()
        objects = self._objects[kind]
        try:
            for event, obj in self.kube.events(kind, stop=self._stop, raw=True, cached=True, breaks=True):
                with self._changed:
                    if event == "BROKEN":  # out of date until the re-list: snapshots are listed meanwhile
                        self._broken.add(kind)
                    elif event == "SYNC":  # the first list, or a re-list: it replaces what was known
                        self.lists += 1
                        listed = {_key(kind, o): o for o in obj}
                        self._record_list(kind, objects, listed)
                        objects.clear()
                        objects.update(listed)
                        self._broken.discard(kind)
                        self._shared_changes += 1
                        if kind == "pods":
                            for namespace, listener in self._listeners:
                                listener("SYNC", self._pods_in(namespace))
                    else:
                        key = _key(kind, obj)
                        before = objects.pop(key, None) if event == "DELETED" else objects.get(key)
                        if event != "DELETED":
                            objects[key] = obj
                        if kind == "pods" or before is None or event == "DELETED" or (
                                _seen_by_probes(before) != _seen_by_probes(obj)):
                            self._remember(Change(time.time(), kind, key, None if event == "DELETED" else obj))
                        if kind == "pods":
                            self._pod_changes[obj["metadata"]["namespace"]] += 1
                            for namespace, listener in self._listeners:
                                if namespace in (None, obj["metadata"]["namespace"]):
                                    listener(event, obj)
                        elif before is None or event == "DELETED" or _seen_by_probes(before) != _seen_by_probes(obj):
                            self._shared_changes += 1
                    self._changed.notify_all()
                self._synced[kind].set()
        except KilocardError as exc:
            self.error = exc
        except Exception as exc:  # noqa: BLE001 - whatever ended the watch, its view is no longer kept
            self.error = KilocardError(f"following {kind}: {exc!r}")
        finally:
            self._synced[kind].set()  # wake start() if it failed before its list
            with self._changed:
                self._changed.notify_all()

    def objects(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        """(pods, nodes) as plain JSON, once this process's writes so far are in; None if the
        follower has stopped or the watch has not delivered them within CATCH_UP_SECONDS."""
        target = written.last()
        deadline = time.monotonic() + CATCH_UP_SECONDS
        with self._changed:
            pending = [w for w in written.since(self._confirmed) if w.kind in self._objects]
            while self.alive:
                pending = [w for w in pending if not _seen(w, self._objects[w.kind].get(w.key))]
                if not pending:
                    self._confirmed = max(self._confirmed, target)
                    return list(self._objects["pods"].values()), list(self._objects["nodes"].values())
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(remaining)
        return None

    # --- what it saw, when ------------------------------------------------------------------------
    @property
    def recorded_from(self) -> float:
        """Since when its history holds every kind (inf before both lists are in)."""
        return max(self._base_at.get(kind, float("inf")) for kind in KINDS)

    def _record_list(self, kind: str, known: dict[str, dict[str, Any]], listed: dict[str, dict[str, Any]]) -> None:
        """The first list starts the history; a re-list is recorded as the changes it shows."""
        now = time.time()
        if kind not in self._base_at:
            self._base[kind], self._base_at[kind] = dict(listed), now
            return
        for key in known.keys() - listed.keys():
            self._remember(Change(now, kind, key, None))
        for key, obj in listed.items():
            if _version(obj) != _version(known.get(key) or {}) or key not in known:
                self._remember(Change(now, kind, key, obj))

    def _remember(self, change: Change) -> None:
        self._log.append(change)
        if len(self._log) > MAX_CHANGES:  # fold the oldest half into the start
            folded, self._log = self._log[:MAX_CHANGES // 2], self._log[MAX_CHANGES // 2:]
            for c in folded:
                _apply(self._base[c.kind], c)
                self._base_at[c.kind] = c.at

    def history(self, since: float, namespace: str | None = None, settled: float | None = None) -> History | None:
        """Pods (of `namespace`, or all) and nodes as they were at `since`, or at the first moment
        after it when this follower's view held every write made up to `settled` (default
        `since`: a fault's writes come during its apply, after its time), this process's and
        those `catch_up` found, then every change after; None when its record does not reach back
        to `since` (it started later, or folded that part away) or has not caught up yet."""
        def mine(kind: str, key: str) -> bool:
            return kind == "nodes" or namespace is None or key.startswith(f"{namespace}/")

        with self._changed:
            if self.recorded_from > since:
                return None
            state = {kind: dict(self._base[kind]) for kind in KINDS}
            changes = [c for c in self._log if mine(c.kind, c.key)]
            until = since if settled is None else max(since, settled)
            writes = [w for w in written.since(0) if w.kind in KINDS and w.at <= until and mine(w.kind, w.key)]
        i = 0
        while i < len(changes) and changes[i].at <= since:
            _apply(state[changes[i].kind], changes[i])
            i += 1
        pending = {(w.kind, w.key): w for w in writes if not _seen(w, state[w.kind].get(w.key))}
        at = since
        while pending and i < len(changes):  # judged only from when the view held them
            c = changes[i]
            _apply(state[c.kind], c)
            write = pending.get((c.kind, c.key))
            if write is not None and _seen(write, c.obj):
                del pending[(c.kind, c.key)]
            at, i = c.at, i + 1
        if pending:
            return None
        pods = [p for p in state["pods"].values() if namespace is None or p["metadata"]["namespace"] == namespace]
        return History(at, pods, list(state["nodes"].values()), changes[i:])

    def catch_up(self, at: float) -> None:
        """After another driver's action, which ended at `at`: one fresh LIST of pods and nodes,
        and every object the view did not hold as listed by `at` (it differs now, or the watch
        delivered it only after `at`) recorded as a write made at `at` (chaos.written), so no
        snapshot, and no history from `at`, misses what the action did. A failed LIST is ridden
        out: the view then only lacks what the watch has not delivered yet."""
        try:
            listed = {kind: {_key(kind, o): o for o in items} for kind, items in zip(
                KINDS, self.kube.batch(lambda lister: lister(), [self.kube.list_pods_raw, self.kube.list_nodes_raw]),
                strict=True)}
        except KilocardError:
            return
        with self._changed:
            known = {kind: dict(self._objects[kind]) for kind in KINDS}
            late = {(c.kind, c.key) for c in self._log if c.at > at}
        for kind in KINDS:
            for key, obj in listed[kind].items():
                if (kind, key) in late or key not in known[kind] or (
                        (_version(obj) or 0) > (_version(known[kind][key]) or 0)):
                    written.seen(kind, key, _version(obj), bool(obj["metadata"].get("deletionTimestamp")), at)
            for key in (known[kind].keys() | {k for c, k in late if c == kind}) - listed[kind].keys():
                written.seen(kind, key, None, True, at)

    def subscribe(self, namespace: str | None, listener: Callable[[str, Any], None]) -> Callable[[], None]:
        """Hand `listener` the pods of `namespace` (None: all) now, as ("SYNC", [pods]), then each
        of their events as the watch delivers it (ADDED|MODIFIED|DELETED, plain JSON; a re-list is
        a new SYNC), from the follower's thread and in order: one watch for every recorder of a
        run. Returns the function that ends it."""
        entry = (namespace, listener)
        with self._changed:
            listener("SYNC", self._pods_in(namespace))
            self._listeners.append(entry)

        def unsubscribe() -> None:
            with self._changed:
                if entry in self._listeners:
                    self._listeners.remove(entry)

        return unsubscribe

    def _pods_in(self, namespace: str | None) -> list[dict[str, Any]]:
        return [p for p in self._objects["pods"].values() if namespace in (None, p["metadata"]["namespace"])]

    def changes(self, namespace: str | None = None) -> int:
        """How many changes a probe of pods in `namespace` (or anywhere) may see it has had: a
        marker for `wait`."""
        with self._changed:
            return self._count(namespace)

    def _count(self, namespace: str | None) -> int:
        events = sum(self._pod_changes.values()) if namespace is None else self._pod_changes[namespace]
        return events + self._shared_changes

    def wait(self, seen: int, namespace: str | None, timeout: float) -> bool:
        """Wait for a change after marker `seen` (`changes`); False at the timeout or once the
        follower has stopped."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self.alive:
                if self._count(namespace) > seen:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return False
