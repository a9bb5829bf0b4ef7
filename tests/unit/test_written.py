"""What counts as this process's write to a pod or node (chaos.written), and the label selectors
the follower's subscribers filter by (chaos.vocabulary.selects), as pure logic."""

import pytest

from chaos import written
from chaos.vocabulary import selects

POD = b'{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns","uid":"u","resourceVersion":"42",' \
      b'"annotations":{"note":"{\\"resourceVersion\\":\\"7\\"}"}},"spec":{}}'


def latest(kind, key):
    return next(w for w in reversed(written.since(0)) if (w.kind, w.key) == (kind, key))


def test_writes_to_named_pods_and_nodes_are_kept_with_their_versions():
    mark = written.last()
    written.note("PATCH", "/api/v1/nodes/gpu-1", b'{"metadata":{"name":"gpu-1","resourceVersion":"9"}}')
    written.note("PATCH", "/api/v1/nodes/gpu-1/status", b'{"metadata":{"name":"gpu-1","resourceVersion":"11"}}')
    written.note("DELETE", "/prefix/k8s/clusters/c1/api/v1/namespaces/ns/pods/p", POD)  # behind a proxy's prefix
    written.note("POST", "/api/v1/namespaces/ns/pods/q/eviction", b'{"kind":"Status","status":"Success"}')
    written.note("POST", "/api/v1/nodes", b'{"metadata":{"resourceVersion":"5"}}')  # a create names no object yet
    written.note("PATCH", "/api/v1/namespaces/ns/configmaps/c", b'{"metadata":{"resourceVersion":"6"}}')
    written.note("GET", "/api/v1/nodes/gpu-2", b'{"metadata":{"resourceVersion":"8"}}')
    newer = written.since(mark)
    assert [(w.kind, w.key) for w in newer] == [("nodes", "gpu-1"), ("pods", "ns/p"), ("pods", "ns/q")]
    node, pod, evicted = newer
    assert (node.version, node.deleted) == (11, False)  # the latest write of an object only
    assert (pod.version, pod.deleted) == (42, True)  # metadata's version, not the one in an annotation's text
    assert (evicted.version, evicted.deleted) == (None, True)
    assert written.since(written.last()) == []


def test_the_log_keeps_one_entry_per_object_however_often_it_is_written():
    for i in range(1000):
        written.note("PATCH", "/api/v1/nodes/busy", b'{"metadata":{"resourceVersion":"%d"}}' % (100 + i))
    assert latest("nodes", "busy").version == 1099
    assert sum(1 for w in written.since(0) if w.key == "busy") == 1


@pytest.mark.parametrize(("selector", "expected"), [
    (None, True), ("", True), ("kilocard.io/model", True), ("!kilocard.io/model", False), ("!other", True),
    ("kilocard.io/model=big", True), ("kilocard.io/model==big", True), ("kilocard.io/model!=big", False),
    ("kilocard.io/model in (small,big)", True), ("kilocard.io/model in (small)", False),
    ("kilocard.io/model notin (small)", True), ("kilocard.io/model notin (big, small)", False),
    ("absent in (x)", False), ("absent notin (x)", True), ("absent!=x", True),
    ("kilocard.io/model in (big,small),tier=gold", True), ("kilocard.io/model in (big,small),tier=silver", False),
])
def test_label_selectors_select_as_the_apiserver_does(selector, expected):
    assert selects(selector, {"kilocard.io/model": "big", "tier": "gold"}) is expected


def test_the_writes_to_a_cluster_torn_down_are_forgotten():
    """Twins of one cluster share node names: a write to the last twin must not hold the next
    one's follower back forever (its history would never have caught up)."""
    written.note("PATCH", "/api/v1/nodes/gpu-7", b'{"metadata":{"name":"gpu-7","resourceVersion":"41"}}')
    mark = written.last()
    written.forget()
    assert written.since(0) == [] and written.last() == mark  # the sequence goes on: older marks stay valid
