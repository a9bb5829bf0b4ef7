"""Client for the node-agent protocol v1 (the real node agent and the testbed's fake nodes).

    POST   <endpoint>/v1/faults        {"kind", "target", "params", "ttl_seconds", "run_id"} -> 201 {"id", ...}
    GET    <endpoint>/v1/faults        -> {"faults": [...]}
    DELETE <endpoint>/v1/faults/<id>   -> 200 (idempotent); 404 once the agent has forgotten it
    GET    <endpoint>/v1/faults/<id>/effect -> {"status": confirmed | mismatch | inconclusive, "evidence"}

A node's endpoint is its `kilocard.io/agent-endpoint` annotation, else the agent DaemonSet's pod
on that node (https://<host IP>:9470, deploy/chart/kilocard/files/agent-daemonset.yaml). The bearer token comes from
$KILOCARD_AGENT_TOKEN or the Secret `kilocard-system/kilocard-agent-token`; it is never logged,
and never sent in cleartext beyond this machine. An https agent's certificate is verified against
the CA in $KILOCARD_AGENT_CA (a file) or the ConfigMap `kilocard-system/kilocard-agent-ca` (key
ca.crt), for the name every agent's certificate carries (AGENT_TLS_NAME), not the node's address.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential

from chaos.agent.protocol import AGENT_TLS_NAME, IDEMPOTENCY_HEADER, INCONCLUSIVE, MISMATCH
from chaos.errors import KilocardError, NotFound, SpecError
from chaos.kube import Kube
from chaos.vocabulary import AGENT_ENDPOINT_ANNOTATION, loopback

AGENT_SELECTOR = "app.kubernetes.io/name=kilocard-agent"
AGENT_PORT = 9470
TOKEN_SECRET = ("kilocard-system", "kilocard-agent-token")
CA_CONFIG_MAP = ("kilocard-system", "kilocard-agent-ca")  # key ca.crt: public, so not a Secret the runner reads
CA_ENV = "KILOCARD_AGENT_CA"
_LOOPBACK = urllib.request.build_opener()  # cleartext, to an agent on this machine only (the testbed's)
# A revert outwaits an agent restarting (a DaemonSet pod comes back in seconds); asking a dead
# agent to apply or list gives up at once, so a plan does not hang on it.
REVERT_PATIENCE_SECONDS = 30.0


class AgentError(KilocardError):
    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class AgentClient:
    def __init__(self, kube: Kube, token: str | None = None, timeout: float = 10.0) -> None:
        self.kube = kube
        self._token = token or os.environ.get("KILOCARD_AGENT_TOKEN")
        self.timeout = timeout
        self._endpoints: dict[str, str] = {}
        self._opener: urllib.request.OpenerDirector | None = None

    @property
    def token(self) -> str:
        if self._token is None:
            try:
                self._token = self.kube.read_secret(*TOKEN_SECRET)["token"].decode().strip()
            except (NotFound, KeyError):
                raise AgentError("no agent token: set KILOCARD_AGENT_TOKEN or create the Secret "
                                 f"{TOKEN_SECRET[0]}/{TOKEN_SECRET[1]} (key 'token')") from None
        return self._token

    @property
    def opener(self) -> urllib.request.OpenerDirector:
        """urllib with the agents' TLS: their CA, their one name (read once, when first needed)."""
        if self._opener is None:
            self._opener = tls_opener(self._ca())
        return self._opener

    def _ca(self) -> ssl.SSLContext:
        path = os.environ.get(CA_ENV, "").strip()
        try:
            if path:
                return ssl.create_default_context(cafile=path)
            pem = (self.kube.read_config_map(*CA_CONFIG_MAP).get("data") or {}).get("ca.crt")
        except NotFound:
            pem = None
        except (OSError, ssl.SSLError) as exc:
            raise AgentError(f"${CA_ENV}: cannot load the agents' CA from {path}: {exc}") from None
        if not pem:
            raise AgentError(f"no CA to verify the agents' certificates: set ${CA_ENV} to a file, or create the "
                             f"ConfigMap {CA_CONFIG_MAP[0]}/{CA_CONFIG_MAP[1]} (key ca.crt)")
        try:
            return ssl.create_default_context(cadata=pem)
        except ssl.SSLError as exc:
            raise AgentError(f"ConfigMap {CA_CONFIG_MAP[0]}/{CA_CONFIG_MAP[1]}: ca.crt is not a PEM CA: {exc}") \
                from None

    def endpoint(self, node: str) -> str:
        if node not in self._endpoints:
            self._endpoints[node] = self._find(node)
        return self._endpoints[node]

    def _find(self, node: str) -> str:
        try:
            annotations = self.kube.read_node_raw(node)["metadata"].get("annotations") or {}
        except NotFound:
            raise SpecError(f"node {node!r} not found") from None
        endpoint = annotations.get(AGENT_ENDPOINT_ANNOTATION)
        if endpoint:
            return endpoint.rstrip("/")
        pods = self.kube.list_pods_raw(TOKEN_SECRET[0], AGENT_SELECTOR, f"spec.nodeName={node}")
        ready = [p["status"] for p in pods if p["status"].get("hostIP") and p["status"].get("phase") == "Running"]
        if not ready:
            raise AgentError(f"node {node} has no kilocard agent (no annotation {AGENT_ENDPOINT_ANNOTATION}, "
                             f"no running agent pod in {TOKEN_SECRET[0]})")
        return f"https://{ready[0]['hostIP']}:{AGENT_PORT}"

    def _request(self, method: str, url: str, body: Any = None, key: str | None = None,
                 patience: float = 0.0) -> tuple[int, Any]:
        where = urllib.parse.urlsplit(url)
        if where.scheme != "https" and not loopback(where.hostname or ""):
            raise AgentError(f"refusing to send the agent token in cleartext to {url}: agents beyond this machine "
                             "are reached over https (see the agent's --tls-cert)")
        opener = self.opener if where.scheme == "https" else _LOOPBACK
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        if key:
            headers[IDEMPOTENCY_HEADER] = key
        request = urllib.request.Request(url, data=data, method=method, headers=headers)

        def send() -> tuple[int, Any]:
            try:
                with opener.open(request, timeout=self.timeout) as resp:
                    return resp.status, json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as err:
                try:
                    return err.code, json.loads(err.read() or b"null")
                except ValueError:
                    return err.code, {"error": err.reason}

        stop = stop_after_delay(patience) if patience else stop_after_attempt(4)
        retrying = Retrying(retry=retry_if_exception(_transient), stop=stop,
                            wait=wait_exponential(multiplier=0.2, max=2), reraise=True)
        try:
            return retrying(send)
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            raise AgentError(f"{method} {url}: {exc}") from None

    def create(self, endpoint: str, kind: str, target: dict[str, Any], params: dict[str, Any],
               ttl_seconds: float, run_id: str, key: str | None = None) -> dict[str, Any]:
        """Create a fault. With `key`, a request the agent has seen before (the reply was lost and
        the request retried) returns the fault it created then (200) instead of a second one."""
        status, body = self._request("POST", f"{endpoint}/v1/faults", {
            "kind": kind, "target": target, "params": params, "ttl_seconds": ttl_seconds, "run_id": run_id}, key)
        if status not in (200, 201):
            message = body.get("error", body) if isinstance(body, dict) else body
            raise AgentError(f"agent {endpoint} refused {kind}: {status} {message}", status)
        return dict(body)

    def list(self, endpoint: str, patience: float = 0.0) -> list[dict[str, Any]]:
        status, body = self._request("GET", f"{endpoint}/v1/faults", patience=patience)
        if status != 200:
            raise AgentError(f"agent {endpoint}: {status} {body}", status)
        return list(body["faults"])

    def observe(self, endpoint: str, fault_id: str) -> tuple[str, str, bool]:
        """The agent's read-back of a fault's effect: (status, evidence, final). An agent that no
        longer holds the fault says it did not land (mismatch); one too old to read back (405)
        cannot tell, ever (final); an unreachable one cannot tell now."""
        try:
            status, body = self._request("GET", f"{endpoint}/v1/faults/{fault_id}/effect")
        except AgentError as exc:
            return INCONCLUSIVE, f"the agent did not answer: {exc}", False
        if status == 404:
            return MISMATCH, f"the agent at {endpoint} no longer holds fault {fault_id}", False
        if status != 200 or not isinstance(body, dict):
            return INCONCLUSIVE, f"the agent at {endpoint} cannot read the effect back ({status})", True
        return str(body.get("status", INCONCLUSIVE)), str(body.get("evidence", "")), bool(body.get("final"))

    def delete(self, endpoint: str, fault_id: str) -> None:
        """Revert; a fault the agent no longer knows (expired, agent restarted) counts as reverted."""
        status, body = self._request("DELETE", f"{endpoint}/v1/faults/{fault_id}", patience=REVERT_PATIENCE_SECONDS)
        if status not in (200, 404):
            raise AgentError(f"agent {endpoint} could not revert {fault_id}: {status} {body}", status)


def _transient(exc: BaseException) -> bool:
    """Worth asking again: the agent unreachable or restarting. A certificate that does not verify
    (or a cleartext answer to TLS) will not change by asking again."""
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    return isinstance(exc, (urllib.error.URLError, ConnectionError, TimeoutError)) \
        and not isinstance(reason, ssl.SSLError)



class _AgentConnection(http.client.HTTPSConnection):
    """HTTPS to an agent at its node's address, its certificate checked for AGENT_TLS_NAME."""

    def __init__(self, host: str, *, context: ssl.SSLContext, **kwargs: Any) -> None:
        super().__init__(host, context=context, **kwargs)
        self.agent_context = context

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self.agent_context.wrap_socket(self.sock, server_hostname=AGENT_TLS_NAME)


def tls_opener(ca: ssl.SSLContext) -> urllib.request.OpenerDirector:
    """urllib that reaches agents over https, each certificate verified by `ca` for AGENT_TLS_NAME."""
    return urllib.request.build_opener(_AgentHttps(ca))


class _AgentHttps(urllib.request.HTTPSHandler):
    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__(context=context)
        self.agent_context = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_AgentConnection, req, context=self.agent_context)  # type: ignore[arg-type]
