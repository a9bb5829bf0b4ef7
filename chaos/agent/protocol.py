"""The node-agent protocol, version 1: what a fault request may say. One definition serves the
real node agent, the testbed's fake nodes and the toolkit's client (which checks a request before
sending it, so bad input is refused before anything is recorded or applied).

    POST /v1/faults  {"kind": <KINDS>, "target": {"card": 3} | {"interface": "eth0"} | {"pod_uid": ...} | {},
                      "params": {...}, "ttl_seconds": 1..86400, "run_id": "..."}
"""

from __future__ import annotations

import math
import re
from typing import Any

VERSION = "v1"
MAX_TTL_SECONDS = 24 * 3600


class FaultError(ValueError):
    """Bad fault request; `field` names the offending field."""

    def __init__(self, field_name: str, message: str, status: int = 400) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.status = status


KINDS = {
    "ecc": {"target": "card"},
    "xid": {"target": "card"},
    "card-isolate": {"target": "card"},
    "bandwidth": {"target": "node"},
    "loss": {"target": "node"},
    "partition": {"target": "node"},
    "delay": {"target": "node"},
}
_RUN_ID = re.compile(r"^[A-Za-z0-9._:-]{0,128}$")


def _number(params: dict[str, Any], name: str, low: float, high: float, required: bool,
            default: float | None = None) -> float | None:
    if name not in params:
        if required:
            raise FaultError(f"params.{name}", "required")
        return default
    value = params[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not low <= value <= high:
        raise FaultError(f"params.{name}", f"expected a number from {low:g} to {high:g}, got {value!r}")
    return float(value)


def validate(body: Any) -> dict[str, Any]:
    """Check a fault request; return it normalised. Every error names its field."""
    if not isinstance(body, dict):
        raise FaultError("body", "expected a JSON object")
    kind = body.get("kind")
    if kind not in KINDS:
        raise FaultError("kind", f"unknown fault kind {kind!r}; expected one of {', '.join(sorted(KINDS))}")
    ttl = body.get("ttl_seconds")
    if ttl is None:
        raise FaultError("ttl_seconds", "required: every fault expires")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl <= MAX_TTL_SECONDS:
        raise FaultError("ttl_seconds", f"expected a number of seconds from 1 to {MAX_TTL_SECONDS}, got {ttl!r}")
    target = body.get("target", {})
    if not isinstance(target, dict):
        raise FaultError("target", "expected an object")
    params = body.get("params", {})
    if not isinstance(params, dict):
        raise FaultError("params", "expected an object")
    run_id = body.get("run_id", "")
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise FaultError("run_id", "expected up to 128 letters, digits or ._:-")
    if KINDS[kind]["target"] == "card":
        card = target.get("card")
        if isinstance(card, bool) or not isinstance(card, int):
            raise FaultError("target.card", f"expected a card index, got {card!r}")
    unknown_target = set(target) - {"card", "interface", "pod_uid"}
    if unknown_target:
        raise FaultError("target", f"unknown keys {sorted(unknown_target)}")
    if kind == "ecc":
        if params.get("type", "dbe") not in ("dbe", "sbe"):
            raise FaultError("params.type", f"expected 'dbe' or 'sbe', got {params.get('type')!r}")
        if not isinstance(params.get("count", 1), int) or not 1 <= params.get("count", 1) <= 10**6:
            raise FaultError("params.count", f"expected an integer from 1 to 1000000, got {params.get('count')!r}")
        _number(params, "speed", 0, 1, False)
    elif kind == "xid":
        _number(params, "xid", 1, 1000, True)
        _number(params, "speed", 0, 1, False)
    elif kind == "bandwidth":
        _number(params, "rate_mbit", 0.001, 1e7, True)
    elif kind == "loss":
        _number(params, "percent", 0, 100, True)
    elif kind == "delay":
        _number(params, "ms", 0, 60_000, True)
        _number(params, "jitter_ms", 0, 60_000, False)
    return {"kind": kind, "target": target, "params": params, "ttl_seconds": float(ttl), "run_id": run_id}
