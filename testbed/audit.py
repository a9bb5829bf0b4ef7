"""The testbed apiserver's audit log (pod writes only, see cluster.AUDIT_POLICY), read as ground
truth: its stage timestamps have microseconds, where object conditions have whole seconds."""

from __future__ import annotations

import calendar
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PodWrite:
    at: float  # stageTimestamp (ResponseComplete), epoch seconds
    verb: str
    subresource: str  # "", "binding", "status", "eviction"
    namespace: str
    name: str  # empty for a create with generateName


def _epoch(stamp: str) -> float:
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return calendar.timegm(tuple(int(x) for x in whole.replace("T", "-").replace(":", "-").split("-")) + (0, 0, 0)) \
        + float(f"0.{fraction or 0}")


def pod_writes(path: Path, namespace: str | None = None) -> list[PodWrite]:
    writes = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        if namespace and ref.get("namespace") != namespace:
            continue
        writes.append(PodWrite(_epoch(event["stageTimestamp"]), event["verb"], ref.get("subresource") or "",
                               ref.get("namespace") or "", ref.get("name") or ""))
    return sorted(writes, key=lambda w: w.at)


def first(writes: list[PodWrite], verb: str, name: str, subresource: str = "", after: float = 0.0) -> PodWrite | None:
    return next((w for w in writes if w.verb == verb and w.name == name and w.subresource == subresource
                 and w.at >= after), None)
