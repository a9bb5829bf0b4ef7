"""The testbed apiserver's audit log (every write but the heartbeat, see cluster.AUDIT_POLICY),
read as ground truth: its stage timestamps have microseconds, where object conditions have whole
seconds, and each write names its user agent (`kilocard/<version> (<component>)` for ours)."""

from __future__ import annotations

import calendar
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Write:
    at: float  # stageTimestamp (ResponseComplete), epoch seconds
    verb: str
    resource: str
    subresource: str  # for pods: "", "binding", "status", "eviction"
    namespace: str
    name: str  # empty for a create with generateName
    user_agent: str


def _epoch(stamp: str) -> float:
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return calendar.timegm(tuple(int(x) for x in whole.replace("T", "-").replace(":", "-").split("-")) + (0, 0, 0)) \
        + float(f"0.{fraction or 0}")


def writes(path: Path, since: float = 0.0) -> list[Write]:
    found = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        found.append(Write(_epoch(event["stageTimestamp"]), event["verb"], ref.get("resource") or "",
                           ref.get("subresource") or "", ref.get("namespace") or "", ref.get("name") or "",
                           event.get("userAgent") or ""))
    return sorted((w for w in found if w.at >= since), key=lambda w: w.at)


def pod_writes(path: Path, namespace: str | None = None) -> list[Write]:
    return [w for w in writes(path) if w.resource == "pods" and (namespace is None or w.namespace == namespace)]


def first(found: list[Write], verb: str, name: str, subresource: str = "", after: float = 0.0) -> Write | None:
    return next((w for w in found if w.verb == verb and w.name == name and w.subresource == subresource
                 and w.at >= after), None)


def last(found: list[Write], verb: str, name: str, subresource: str = "", after: float = 0.0) -> Write | None:
    """The latest matching write: a kwok pod's Ready status write is its last status write (the
    first may only set its IP or Running)."""
    return next((w for w in reversed(found) if w.verb == verb and w.name == name and w.subresource == subresource
                 and w.at >= after), None)
