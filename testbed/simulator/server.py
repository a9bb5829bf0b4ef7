"""The simulator's HTTP server: metrics for Prometheus, the node-agent API for fake nodes, and the
fleet's OpenAI-compatible endpoint (testbed/simulator/openai.py).

    GET    /metrics                          vLLM metrics of every Ready replica (no auth)
    GET    /dcgm/metrics                     dcgm-exporter metrics of every card (no auth)
    GET    /npu/metrics                      npu-exporter metrics of every Ascend chip (no auth)
    GET    /healthz                          "ok"
    POST   /nodes/{node}/v1/faults           create a fault (agent protocol v1, bearer token)
    GET    /nodes/{node}/v1/faults           the node's active faults
    DELETE /nodes/{node}/v1/faults/{id}      revert; idempotent for faults already ended
    GET    /nodes/{node}/v1/faults/{id}/effect  the fault's effect read back from the world
    POST   /sim/v1/sabotage/{node}/{id}      undo a fault's effect behind the agent's back, the fault still
                                             listed (tests of fault-landed verification; bearer token)
    POST   /sim/v1/misfire/{node}/{kind}     the node's next fault of that agent kind is listed and never
                                             takes effect (bearer token)
    GET    /nodes/{node}/healthz             "ok" when the node is known
    GET|PUT /sim/v1/load                     request rate per model: {"model": qps} (bearer token)
    POST   [/namespaces/{ns}]/v1/completions, /v1/chat/completions   OpenAI-compatible, streaming or not,
                                             with the replicas' simulated latency (no auth)
    GET    [/namespaces/{ns}]/v1/models      the models served

Each fake node's `kilocard.io/agent-endpoint` annotation is http://127.0.0.1:<port>/nodes/<node>,
so a client speaks to every node's agent the same way, fake or real.
"""

from __future__ import annotations

import re
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, choose_encoder, generate_latest

from chaos.agent.http import JsonHandler, TokenServer
from chaos.agent.protocol import INCONCLUSIVE, FaultError
from testbed.simulator import ascend, dcgm, metrics, openai
from testbed.simulator.world import World

_NODE = re.compile(r"^/nodes/([a-z0-9][-a-z0-9.]{0,252})(/.*)$")
_SABOTAGE = re.compile(r"^/sim/v1/sabotage/([a-z0-9][-a-z0-9.]{0,252})/([0-9a-f]{1,64})$")
_MISFIRE = re.compile(r"^/sim/v1/misfire/([a-z0-9][-a-z0-9.]{0,252})/([a-z-]{1,32})$")


class NodeFaults:
    """One fake node's faults, as the agent protocol's fault store."""

    def __init__(self, world: World, node: str) -> None:
        self.world, self.node = world, node

    def add(self, body: Any, key: str | None = None) -> tuple[int, dict[str, Any]]:
        with self.world.lock:
            seen = self.world.created(key)
            return (200, seen.to_json()) if seen else (201, self.world.add_fault(self.node, body, key).to_json())

    def active(self) -> list[dict[str, Any]]:
        return [f.to_json() for f in self.world.faults_on(self.node)]

    def delete(self, fault_id: str) -> str:
        return self.world.delete_fault(self.node, fault_id)

    def observe(self, fault_id: str) -> tuple[str, str, bool]:
        status, evidence = self.world.observe(self.node, fault_id)
        return status, evidence, status == INCONCLUSIVE  # the fake node's only inconclusive: no read-back


class Server(TokenServer):
    # Loopback only, and streams to the whole built-in load and every scrape at once.
    max_connections = 4096
    timeout_seconds = 300.0

    def __init__(self, address: tuple[str, int], world: World, token: str, negotiate: bool = False,
                 hostname_label: str = "Hostname", dcgm_fields: str = "all") -> None:
        super().__init__(address, Handler)
        self.world = world
        self.token = token
        self.negotiate = negotiate
        self.dcgm = dcgm.DcgmRenderer(world, hostname_label, dcgm_fields)
        self.npu = ascend.NpuRenderer(world)
        self.openai = openai.Endpoint(world)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(metrics.VllmCollector(world))


class Handler(JsonHandler):
    server: Server

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            if self.server.negotiate:
                encoder, content_type = choose_encoder(self.headers.get("Accept"))
            else:
                encoder, content_type = generate_latest, CONTENT_TYPE_LATEST
            self.send_bytes(200, encoder(self.server.registry), content_type)
        elif path == "/dcgm/metrics":
            self.send_bytes(200, self.server.dcgm.render().encode(),
                            CONTENT_TYPE_LATEST)
        elif path == "/npu/metrics":
            self.send_bytes(200, self.server.npu.render().encode(), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            self.send_bytes(200, b"ok", "text/plain")
        elif path == "/sim/v1/load":
            if self.authorised():
                with self.server.world.lock:
                    self.send_json(200, dict(self.server.world.qps_override))
        elif openai.route_of(path):
            self.server.openai.serve(self, "GET", path)
        else:
            self._node_route("GET", path)

    def do_POST(self) -> None:  # noqa: N802
        sabotage, misfire = _SABOTAGE.match(self.path), _MISFIRE.match(self.path)
        if openai.route_of(self.path):
            self.server.openai.serve(self, "POST", self.path)
        elif sabotage is None and misfire is None:
            self._node_route("POST", self.path)
        elif not self.authorised():
            return
        elif sabotage is not None:
            try:
                self.server.world.sabotage(*sabotage.groups())
                self.send_json(200, {"node": sabotage[1], "id": sabotage[2], "status": "sabotaged"})
            except KeyError:
                self.send_problem(404, f"no active fault {sabotage[2]!r} on {sabotage[1]}", "id")
        elif misfire is not None:
            try:
                self.server.world.misfire(*misfire.groups())
                self.send_json(200, {"node": misfire[1], "kind": misfire[2], "status": "armed"})
            except FaultError as exc:
                self.send_problem(400, str(exc), "kind")

    def do_DELETE(self) -> None:  # noqa: N802
        self._node_route("DELETE", self.path)

    def do_PUT(self) -> None:  # noqa: N802
        if self.path != "/sim/v1/load":
            self.send_problem(404, f"no such path {self.path}")
            return
        if not self.authorised():
            return
        try:
            body = self.read_json()
            if not isinstance(body, dict) or not all(
                    isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
                    for k, v in body.items()):
                raise FaultError("body", 'expected {"<model>": <requests per second >= 0>, ...}')
        except FaultError as exc:
            self.send_problem(400, str(exc), exc.field)
            return
        with self.server.world.lock:
            self.server.world.qps_override.update({k: float(v) for k, v in body.items()})
            self.send_json(200, dict(self.server.world.qps_override))

    def _node_route(self, method: str, path: str) -> None:
        match = _NODE.match(path)
        if not match:
            self.send_problem(404, f"no such path {path}")
            return
        node, rest = match.groups()
        if rest == "/healthz" and method == "GET":
            known = node in self.server.world.node_cards
            self.send_bytes(200 if known else 404, b"ok" if known else b"unknown node", "text/plain")
            return
        self.serve_faults(NodeFaults(self.server.world, node), method, rest)
