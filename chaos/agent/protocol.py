"""The node-agent protocol, version 1: what a fault request may say. One definition serves the
real node agent, the testbed's fake nodes and the toolkit's client (which checks a request before
sending it, so bad input is refused before anything is recorded or applied).

    POST /v1/faults  {"kind": <KINDS>, "target": {"card": 3} | {"interface": "eth0", "netns": "ns1"} | {},
                      "params": {...}, "ttl_seconds": 1..86400, "run_id": "..."}
                     header Idempotency-Key: <run>/<fault id>  (a retry returns the same fault, 200)

Network params: bandwidth {rate_mbit}; loss {percent}; delay {ms, jitter_ms}; loss and partition
may be scoped with {cidrs: ["10.0.0.0/8"], ports: [443], protocol: "tcp"|"udp"}.
"""

from __future__ import annotations

import ipaddress
import math
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

VERSION = "v1"
MAX_TTL_SECONDS = 24 * 3600
# A client's key for one fault request: the same key again returns the fault first created.
IDEMPOTENCY_HEADER = "Idempotency-Key"


class FaultError(ValueError):
    """Bad fault request; `field` names the offending field."""

    def __init__(self, field_name: str, message: str, status: int = 400) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.status = status


@dataclass
class Fault:
    """An active fault as an agent holds it, on node `node`."""

    id: str
    node: str
    kind: str
    target: dict[str, Any]
    params: dict[str, Any]
    ttl_seconds: float
    run_id: str
    created_at: float
    expires_at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "node": self.node, "kind": self.kind, "target": self.target, "params": self.params,
            "ttl_seconds": self.ttl_seconds, "run_id": self.run_id,
            "created_at": iso(self.created_at), "expires_at": iso(self.expires_at),
        }

    @classmethod
    def create(cls, node: str, spec: dict[str, Any]) -> Fault:
        """A new fault from a validated request (see `validate`)."""
        now = time.time()
        return cls(id=uuid.uuid4().hex[:12], node=node, kind=spec["kind"], target=spec["target"],
                   params=spec["params"], ttl_seconds=spec["ttl_seconds"], run_id=spec["run_id"],
                   created_at=now, expires_at=now + spec["ttl_seconds"])


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))



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
_INTERFACE = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")
_NETNS = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


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
    unknown_target = set(target) - {"card", "interface", "netns"}
    if unknown_target:
        raise FaultError("target", f"unknown keys {sorted(unknown_target)}")
    if "interface" in target and not (isinstance(target["interface"], str) and _INTERFACE.match(target["interface"])):
        raise FaultError("target.interface", f"expected an interface name, got {target['interface']!r}")
    if "netns" in target and not (isinstance(target["netns"], str) and _NETNS.match(target["netns"])):
        raise FaultError("target.netns", f"expected a network namespace name, got {target['netns']!r}")
    if kind in ("loss", "partition"):
        _scope(params)
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


def _scope(params: dict[str, Any]) -> None:
    """Optional destination scoping of nftables faults: CIDRs, ports, protocol."""
    cidrs = params.get("cidrs", [])
    if not isinstance(cidrs, list):
        raise FaultError("params.cidrs", f"expected a list of CIDRs, got {cidrs!r}")
    for c in cidrs:
        try:
            ipaddress.ip_network(c, strict=False)
        except (TypeError, ValueError):
            raise FaultError("params.cidrs", f"not a CIDR: {c!r}") from None
    ports = params.get("ports", [])
    if not isinstance(ports, list) or not all(isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536
                                              for p in ports):
        raise FaultError("params.ports", f"expected a list of ports 1-65535, got {ports!r}")
    if ports and params.get("protocol") not in ("tcp", "udp"):
        raise FaultError("params.protocol", "ports need a protocol: 'tcp' or 'udp'")
