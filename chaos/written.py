"""The writes this process made to pods and nodes, each with the resourceVersion its reply gave,
so that a follower of the cluster (chaos.follower) serves no snapshot that misses one of them:
read-your-writes over a watch. A probe right after a fault then sees the fault, never the moment
before it.

Only the latest write per object is kept (a long-running simulator patches the same nodes for
hours), in the order they were made.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

# A named pod or node, or one of its subresources (status, eviction, binding); after any prefix a
# proxy in front of the apiserver adds.
_PATH = re.compile(r"/api/v1/(?:namespaces/(?P<namespace>[^/?]+)/)?(?P<kind>pods|nodes)/(?P<name>[^/?]+)"
                   r"(?:/(?P<subresource>[^/?]+))?$")
# The first resourceVersion of an object's JSON is its metadata's: ObjectMeta comes first, and
# one inside an annotation's text has its quotes escaped.
_VERSION = re.compile(rb'"resourceVersion"\s*:\s*"(\d+)"')


@dataclass(frozen=True)
class Write:
    kind: str  # "pods" or "nodes"
    key: str  # "namespace/name" for a pod, the name for a node
    version: int | None  # the object's resourceVersion after the write; None when the reply has none
    deleted: bool  # a DELETE or an eviction: it ends deleted (or terminating)
    seq: int
    at: float  # when it was made (epoch seconds)


_log: OrderedDict[tuple[str, str], Write] = OrderedDict()
_lock = threading.Lock()
_seq = 0


def note(method: str, path: str, reply: bytes | None) -> None:
    """Record a successful request if it wrote a named pod or node."""
    found = _PATH.search(path.split("?", 1)[0])
    if method == "GET" or found is None or (found["kind"] == "pods") != bool(found["namespace"]):
        return
    eviction = found["subresource"] == "eviction"
    version = None if eviction or not reply else _VERSION.search(reply)
    key = f"{found['namespace']}/{found['name']}" if found["namespace"] else found["name"]
    seen(found["kind"], key, int(version[1]) if version else None, method == "DELETE" or eviction, time.time())


def seen(kind: str, key: str, version: int | None, deleted: bool, at: float) -> None:
    """Record a write to wait for: this process's own, or another actor's that a fresh LIST showed
    (a Chaos Toolkit action of another driver: chaos.follower's catch_up)."""
    global _seq
    with _lock:
        _seq += 1
        _log[(kind, key)] = Write(kind, key, version, deleted, _seq, at)
        _log.move_to_end((kind, key))


def last() -> int:
    """The sequence number of the latest write so far (0: none)."""
    with _lock:
        return _seq


def since(seq: int) -> list[Write]:
    """The writes after `seq`, oldest first (the latest of each object)."""
    with _lock:
        newer = []
        for write in reversed(_log.values()):
            if write.seq <= seq:
                break
            newer.append(write)
    return newer[::-1]


def forget() -> None:
    """Drop every write noted: the cluster they were made to is gone (a twin torn down), so no
    view of another cluster can ever show them (nodes of twins of one cluster share names)."""
    with _lock:
        _log.clear()
