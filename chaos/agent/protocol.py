"""The node-agent protocol, version 1: what a fault request may say. One definition serves the
real node agent, the testbed's fake nodes and the toolkit's client (which checks a request before
sending it, so bad input is refused before anything is recorded or applied).

    POST /v1/faults  {"kind": <KINDS>, "target": {"card": 3} | {"interface": "eth0", "netns": "ns1"} |
                      {"pod_uid": "...", "container_id": "..."} | {}, "params": {...},
                      "ttl_seconds": 1..86400, "run_id": "..."}
                     header Idempotency-Key: <run>/<fault id>  (a retry returns the same fault, 200)
    GET  /v1/faults/<id>/effect  the fault's effect read back: {"id", "status": confirmed | mismatch |
                     inconclusive, "evidence": "..."}; 404 once the fault has ended

Each kind's parameters are its module's in chaos.agent.kinds (network: bandwidth {rate_mbit};
loss {percent}; delay {ms, jitter_ms}; loss and partition scoped with {cidrs, ports, protocol}).
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from chaos.agent import kinds, schema
from chaos.agent.schema import FaultError

VERSION = "v1"
MAX_TTL_SECONDS = 24 * 3600
# What reading a fault's effect back says: it is there, it is not, or it cannot be told.
CONFIRMED, MISMATCH, INCONCLUSIVE = "confirmed", "mismatch", "inconclusive"
# A client's key for one fault request: the same key again returns the fault first created.
IDEMPOTENCY_HEADER = "Idempotency-Key"
# The name every agent's certificate carries and every caller checks, whatever address the agent
# answers on (its node's IP): one certificate serves the whole DaemonSet.
AGENT_TLS_NAME = "kilocard-agent.kilocard-system.svc"


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
    # What the apply read before it changed anything, for the revert to restore exactly (a card's
    # power limit); kept in the agent's state file, never sent to callers.
    saved: dict[str, Any] = field(default_factory=dict)

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


_RUN_ID = re.compile(r"^[A-Za-z0-9._:-]{0,128}$")
_INTERFACE = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")
_NETNS = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def validate(body: Any) -> dict[str, Any]:
    """Check a fault request; return it normalised. Every error names its field; the kind's own
    module (chaos.agent.kinds) checks its parameters."""
    if not isinstance(body, dict):
        raise FaultError("body", "expected a JSON object")
    kind = kinds.get(body.get("kind"))
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
    allowed = set(kinds.TARGET_KEYS[kind.TARGET])
    unknown_target = set(target) - allowed
    if unknown_target:
        raise FaultError("target", f"unknown keys {sorted(unknown_target)} for {kind.NAME}; expected {sorted(allowed)}")
    if hasattr(kind, "check_target"):
        kind.check_target(target)
    if kind.TARGET == "card":
        card = target.get("card")
        if isinstance(card, bool) or not isinstance(card, int) or card < 0:
            raise FaultError("target.card", f"expected a card index, got {card!r}")
    if "interface" in target and not (isinstance(target["interface"], str) and _INTERFACE.match(target["interface"])):
        raise FaultError("target.interface", f"expected an interface name, got {target['interface']!r}")
    if "netns" in target and not (isinstance(target["netns"], str) and _NETNS.match(target["netns"])):
        raise FaultError("target.netns", f"expected a network namespace name, got {target['netns']!r}")
    return {"kind": kind.NAME, "target": target, "params": schema.check(params, kind.PARAMS),
            "ttl_seconds": float(ttl), "run_id": run_id}


__all__ = ["CONFIRMED", "IDEMPOTENCY_HEADER", "INCONCLUSIVE", "MAX_TTL_SECONDS", "MISMATCH", "VERSION", "Fault",
           "FaultError", "iso", "validate"]
