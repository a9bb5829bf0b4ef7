"""HTTP plumbing both agent servers share (the node agent and the testbed's fake nodes): JSON
replies, bearer-token checks in constant time, the /v1/faults routes over a fault store, and the
bounds a server on a node's network needs: TLS (a cleartext request is answered 400 and closed),
a timeout on every read and write (a slow client cannot hold a thread), and a bound on the threads
(past it, new connections are closed at once and the client retries)."""

from __future__ import annotations

import hmac
import json
import socket
import socketserver
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from chaos.agent.protocol import IDEMPOTENCY_HEADER, VERSION, FaultError

MAX_BODY = 64 * 1024
TLS_HANDSHAKE = 0x16  # the first byte of every TLS connection: a handshake record
_REFUSAL = b"this agent speaks https only (TLS)\n"
CLEARTEXT_REFUSED = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(_REFUSAL), _REFUSAL))


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
    """A threaded server with at most `max_connections` connections at once, each read and write
    timing out after `timeout_seconds`, TLS when given a context (the handshake is made in the
    connection's own thread, under that timeout, so a silent client never stalls the accept loop)."""

    daemon_threads = True
    token: str
    max_connections = 64
    request_queue_size = 128  # the listen backlog: a burst of callers (a bulk apply) is accepted, not dropped
    timeout_seconds = 15.0

    def __init__(self, address: tuple[str, int], handler: type[socketserver.BaseRequestHandler],
                 tls: ssl.SSLContext | None = None) -> None:
        super().__init__(address, handler)
        self.tls = tls
        self._slots = threading.BoundedSemaphore(self.max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: the client sees the connection closed and retries
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out, hung up or failed its TLS handshake is the client's problem:
        no traceback on the agent's log for it."""
        error = sys.exc_info()[1]
        if not isinstance(error, (OSError, ssl.SSLError)):
            super().handle_error(request, client_address)


class JsonHandler(BaseHTTPRequestHandler):
    server: TokenServer
    protocol_version = "HTTP/1.1"
    _body_of: Any = None  # the headers of the request whose body `_body` is
    _body = b""

    def setup(self) -> None:
        self.request.settimeout(self.server.timeout_seconds)
        if self.server.tls is not None:
            self.request = _secured(self.request, self.server.tls)
        super().setup()
        self.connection.settimeout(self.server.timeout_seconds)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if isinstance(self.request, ssl.SSLSocket):
                self.request.close()  # the server closes the socket it accepted: TLS took it over

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no per-request log (scrapes)
        pass

    def send_bytes(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        try:
            self.body()  # a reply sent before the body was read (a 401): read it now, or the next
        except FaultError:  # request would start inside it, and a TLS close over unread bytes resets the reply
            self.close_connection = True
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

    def body(self) -> bytes:
        """This request's body, read once (the reply reads what a handler did not)."""
        if self._body_of is not self.headers:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                raise FaultError("body", "Content-Length: expected a number") from None
            if not 0 <= length <= MAX_BODY:
                raise FaultError("body", f"larger than {MAX_BODY} bytes", status=413)
            self._body, self._body_of = self.rfile.read(length), self.headers
        return self._body

    def read_json(self) -> Any:
        body = self.body()
        try:
            return json.loads(body or b"null")
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


def _secured(conn: socket.socket, tls: ssl.SSLContext) -> ssl.SSLSocket:
    """The connection, TLS made: a first byte that opens no TLS handshake is a cleartext request
    (a bearer token may just have crossed the network in it): answered 400 and closed, its bytes
    discarded unparsed."""
    first = conn.recv(1, socket.MSG_PEEK)
    if first[:1] != bytes([TLS_HANDSHAKE]):
        try:
            conn.sendall(CLEARTEXT_REFUSED)
            conn.shutdown(socket.SHUT_WR)
            _drain(conn)
        finally:
            conn.close()
        raise ConnectionRefusedError("a cleartext request to a TLS-only server")
    return tls.wrap_socket(conn, server_side=True)


def _drain(conn: socket.socket, seconds: float = 1.0) -> None:
    """Read and discard what the client still sends, until it hangs up, for at most `seconds` and
    MAX_BODY bytes: closed with unread data, the kernel would reset the refusal away."""
    deadline, read = time.monotonic() + seconds, 0
    while read < MAX_BODY and (left := deadline - time.monotonic()) > 0:
        conn.settimeout(left)
        try:
            chunk = conn.recv(MAX_BODY)
        except OSError:
            return
        if not chunk:
            return
        read += len(chunk)
