"""Network namespaces joined by a veth pair, traffic measured between them, and the node agent
as a process: shared by tests/netns and the testbed tests that drive a real agent."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.agent.client import tls_opener

SINK = r"""
import socket, sys, time
kind, host, port, window = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
if kind == "tcp":
    srv = socket.create_server((host, port)); print("ready", flush=True)
    conn, _ = srv.accept(); total = 0; first = None
    while True:
        data = conn.recv(65536)
        if not data: break
        first = first or time.monotonic(); total += len(data)
    print(total, time.monotonic() - (first or time.monotonic()), flush=True)
else:
    import select
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:  # room for every datagram while a loaded machine keeps this process waiting
        s.setsockopt(socket.SOL_SOCKET, 33, 1 << 24)  # SO_RCVBUFFORCE (root), which Python does not name
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    s.bind((host, port)); print("ready", flush=True); got = 0
    # Until the sender is done (our stdin closed) and a moment more; `window` only bounds a lost parent.
    watch, end = [s, sys.stdin], time.monotonic() + window
    while time.monotonic() < end:
        ready, _, _ = select.select(watch, [], [], 0.2)
        if s in ready: s.recv(2048); got += 1
        if sys.stdin in ready:
            sys.stdin.read(); watch = [s]; end = min(end, time.monotonic() + 0.5)
    print(got, flush=True)
"""
SOURCE = r"""
import socket, sys, time
kind, host, port, amount = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if kind == "tcp":
    c = socket.create_connection((host, port), timeout=30); chunk = b"x" * 65536; sent = 0
    while sent < amount: c.sendall(chunk[: amount - sent]); sent += min(len(chunk), amount - sent)
    c.close()
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(amount):
        try: s.sendto(b"p" * 200, (host, port))
        except OSError: pass  # an nftables drop on output answers EPERM to the sender
        if i % 50 == 0: time.sleep(0.002)
