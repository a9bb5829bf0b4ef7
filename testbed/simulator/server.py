"""The simulator's HTTP server: metrics for Prometheus and the node-agent API for fake nodes.

    GET    /metrics                          vLLM metrics of every Ready replica (no auth)
    GET    /dcgm/metrics                     dcgm-exporter metrics of every card (no auth)
    GET    /healthz                          "ok"
    POST   /nodes/{node}/v1/faults           create a fault (agent protocol v1, bearer token)
    GET    /nodes/{node}/v1/faults           the node's active faults
    DELETE /nodes/{node}/v1/faults/{id}      revert; idempotent for faults already ended
    GET    /nodes/{node}/healthz             "ok" when the node is known
    GET|PUT /sim/v1/load                     request rate per model: {"model": qps} (bearer token)

Each fake node's `kilocard.io/agent-endpoint` annotation is http://127.0.0.1:<port>/nodes/<node>,
so a client speaks to every node's agent the same way, fake or real.
"""

from __future__ import annotations

import hmac
import json
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, choose_encoder, generate_latest

from testbed.simulator import metrics
from chaos.agent.protocol import FaultError
from testbed.simulator.world import World

API_VERSION = "v1"
MAX_BODY = 64 * 1024
_NODE = re.compile(r"^/nodes/([a-z0-9][-a-z0-9.]{0,252})(/.*)$")


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], world: World, token: str, negotiate: bool = False,
                 hostname_label: str = "Hostname") -> None:
        super().__init__(address, Handler)
        self.world = world
        self.token = token
        self.negotiate = negotiate
        self.hostname_label = hostname_label
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(metrics.VllmCollector(world))


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep the scrape log quiet
        pass

    # --- plumbing ----------------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode() + b"\n")

    def _error(self, status: int, message: str, field: str | None = None) -> None:
        self._json(status, {"error": message, **({"field": field} if field else {})})

    def _authorised(self) -> bool:
        header = self.headers.get("Authorization", "")
        given = header[7:] if header.startswith("Bearer ") else ""
        if given and hmac.compare_digest(given.encode(), self.server.token.encode()):
            return True
        self._error(401, "missing or wrong bearer token")
        return False

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise FaultError("body", f"larger than {MAX_BODY} bytes")
        try:
            return json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            raise FaultError("body", "not valid JSON") from None

    # --- routes ------------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            if self.server.negotiate:
                encoder, content_type = choose_encoder(self.headers.get("Accept"))
            else:
                encoder, content_type = generate_latest, CONTENT_TYPE_LATEST
            self._send(200, encoder(self.server.registry), content_type)
        elif path == "/dcgm/metrics":
            self._send(200, metrics.render_dcgm(self.server.world, self.server.hostname_label).encode(), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            self._send(200, b"ok", "text/plain")
        elif path == "/sim/v1/load":
            if self._authorised():
                with self.server.world.lock:
                    self._json(200, dict(self.server.world.qps_override))
        else:
            self._node_route("GET", path)

    def do_POST(self) -> None:  # noqa: N802
        self._node_route("POST", self.path)

    def do_DELETE(self) -> None:  # noqa: N802
        self._node_route("DELETE", self.path)

    def do_PUT(self) -> None:  # noqa: N802
        if self.path != "/sim/v1/load":
            self._error(404, f"no such path {self.path}")
            return
        if not self._authorised():
            return
        try:
            body = self._body()
            if not isinstance(body, dict) or not all(
                    isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
                    for k, v in body.items()):
                raise FaultError("body", 'expected {"<model>": <requests per second >= 0>, ...}')
        except FaultError as exc:
            self._error(400, str(exc), exc.field)
            return
        with self.server.world.lock:
            self.server.world.qps_override.update({k: float(v) for k, v in body.items()})
            self._json(200, dict(self.server.world.qps_override))

    def _node_route(self, method: str, path: str) -> None:
        match = _NODE.match(path)
        if not match:
            self._error(404, f"no such path {path}")
            return
        node, rest = match.groups()
        world = self.server.world
        if rest == "/healthz" and method == "GET":
            known = node in world.node_cards
            self._send(200 if known else 404, b"ok" if known else b"unknown node", "text/plain")
            return
        if not self._authorised():
            return
        try:
            if rest == f"/{API_VERSION}/faults" and method == "POST":
                fault = world.add_fault(node, self._body())
                self._json(201, fault.to_json())
            elif rest == f"/{API_VERSION}/faults" and method == "GET":
                self._json(200, {"faults": [f.to_json() for f in world.faults_on(node)]})
            elif rest.startswith(f"/{API_VERSION}/faults/") and method == "DELETE":
                fault_id = rest.rsplit("/", 1)[1]
                try:
                    self._json(200, {"id": fault_id, "status": world.delete_fault(node, fault_id)})
                except KeyError:
                    self._error(404, f"no fault {fault_id!r} on {node}", "id")
            else:
                self._error(405 if rest.startswith(f"/{API_VERSION}/faults") else 404, f"{method} {path} not supported")
        except FaultError as exc:
            self._error(exc.status, str(exc), exc.field)
