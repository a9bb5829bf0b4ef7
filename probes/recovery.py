"""Recovery timelines from watch events as they arrive (not from polling): for each killed or
evicted replica pod, when it was deleted and when it was gone (its drain over, its cards free),
and when its replacement was created, scheduled (on which node), first failed to pull its image
(a registry outage: the kubelet backs off), started (image pulled) and Ready (weights loaded,
warmed up). Times are wall-clock at arrival; the API's own timestamps (1 s
resolution) ride along to cross-check them."""

from __future__ import annotations

import calendar
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chaos.vocabulary import quiet_thread, ready
from probes import snapshot
from probes.pulls import PULL_FAILURES
from probes.verdict import Verdict, failed, passed

if TYPE_CHECKING:
    from chaos.kube import Kube


@dataclass(frozen=True)
class Event:
    at: float  # wall-clock seconds when the watch event arrived
    phase: str  # deleted | gone | created | scheduled | pull_failed | started | ready
    pod: str
    uid: str
    node: str | None
    api_at: float | None  # the API's own timestamp of the same transition, 1 s resolution


def _ts(value: str | None) -> float | None:
    """An API timestamp (RFC 3339, whole seconds) as epoch seconds."""
    return float(calendar.timegm(time.strptime(value, "%Y-%m-%dT%H:%M:%SZ"))) if value else None