"""


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=60)


@dataclass
class Pair:
    a: str
    b: str
    veth_a: str
    veth_b: str
    ip_a: str
    ip_b: str

    def exec(self, ns: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return sh("ip", "netns", "exec", ns, *argv, check=check)

    def qdisc(self) -> str:
        return self.exec(self.a, "tc", "qdisc", "show", "dev", self.veth_a).stdout

    def nft_tables(self) -> str:
        return self.exec(self.a, "nft", "list", "tables").stdout

    def _sink(self, kind: str, port: int, window: float) -> subprocess.Popen[str]:
        proc = subprocess.Popen(["ip", "netns", "exec", self.b, sys.executable, "-c", SINK, kind, self.ip_b, str(port),
                                 str(window)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        return proc

    def tcp_throughput(self, nbytes: int, port: int = 5201) -> float:
        """Bytes per second A -> B, measured at the receiver."""
        sink = self._sink("tcp", port, 0)
        self.exec(self.a, sys.executable, "-c", SOURCE, "tcp", self.ip_b, str(port), str(nbytes))
        total, seconds = sink.communicate(timeout=60)[0].split()
        assert int(total) == nbytes
        return nbytes / max(float(seconds), 1e-6)

    def udp_delivered(self, count: int, port: int = 5202) -> int:
        """How many of `count` datagrams A -> B arrive: counted until the sender is done (closing the
        sink's stdin), not for a fixed time a loaded machine may spend starting the sender."""
        sink = self._sink("udp", port, 60.0)
        self.exec(self.a, sys.executable, "-c", SOURCE, "udp", self.ip_b, str(port), str(count))
        return int(sink.communicate(input="", timeout=70)[0])


@contextlib.contextmanager
def veth_pair() -> Iterator[Pair]:
    """Two fresh network namespaces joined by a veth pair (10.231.N.1 <-> .2); removed afterwards."""
    tag = f"kc{os.getpid() % 10000}{secrets.token_hex(2)}"
    subnet = 1 + int(secrets.token_hex(1), 16) % 250
    p = Pair(f"{tag}a", f"{tag}b", f"{tag}va"[:15], f"{tag}vb"[:15], f"10.231.{subnet}.1", f"10.231.{subnet}.2")
    sh("ip", "netns", "add", p.a)
    sh("ip", "netns", "add", p.b)
    try:
        sh("ip", "link", "add", p.veth_a, "netns", p.a, "type", "veth", "peer", "name", p.veth_b, "netns", p.b)
        for ns, dev, ip in ((p.a, p.veth_a, p.ip_a), (p.b, p.veth_b, p.ip_b)):
            p.exec(ns, "ip", "addr", "add", f"{ip}/24", "dev", dev)
            p.exec(ns, "ip", "link", "set", dev, "up")
            p.exec(ns, "ip", "link", "set", "lo", "up")
        yield p
    finally:
        sh("ip", "netns", "del", p.a, check=False)
        sh("ip", "netns", "del", p.b, check=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Agent:
    url: str
    token: str
    proc: subprocess.Popen[str]
    state_file: Path
    argv: list[str]
    ca: Path | None = None  # https: the CA its certificate is verified against

    def call(self, method: str, path: str, body: Any = None, token: str | None = "default") -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {self.token if token == 'default' else token}"
        request = urllib.request.Request(f"{self.url}{path}", method=method, headers=headers,
                                         data=json.dumps(body).encode() if body is not None else None)
        opener = tls_opener(ssl.create_default_context(cafile=self.ca)) if self.ca else urllib.request.build_opener()
        try:
            with opener.open(request, timeout=30) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            said = err.read()
            try:
                return err.code, json.loads(said)
            except ValueError:
                return err.code, said.decode()  # not the agent protocol: the TLS-only refusal

    def fault(self, kind: str, pair: Pair, ttl: float = 60, **params: Any) -> tuple[int, Any]:
        return self.call("POST", "/v1/faults", {"kind": kind, "target": {"netns": pair.a}, "params": params,
                                                "ttl_seconds": ttl, "run_id": "netns-test"})


def start_agent(argv: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "listening" in proc.stdout.readline(), proc.stderr.read() if proc.poll() is not None else ""
    return proc


ECHO = r"""
import socket, sys, threading
host, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]
def serve(srv):
    while True:
        conn, _ = srv.accept()
        def echo(c=conn):
            try:
                while (data := c.recv(4096)):
                    c.sendall(data)
            except OSError:
                pass
        threading.Thread(target=echo, daemon=True).start()
servers = [socket.create_server((host, p)) for p in ports]
for srv in servers:
    threading.Thread(target=serve, args=(srv,), daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()
"""
# One connection, echoed once; then, on a line from stdin, what the same connection and a new one see.
CONVERSE = r"""
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
def outcome(do):
    try:
        return do()
    except ConnectionResetError:
        return "reset"
    except ConnectionRefusedError:
        return "refused"
    except OSError as exc:
        return f"error {exc.errno}"
def exchange(c):
    c.sendall(b"ping")
    return "echoed" if c.recv(4) == b"ping" else "closed"
c = socket.create_connection((host, port), timeout=10)
print(exchange(c), flush=True)
sys.stdin.readline()
print(outcome(lambda: exchange(c)), flush=True)
print(outcome(lambda: exchange(socket.create_connection((host, port), timeout=10))), flush=True)
"""


def echo_server(pair: Pair, *ports: int, in_a: bool = False) -> subprocess.Popen[str]:
    """TCP echo servers in namespace B (or A) on `ports`; ended by closing its stdin."""
    ns, ip = (pair.a, pair.ip_a) if in_a else (pair.b, pair.ip_b)
    proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", ECHO, ip, *map(str, ports)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def conversation(pair: Pair, port: int, from_b: bool = False) -> subprocess.Popen[str]:
    """A client in namespace A (or B), connected to the other's echo on `port` (it has echoed once);
    `said` asks it on."""
    ns, ip = (pair.b, pair.ip_a) if from_b else (pair.a, pair.ip_b)
    proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", CONVERSE, ip, str(port)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "echoed"
    return proc


def said(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """(what the open connection saw, what a new connection saw), once asked on."""
    out, _ = proc.communicate("go\n", timeout=60)
    established, new = out.split()[:2]
    return established, new
