"""The node agent: faults applied on this node, each with a TTL, all reverted on the way out.

Loop: (1) the HTTP server takes create/list/delete calls and reads effects back (bearer token;
kinds outside the allowlist get 403); (2) a reaper, twice a second, reverts expired faults and re-injects active
DCGM faults; (3) every change is written to a state file, so an agent restarted after a crash
reverts what its predecessor left; (4) SIGTERM reverts everything, then exits.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import time
from pathlib import Path
from typing import Any

from chaos.agent import kinds
from chaos.agent.backends import Backends, CommandFailed
from chaos.agent.http import JsonHandler, TokenServer
from chaos.agent.protocol import Fault, FaultError, validate


class Store:
    """The agent's active faults: the FaultStore the HTTP routes serve."""

    def __init__(self, backends: Backends, node: str, allow: frozenset[str], state_file: Path | None) -> None:
        self.backends = backends
        self.node = node
        self.allow = allow
        self.state_file = state_file
        self.lock = threading.RLock()
        self.faults: dict[str, Fault] = {}
        self.ended: set[str] = set()
        self.by_key: dict[str, dict[str, Any]] = {}  # idempotency key -> the fault it created
        self.errors: list[str] = []

    # --- the FaultStore protocol -------------------------------------------------------------------
    def add(self, body: Any, key: str | None = None) -> tuple[int, dict[str, Any]]:
        spec = validate(body)
        if spec["kind"] not in self.allow:
            raise FaultError("kind", f"{spec['kind']} is not allowlisted on this agent "
                                     f"(allowed: {', '.join(sorted(self.allow))})", status=403)
        with self.lock:
            if key and key in self.by_key:
                return 200, self.by_key[key]
            target = {**spec["target"], "interface": self.backends.interface(spec["target"])}
            for other in self.faults.values():
                theirs = {**other.target, "interface": self.backends.interface(other.target)}
                if not kinds.stackable(spec["kind"], target, other.kind, theirs):
                    raise FaultError("target", f"{json.dumps(spec['target'])} already has a {other.kind} fault "
                                               f"({other.id}, run {other.run_id or '?'})", status=409)
            fault = Fault.create(self.node, spec)
            try:
                self.backends.apply(fault)
            except CommandFailed as exc:
                raise FaultError("kind", f"could not apply: {exc}", status=500) from None
            self.faults[fault.id] = fault
            if key:
                self.by_key[key] = fault.to_json()
            self._save()
            return 201, fault.to_json()

    def active(self) -> list[dict[str, Any]]:
        with self.lock:
            return [f.to_json() for f in self.faults.values()]

    def delete(self, fault_id: str) -> str:
        with self.lock:
            fault = self.faults.get(fault_id)
            if fault is not None:
                self._revert(fault)
                return "reverted"
            if fault_id in self.ended:
                return "already ended"
            raise KeyError(fault_id)

    def observe(self, fault_id: str) -> tuple[str, str, bool]:
        with self.lock:
            fault = self.faults[fault_id]
        return self.backends.observe(fault)  # outside the lock: a read-back may take a while (tc's rate)

    # --- lifecycle ---------------------------------------------------------------------------------
    def _revert(self, fault: Fault) -> None:
        self.backends.revert(fault)  # raises if the node refuses: the fault stays listed
        self.faults.pop(fault.id, None)
        self.ended.add(fault.id)
        self._save()

    def reap(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        with self.lock:
            for fault in list(self.faults.values()):
                try:
                    if fault.expires_at <= now:
                        self._revert(fault)
                    else:
                        self.backends.refresh(fault)  # a real sample overwrites an injected one
                except Exception as exc:  # noqa: BLE001 - one fault's failure must not stop the others' reverts
                    self.errors.append(f"{fault.id}: {exc}")

    def revert_all(self) -> list[str]:
        """Revert everything (shutdown); return what could not be reverted."""
        with self.lock:
            for fault in list(self.faults.values()):
                try:
                    self._revert(fault)
                except Exception as exc:  # noqa: BLE001 - one fault's failure must not stop the others' reverts
                    self.errors.append(f"{fault.id}: {exc}")
            return sorted(self.faults)

    def _save(self) -> None:
        if self.state_file is None:
            return
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps([f.__dict__ for f in self.faults.values()]))
        os.replace(tmp, self.state_file)

    def revert_leftovers(self) -> list[str]:
        """At start: revert what a crashed predecessor recorded in the state file."""
        if self.state_file is None or not self.state_file.is_file():
            return []
        with self.lock:
            for data in json.loads(self.state_file.read_text() or "[]"):
                fault = Fault(**data)
                self.faults[fault.id] = fault
            left = self.revert_all()
        return left


class AgentServer(TokenServer):
    def __init__(self, address: tuple[str, int], store: Store, token: str, tls: ssl.SSLContext | None) -> None:
        super().__init__(address, AgentHandler, tls)
        self.store = store
        self.token = token


class AgentHandler(JsonHandler):
    server: AgentServer

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        if self.path == "/healthz":
            self.send_bytes(200, b"ok", "text/plain")
        else:
            self.serve_faults(self.server.store, "GET", self.path)

    def do_POST(self) -> None:  # noqa: N802
        self.serve_faults(self.server.store, "POST", self.path)

    def do_DELETE(self) -> None:  # noqa: N802
        self.serve_faults(self.server.store, "DELETE", self.path)


ALL_KINDS = frozenset(kinds.REGISTRY)
# Stopping the kubelet takes the node away from the control plane: an agent does it only when
# told to (--allow), never by default.
DEFAULT_KINDS = ALL_KINDS - {"kubelet-stop"}