def _running(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The running state of the first container that has started, if one has."""
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        if (c.get("state") or {}).get("running") is not None:
            return dict(c["state"]["running"])
    return None


def _condition_time(pod: dict[str, Any], kind: str) -> float | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return _ts(c.get("lastTransitionTime"))
    return None


class Recorder:
    """Follows the pods of `models` (by kilocard's label or what their serving stack says) in a
    background thread, turning state changes into events: on the run's follower when one runs
    (chaos.follower: no request of its own), else one list + watch of the namespace."""

    def __init__(self, kube: Kube, namespace: str, models: Collection[str]) -> None:
        self.kube, self.namespace, self.models = kube, namespace, set(models)
        self.pods: dict[str, dict[str, Any]] = {}  # the namespace's pods that may serve a model
        self.events: list[Event] = []
        self.seen: dict[str, set[str]] = {}
        self.stop = threading.Event()
        self.synced = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self._unsubscribe: Any = None

    def start(self) -> Recorder:
        """Follow from now on: returns once the initial list is in (at most 30 s)."""
        source = snapshot.source_for(self.kube)
        if source is not None:
            self._unsubscribe = source.subscribe(self.namespace, self._selected)
        else:
            self.thread.start()
        self.synced.wait(30)
        return self

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.detach()
        if self.thread.is_alive():
            self.thread.join(timeout=35)

    def detach(self) -> list[Event]:
        """Stop following without waiting for the thread (its watch is cut at once, then the
        daemon thread ends): the events so far."""
        self.stop.set()
        if self._unsubscribe is not None:
            self._unsubscribe()
        return list(self.events)

    def _emit(self, phase: str, pod: dict[str, Any], api_at: float | None) -> None:
        meta = pod["metadata"]
        phases = self.seen.setdefault(meta["uid"], set())
        if phase not in phases:
            phases.add(phase)
            self.events.append(Event(time.time(), phase, meta["name"], meta["uid"],
                                     (pod.get("spec") or {}).get("nodeName"), api_at))

    def _run(self) -> None:
        quiet_thread()
        for kind, obj in self.kube.events("pods", self.namespace, None, stop=self.stop, raw=True):
            self._selected(kind, obj)

    def _selected(self, kind: str, obj: Any) -> None:
        """An event: the pods of this recorder's models only (a pod that names no model, a
        worker, is one of theirs when its group's or workload's pods are)."""
        if kind == "SYNC":
            self.pods = {p["metadata"]["uid"]: p for p in obj if snapshot.may_serve(p, None)}
            found = snapshot.identities(self.pods.values())
            self._on(kind, [p for p in self.pods.values() if snapshot.model_of(p, found) in self.models])
            return
        if not snapshot.may_serve(obj, None):
            return
        self.pods[obj["metadata"]["uid"]] = obj
        ours = snapshot.model_of(obj, snapshot.identities(self.pods.values())) in self.models
        if kind == "DELETED":
            self.pods.pop(obj["metadata"]["uid"], None)
        if ours:
            self._on(kind, obj)

    def _on(self, kind: str, obj: Any) -> None:
        if kind == "SYNC":
            for pod in obj:  # what exists at the start is the "before", not an event
                self.seen[pod["metadata"]["uid"]] = (
                    {"created", "scheduled", "started", "ready"} if ready(pod) else {"created"})
            self.synced.set()
            return
        meta = obj["metadata"]
        if kind == "DELETED" or meta.get("deletionTimestamp"):
            # deletionTimestamp is when the grace period ends, not when the delete came.
            ends = _ts(meta.get("deletionTimestamp"))
            grace = meta.get("deletionGracePeriodSeconds") or 0
            self._emit("deleted", obj, ends - grace if ends is not None else None)
            if kind == "DELETED":
                self._emit("gone", obj, None)
            return
        self._emit("created", obj, _ts(meta.get("creationTimestamp")))
        if (obj.get("spec") or {}).get("nodeName"):
            self._emit("scheduled", obj, _condition_time(obj, "PodScheduled"))
        if any(reason in PULL_FAILURES for reason in snapshot.waiting_reasons(obj)):
            self._emit("pull_failed", obj, None)
        running = _running(obj)
        if running is not None:
            self._emit("started", obj, _ts(running.get("startedAt")))
        if ready(obj):
            self._emit("ready", obj, _condition_time(obj, "Ready"))


def timeline(events: list[Event], fault_at: float) -> dict[str, Any]:
    """Pure: pair each pod deleted after the fault with the replacement created after it
    (in order), and time each phase from the fault."""
    deleted = [e for e in events if e.phase == "deleted" and e.at >= fault_at]
    created = [e for e in events if e.phase == "created" and e.at >= fault_at]
    by_uid: dict[str, dict[str, Event]] = {}
    for e in events:
        by_uid.setdefault(e.uid, {})[e.phase] = e
    replicas = []
    used: set[str] = set()
    for d in sorted(deleted, key=lambda e: e.at):
        new = next((c for c in sorted(created, key=lambda e: e.at) if c.uid not in used and c.uid != d.uid), None)
        entry: dict[str, Any] = {"pod": d.pod, "deleted": d.at - fault_at}
        if "gone" in by_uid[d.uid]:
            entry["gone"] = by_uid[d.uid]["gone"].at - fault_at
        if new is not None:
            used.add(new.uid)
            phases = by_uid[new.uid]
            entry.update(replacement=new.pod, created=new.at - fault_at)
            if "scheduled" in phases:
                entry.update(scheduled=phases["scheduled"].at - fault_at, node=phases["scheduled"].node)
            for phase in ("pull_failed", "started"):
                if phase in phases:
                    entry[phase] = phases[phase].at - fault_at
            if "ready" in phases:
                entry.update(ready=phases["ready"].at - fault_at)
        replicas.append(entry)
    return {"replicas": replicas}


def within(events: list[Event], fault_at: float, budget: float, expected: int) -> Verdict:
    """Every one of `expected` replicas back to Ready within `budget` seconds of the fault."""
    t = timeline(events, fault_at)
    done = [r for r in t["replicas"] if "ready" in r]
    slowest = max((r["ready"] for r in done), default=None)
    if len(done) < expected:
        return failed(f"{len(done)} of {expected} replicas back to Ready (budget {budget:g} s)", **t)
    if slowest is not None and slowest > budget:
        return failed(f"recovery took {slowest:.2f} s, over the {budget:g} s budget", slowest=slowest, **t)
    return passed(f"{expected} replicas back to Ready in {slowest:.2f} s (budget {budget:g} s)", slowest=slowest, **t)
