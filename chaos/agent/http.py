"""HTTP plumbing both agent servers share (the node agent and the testbed's fake nodes): JSON
replies, bearer-token checks in constant time, and the /v1/faults routes over a fault store."""

from __future__ import annotations

import hmac
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from chaos.agent.protocol import IDEMPOTENCY_HEADER, VERSION, FaultError

MAX_BODY = 64 * 1024


class FaultStore(Protocol):
    def add(self, body: Any, key: str | None = None) -> tuple[int, dict[str, Any]]:
        """(201, the new fault), or (200, the fault first created) for a key seen before."""

    def active(self) -> list[dict[str, Any]]: ...

    def delete(self, fault_id: str) -> str:
        """'reverted', or 'already ended' for a fault that has; KeyError when never known."""

    def observe(self, fault_id: str) -> tuple[str, str, bool]:
        """(confirmed | mismatch | inconclusive, evidence, final: nothing more can be read) of an
        active fault; KeyError otherwise."""


class TokenServer(ThreadingHTTPServer):
    daemon_threads = True
    token: str


class JsonHandler(BaseHTTPRequestHandler):
    server: TokenServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no per-request log (scrapes)
        pass

    def send_bytes(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, status: int, payload: Any) -> None:
        self.send_bytes(status, json.dumps(payload).encode() + b"\n")

    def send_problem(self, status: int, message: str, field: str | None = None) -> None:
        self.send_json(status, {"error": message, **({"field": field} if field else {})})

    def authorised(self) -> bool:
        header = self.headers.get("Authorization", "")
        given = header[7:] if header.startswith("Bearer ") else ""
        if given and hmac.compare_digest(given.encode(), self.server.token.encode()):
            return True
        self.send_problem(401, "missing or wrong bearer token")
        return False

    def read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise FaultError("body", f"larger than {MAX_BODY} bytes")
        try:
            return json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            raise FaultError("body", "not valid JSON") from None

    def serve_faults(self, store: FaultStore, method: str, rest: str) -> None:
        """`rest` is the path below the agent's root: /v1/faults, /v1/faults/<id>[/effect]."""
        base = f"/{VERSION}/faults"
        if not rest.startswith(base):
            self.send_problem(404, f"no such path {self.path}")
            return
        if not self.authorised():
            return
        try:
            if rest == base and method == "POST":
                self.send_json(*store.add(self.read_json(), self.headers.get(IDEMPOTENCY_HEADER) or None))
            elif rest == base and method == "GET":
                self.send_json(200, {"faults": store.active()})
            elif rest.startswith(base + "/") and rest.endswith("/effect") and method == "GET":
                fault_id = rest[len(base) + 1:-len("/effect")]
                try:
                    status, evidence, final = store.observe(fault_id)
                    self.send_json(200, {"id": fault_id, "status": status, "evidence": evidence, "final": final})
                except KeyError:
                    self.send_problem(404, f"no active fault {fault_id!r}", "id")
            elif rest.startswith(base + "/") and method == "DELETE":
                fault_id = rest[len(base) + 1:]
                try:
                    self.send_json(200, {"id": fault_id, "status": store.delete(fault_id)})
                except KeyError:
                    self.send_problem(404, f"no fault {fault_id!r}", "id")
            else:
                self.send_problem(405, f"{method} {self.path} not supported")
        except FaultError as exc:
            self.send_problem(exc.status, str(exc), exc.field)
