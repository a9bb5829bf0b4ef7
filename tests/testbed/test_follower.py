"""The run's follower against the real apiserver: snapshots read from memory (no LIST while it
runs), this process's own writes always in them even when the watch is slow to deliver them (and
the twin: without waiting for them, the slow watch shows the moment before the write), its
recorders fed by its one watch, and LISTs again once it has stopped."""

from __future__ import annotations

import time

import pytest

from chaos import follower as follower_module
from chaos.follower import Follower
from probes import recovery, snapshot

pytestmark = pytest.mark.testbed


def bare_pod(name: str, node: str, namespace: str, model: str = "m") -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"kilocard.io/model": model}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "none"}],
                     "tolerations": [{"key": "kilocard.io/pool", "operator": "Exists"}]}}


def live(s: snapshot.ClusterSnapshot, namespace: str) -> set[str]:
    return {p.name for p in s.pods if p.namespace == namespace and not p.deleting}


def counting_lists(kube, monkeypatch) -> list[str]:
    """The paths this client LISTs from now on (the testbed's controllers list too, so the
    apiserver's own count cannot tell a snapshot's LIST from theirs)."""
    listed: list[str] = []
    list_raw = kube.list_raw

    def counted(what, path, *args, **kwargs):
        listed.append(path)
        return list_raw(what, path, *args, **kwargs)

    monkeypatch.setattr(kube, "list_raw", counted)
    return listed


def test_snapshots_come_from_memory_and_lists_come_back_once_it_stops(kube, pool, monkeypatch):
    p = pool(1)
    kube.ensure_namespace(p.namespace)
    kube.apply(bare_pod("r0", p.node_names[0], p.namespace))
    f = Follower(kube).start()
    listed = counting_lists(kube, monkeypatch)
    try:
        shots = [snapshot.fetch(kube) for _ in range(20)]
        assert listed == []  # twenty snapshots, no LIST
        assert all(live(s, p.namespace) == {"r0"} for s in shots)
        assert {n.name for n in shots[-1].nodes} >= set(p.node_names)
        assert snapshot.source_for(kube) is f and f.lists == 2
    finally:
        f.stop()
    assert snapshot.source_for(kube) is None
    assert live(snapshot.fetch(kube), p.namespace) == {"r0"}
    assert sorted(listed) == ["/api/v1/nodes", "/api/v1/pods"]


class SlowFollower(Follower):
    """A follower whose watch hands each event over 1.5 s late, as a loaded process might."""

    def _follow(self, kind: str) -> None:
        events = self.kube.events

        def late(*args, **kwargs):
            for event, obj in events(*args, **kwargs):
                if event != "SYNC":
                    time.sleep(1.5)
                yield event, obj

        self.kube = _With(self.kube, events=late)
        super()._follow(kind)


class _With:
    def __init__(self, wrapped, **overrides):
        self._wrapped, self._overrides = wrapped, overrides

    def __getattr__(self, name):
        return self._overrides.get(name) or getattr(self._wrapped, name)


def test_a_snapshot_right_after_a_write_has_the_write_even_when_the_watch_lags(kube, pool, monkeypatch):
    p = pool(1)
    kube.ensure_namespace(p.namespace)
    for name in ("a", "b"):
        kube.apply(bare_pod(name, p.node_names[0], p.namespace))
    f = SlowFollower(kube).start()
    try:
        kube.delete_pod(p.namespace, "a", grace_seconds=0)
        started = time.monotonic()
        assert live(snapshot.fetch(kube), p.namespace) == {"b"}  # waited for the watch to deliver it
        assert time.monotonic() - started >= 1.0
        kube.patch_node(p.node_names[0], {"spec": {"unschedulable": True}})
        view = snapshot.fetch(kube).node(p.node_names[0])
        assert view is not None and view.unschedulable
        # The twin: a follower that does not wait for this process's writes serves the moment before.
        monkeypatch.setattr(follower_module, "CATCH_UP_SECONDS", 0.0)
        monkeypatch.setattr(follower_module.written, "since", lambda _seq: [])
        kube.delete_pod(p.namespace, "b", grace_seconds=0)
        assert live(snapshot.fetch(kube), p.namespace) == {"b"}
    finally:
        f.stop()
        kube.patch_node(p.node_names[0], {"spec": {"unschedulable": False}})


def test_a_write_the_watch_never_delivers_in_time_sends_the_snapshot_back_to_a_list(kube, pool, monkeypatch):
    p = pool(1)
    kube.ensure_namespace(p.namespace)
    kube.apply(bare_pod("a", p.node_names[0], p.namespace))
    f = SlowFollower(kube).start()
    monkeypatch.setattr(follower_module, "CATCH_UP_SECONDS", 0.2)
    try:
        kube.delete_pod(p.namespace, "a", grace_seconds=0)
        listed = counting_lists(kube, monkeypatch)
        assert live(snapshot.fetch(kube), p.namespace) == set()  # listed, not served stale
        assert sorted(listed) == ["/api/v1/nodes", "/api/v1/pods"]
    finally:
        f.stop()


def test_recorders_and_waits_ride_on_its_one_watch(kube, pool, monkeypatch):
    p = pool(1)
    kube.ensure_namespace(p.namespace)
    kube.apply(bare_pod("old", p.node_names[0], p.namespace, model="big"))
    kube.apply(bare_pod("other", p.node_names[0], p.namespace, model="small"))
    f = Follower(kube).start()
    listed = counting_lists(kube, monkeypatch)
    watched = []
    monkeypatch.setattr(kube, "events", lambda *a, **k: watched.append(a) or iter(()))
    try:
        with recovery.Recorder(kube, p.namespace, ["big"]) as recorder:
            kube.delete_pod(p.namespace, "old", grace_seconds=0)
            kube.delete_pod(p.namespace, "other", grace_seconds=0)
            kube.apply(bare_pod("new", p.node_names[0], p.namespace, model="big"))
            waited = snapshot.moments(kube, "nvidia.com/gpu", p.namespace, "kilocard.io/model", time.time(),
                                      until=time.time() + 20)
            assert next((m for m in waited if "new" in live(m.snapshot, p.namespace)), None), (
                "the wait never saw the new pod")
        assert listed == [] and watched == []  # no list or watch of their own
        phases = {(e.pod, e.phase) for e in recorder.events}
        assert {("old", "deleted"), ("old", "gone"), ("new", "created"), ("new", "scheduled")} <= phases
        assert not any(pod == "other" for pod, _ in phases)  # outside the recorder's selector
    finally:
        f.stop()
