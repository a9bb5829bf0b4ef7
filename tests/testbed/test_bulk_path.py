"""The bulk path against the real apiserver: many DELETEs as streams of one HTTP/2 connection,
each with its own outcome; LISTs paginated with limit/continue and, for snapshots, read from the
watch cache; a stopped follower's watch cut at once rather than at its timeout."""

from __future__ import annotations

import threading
import time

import pytest

from chaos import kube as kube_module
from chaos.errors import Conflict, NotFound
from chaos.kube import Kube

pytestmark = pytest.mark.testbed


def bare_pod(name: str, node: str, pool: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": pool},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "none"}],
                     "tolerations": [{"key": "kilocard.io/pool", "operator": "Exists"}]}}


def test_deletes_share_one_http2_connection_and_each_gets_its_own_outcome(testbed, kube, pool):
    p = pool(1)
    kube.ensure_namespace(p.namespace)
    for i in range(3):
        kube.apply(bare_pod(f"bulk-{i}", p.node_names[0], p.namespace))
    uids = {x["metadata"]["name"]: x["metadata"]["uid"] for x in kube.list_pods_raw(p.namespace)}
    fresh = Kube.from_kubeconfig(testbed.paths.kubeconfig)
    try:
        outcomes = fresh.delete_pods([(p.namespace, "bulk-0", uids["bulk-0"]),
                                      (p.namespace, "bulk-1", "not-its-uid"),  # another incarnation's uid
                                      (p.namespace, "no-such-pod", None),
                                      (p.namespace, "bulk-2", uids["bulk-2"])], grace_seconds=0)
        assert outcomes[0] is None and outcomes[3] is None
        assert isinstance(outcomes[1], Conflict) and "precondition" in str(outcomes[1]).lower()
        assert isinstance(outcomes[2], NotFound)
        connections = fresh._h2().pool.connections
        assert [c.info() for c in connections] and all("HTTP/2" in c.info() for c in connections)
        assert len(connections) == 1
    finally:
        fresh.close()
    left = {x["metadata"]["name"] for x in kube.list_pods_raw(p.namespace) if not x["metadata"].get("deletionTimestamp")}
    assert left == {"bulk-1"}  # the precondition kept the pod whose uid did not match


def test_lists_page_through_continue_and_snapshots_read_the_watch_cache(testbed, kube, monkeypatch):
    everything = sorted(n["metadata"]["name"] for n in kube.list_nodes_raw())
    monkeypatch.setattr(kube_module.api, "LIST_PAGE", 1)  # the test testbed is small: a page per node
    before = testbed.apiserver_requests(("nodes",), ("LIST",))
    paged = sorted(n["metadata"]["name"] for n in kube.list_nodes_raw())
    pages = testbed.apiserver_requests(("nodes",), ("LIST",)) - before
    assert paged == everything and len(everything) >= 3
    assert pages >= len(everything)  # one request per page (other clients may add a few)
    cached = sorted(n["metadata"]["name"] for n in kube.list_nodes_raw(cached=True))
    assert cached == everything


def test_a_stopped_follower_lets_go_at_once(testbed):
    fresh = Kube.from_kubeconfig(testbed.paths.kubeconfig)
    stop, seen, retries = threading.Event(), [], dict(kube_module.retries())

    def follow() -> None:
        for kind, _obj in fresh.events("nodes", stop=stop, raw=True):
            seen.append(kind)

    thread = threading.Thread(target=follow)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while "SYNC" not in seen and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # the watch request is open and waiting (60 s long)
        stopped = time.monotonic()
        stop.set()
        thread.join(timeout=10)
        assert not thread.is_alive() and time.monotonic() - stopped < 1.0
        assert kube_module.retries() == retries  # a cut watch is not a dropped connection
    finally:
        stop.set()
        fresh.close()
