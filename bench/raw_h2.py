"""The physical-limit proxy for bulk faults: the same DELETEs as kilocard's, sent by the smallest
client there is. One TLS connection, HTTP/2 frames built with the `h2` library, every request
written before the first reply is read (within the server's stream limit), and replies counted by
status and never decoded. What such a client takes is the apiserver's own cost; a tool's time
above it is the tool's. Used by bench/pod_kill.py. Not a test.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections import Counter
from collections.abc import Iterable
from urllib.parse import urlparse

import h2.config
import h2.connection
import h2.events


class RawH2:
    """One HTTP/2 connection to the apiserver with the testbed admin's client certificate."""

    def __init__(self, server: str, ca: str, cert: str, key: str) -> None:
        url = urlparse(server)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.tls = ssl.create_default_context(cafile=ca)
        self.tls.load_cert_chain(cert, key)
        self.tls.set_alpn_protocols(["h2"])
        self.sock: ssl.SSLSocket | None = None
        self.conn: h2.connection.H2Connection | None = None

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port))
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self.tls.wrap_socket(raw, server_hostname=self.host)
        if self.sock.selected_alpn_protocol() != "h2":
            raise RuntimeError(f"{self.host}:{self.port} does not speak HTTP/2")
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        # The server's SETTINGS carry its stream limit: wait for them before filling the pipe.
        while not self._pump(lambda e: isinstance(e, h2.events.RemoteSettingsChanged)):
            pass

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = self.conn = None

    def _pump(self, interesting: object) -> list[h2.events.Event]:
        assert self.sock is not None and self.conn is not None
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the apiserver closed the connection")
        events = [e for e in self.conn.receive_data(data) if interesting(e)]  # type: ignore[operator]
        out = self.conn.data_to_send()
        if out:
            self.sock.sendall(out)
        return events

    def send_all(self, method: str, requests: Iterable[tuple[str, bytes]]) -> Counter[int]:
        """Send every (path, body) request, keeping as many streams open as the server allows;
        return the replies counted by status."""
        assert self.sock is not None and self.conn is not None
        conn, todo, statuses = self.conn, list(requests), Counter[int]()
        authority = f"{self.host}:{self.port}"
        pending = 0
        while todo or pending:
            while todo and conn.open_outbound_streams < conn.remote_settings.max_concurrent_streams:
                path, body = todo.pop()
                stream = conn.get_next_available_stream_id()
                conn.send_headers(stream, [(":method", method), (":path", path), (":scheme", "https"),
                                           (":authority", authority), ("content-type", "application/json"),
                                           ("content-length", str(len(body)))])
                conn.send_data(stream, body, end_stream=True)
                pending += 1
            self.sock.sendall(conn.data_to_send())
            for event in self._pump(lambda e: isinstance(e, (h2.events.ResponseReceived, h2.events.DataReceived,
                                                             h2.events.StreamEnded))):
                if isinstance(event, h2.events.ResponseReceived):
                    statuses[int(dict(event.headers)[b":status"])] += 1
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                else:
                    pending -= 1
        self.sock.sendall(conn.data_to_send())
        return statuses


def delete_pods(client: RawH2, pods: list[tuple[str, str, str]], cold: bool) -> tuple[float, Counter[int]]:
    """DELETE (namespace, name, uid) pods with grace 0 and a uid precondition, as kilocard's
    pod-kill does; seconds from the first byte (cold: from opening the connection) to the last reply."""
    bodies = [(f"/api/v1/namespaces/{ns}/pods/{name}",
               b'{"apiVersion":"v1","kind":"DeleteOptions","gracePeriodSeconds":0,"preconditions":{"uid":"%s"}}'
               % uid.encode()) for ns, name, uid in pods]
    if not cold:
        # A warm client's connection is open before the clock starts; reopened here, as the
        # apiserver closes one idle for 90 s (the other tools' rounds take longer than that).
        client.close()
        client.connect()
    started = time.perf_counter()
    if cold:
        client.close()
        client.connect()
    statuses = client.send_all("DELETE", bodies)
    return time.perf_counter() - started, statuses
