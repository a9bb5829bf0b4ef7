"""The bulk HTTP/2 transport: one connection for the hot path, every request a stream on it."""

from __future__ import annotations

import asyncio
import ssl
import threading
from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode

import anyio
import httpcore
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from chaos import written
from chaos.kube.connection import MAX_IN_FLIGHT
from chaos.vocabulary import quiet_thread


def reply_error(status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> ApiException | None:
    """The ApiException the generated client raises for this reply (None under 400)."""
    if status < 400:
        return None
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    error = ApiException(status=status, reason=reason, body=body.decode(errors="replace"))
    error.headers = urllib3.HTTPHeaderDict([(k.decode(), v.decode()) for k, v in headers])
    return error


# What a request on the bulk connection can fail with short of a reply: retried as a dropped
# connection (Kube._call).
# httpcore's anyio backend lets a TLS stream the peer closed mid-write (an apiserver restarting)
# out as anyio's own EndOfStream or BrokenResourceError, not as a NetworkError.
DROPPED = (httpcore.NetworkError, httpcore.ProtocolError, httpcore.TimeoutException, OSError,
            anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError)
_TIMEOUTS = {"timeout": {"connect": 30.0, "read": 30.0, "write": 30.0, "pool": 30.0}}
# A request's whole life on the bulk connection, queueing included: requests waiting on a
# connection that cannot open would otherwise each wait out their own connect timeout in turn.
_REQUEST_SECONDS = 60.0


class Bulk:
    """One HTTP/2 connection for the bulk hot path (pod DELETE and eviction, LISTs as plain JSON,
    node creation), opened on first use: every request of a thousand-pod kill is a stream on it,
    so a fresh process pays one TLS handshake instead of one per worker, and the apiserver serves
    one connection. httpcore (httpx's transport) drives it from an event loop of its own (its
    HTTP/2 is not safe to share between threads); httpx's client layer above it is left out (CPU
    per DELETE measured here: httpx 1.8 ms, httpcore 1.5 ms, bench/raw_h2.py's bare h2 0.4 ms).
    Callers hand it requests."""

    def __init__(self, c: client.Configuration) -> None:
        tls = ssl.create_default_context(cafile=c.ssl_ca_cert or None)
        if not c.verify_ssl:
            tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
        if c.cert_file:
            tls.load_cert_chain(c.cert_file, c.key_file)
        self.host = c.host.rstrip("/")
        # A kubeconfig's tls-server-name: the name sent and verified, as the generated client does.
        self.extensions = {**_TIMEOUTS, **({"sni_hostname": c.tls_server_name} if c.tls_server_name else {})}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name="kube-bulk", daemon=True)
        self.thread.start()

        async def opened() -> httpcore.AsyncConnectionPool:
            # Requests that come while the first connection opens are queued on it, as it may be
            # HTTP/2 (the apiserver allows 250 streams on one); behind a proxy that speaks only
            # HTTP/1.1, up to MAX_IN_FLIGHT connections serve them instead.
            return httpcore.AsyncConnectionPool(ssl_context=tls, http1=True, http2=True, max_connections=MAX_IN_FLIGHT,
                                                proxy=httpcore.Proxy(c.proxy) if c.proxy else None)

        self.pool = self._run(opened())

    def _serve(self) -> None:
        quiet_thread()
        self.loop.run_forever()

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def _request(self, method: str, path: str, body: bytes | None, headers: list[tuple[str, str]]
                       ) -> tuple[int, bytes, list[tuple[bytes, bytes]]] | ConnectionError:
        try:
            reply = await asyncio.wait_for(self.pool.request(method, self.host + path, headers=headers, content=body,
                                                             extensions=self.extensions), _REQUEST_SECONDS)
        except (TimeoutError, *DROPPED) as exc:
            return ConnectionError(f"{method} {path}: {exc!r}")
        return reply.status, reply.content, reply.headers

    def request_all(self, requests: list[tuple[str, str, str]], headers: dict[str, str]) -> list[Exception | None]:
        """(method, path, body) requests, all in flight at once; None for a reply under 400, else
        the ApiException (or ConnectionError) it makes."""
        fields = list(headers.items())

        async def every() -> list[Exception | None]:
            # One request that raised something unforeseen keeps its own outcome; the others theirs.
            replies = await asyncio.gather(*(self._request(m, p, b.encode(), fields) for m, p, b in requests),
                                           return_exceptions=True)
            for (method, path, _body), reply in zip(requests, replies, strict=True):
                if isinstance(reply, tuple) and reply[0] < 400:
                    written.note(method, path, reply[1])
            return [r if isinstance(r, BaseException) else reply_error(*r) for r in replies]  # type: ignore[misc]

        return self._run(every())  # type: ignore[no-any-return]

    def get(self, path: str, params: dict[str, str], headers: dict[str, str]) -> bytes | Exception:
        """The reply's body, or the error it makes (decoded by the caller: a 60 MB list decoded
        here would stall every other stream)."""
        url = f"{path}?{urlencode(params)}" if params else path
        reply = self._run(self._request("GET", url, None, list(headers.items())))
        return reply if isinstance(reply, Exception) else (reply_error(*reply) or reply[1])

    def close(self) -> None:
        self._run(self.pool.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()
