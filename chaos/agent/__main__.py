"""`python -m chaos.agent --listen 10.0.0.5:9470 --token-file /etc/kilocard/token --tls-cert tls.crt
--tls-key tls.key --interface eth0`

Runs the node agent until SIGTERM/SIGINT, then reverts every fault it holds. It serves TLS only
(its callers send a bearer token); `--plaintext` is for a loopback address alone, where nothing
crosses a network.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import ssl
import sys
import threading
from pathlib import Path

from chaos.agent.backends import Backends, Tools
from chaos.agent.protocol import AGENT_TLS_NAME
from chaos.agent.server import ALL_KINDS, DEFAULT_KINDS, AgentServer, Store
from chaos.vocabulary import loopback


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.agent")
    parser.add_argument("--listen", default="127.0.0.1:9470", help="host:port")
    parser.add_argument("--token-file", type=Path, required=True, help="bearer token (from the agent Secret)")
    parser.add_argument("--interface", default="eth0", help="default interface of network faults")
    parser.add_argument("--node", default=os.environ.get("NODE_NAME", socket.gethostname()))
    parser.add_argument("--allow", default=",".join(sorted(DEFAULT_KINDS)),
                        help=f"comma-separated fault kinds this agent may apply (of {', '.join(sorted(ALL_KINDS))}); "
                             "default all but kubelet-stop")
    parser.add_argument("--state-file", type=Path, help="where active faults are kept across a crash")
    parser.add_argument("--pods-cgroup", help="the kubelet's parent cgroup of pods, directly below the cgroup "
                        "mount (default: kubepods, else kubepods.slice): where slow-weights caps reads")
    parser.add_argument("--tls-cert", type=Path, help="the agent's certificate, PEM (tls.crt of the Secret "
                        f"kilocard-agent-tls; callers verify it for the name {AGENT_TLS_NAME})")
    parser.add_argument("--tls-key", type=Path, help="its private key, PEM (tls.key)")
    parser.add_argument("--client-timeout", type=float, default=AgentServer.timeout_seconds, metavar="SECONDS",
                        help="a connection silent this long (mid-handshake or mid-request) is closed "
                             "(default %(default)s)")
    parser.add_argument("--plaintext", action="store_true",
                        help="serve cleartext HTTP: only on a loopback --listen address")
    args = parser.parse_args(argv)
    allow = frozenset(k for k in args.allow.split(",") if k)
    unknown = allow - ALL_KINDS
    if unknown:
        parser.error(f"--allow: unknown kinds {sorted(unknown)}")
    token = args.token_file.read_text().strip()
    if len(token) < 16:
        parser.error("--token-file: the token must have at least 16 characters")
    if not 0 < args.client_timeout <= 3600:
        parser.error(f"--client-timeout: expected seconds from 0 (excluded) to 3600, got {args.client_timeout}")
    if args.pods_cgroup is not None and (args.pods_cgroup in (".", "..")
                                         or not re.fullmatch(r"[A-Za-z0-9._-]{1,255}", args.pods_cgroup)):
        parser.error(f"--pods-cgroup: expected a cgroup's name (letters, digits, ._-), got {args.pods_cgroup!r}")
    host, _, port = args.listen.rpartition(":")
    tls = _tls(parser, args, host)
    store = Store(Backends(Tools.find(), args.interface, pods_cgroup=args.pods_cgroup), args.node, allow,
                  args.state_file)
    left = store.revert_leftovers()
    if left:
        print(f"agent: could not revert leftovers {left}: {store.errors}", file=sys.stderr, flush=True)
    server = AgentServer((host, int(port)), store, token, tls)
    server.timeout_seconds = args.client_timeout
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    print(f"agent: listening on {'https' if tls else 'http'}://{args.listen} for node {args.node}", flush=True)
    while not stop.wait(0.5):
        store.reap()
    server.shutdown()
    left = store.revert_all()
    if left:
        print(f"agent: could not revert {left}: {store.errors}", file=sys.stderr, flush=True)
        return 1
    return 0


def _tls(parser: argparse.ArgumentParser, args: argparse.Namespace, host: str) -> ssl.SSLContext | None:
    """The server's TLS context, or None for --plaintext on loopback; anything else is refused
    before a fault store exists."""
    if args.plaintext:
        if args.tls_cert or args.tls_key:
            parser.error("--plaintext: not with --tls-cert/--tls-key")
        if not loopback(host):
            parser.error(f"--plaintext: only on a loopback address (got {host!r}): the bearer token would cross "
                         "the network in cleartext; give --tls-cert and --tls-key")
        return None
    if not (args.tls_cert and args.tls_key):
        parser.error("--tls-cert and --tls-key are required (the Secret kilocard-agent-tls; "
                     "deploy/kustomization.yaml says how to make it), or --plaintext on a loopback address")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(args.tls_cert, args.tls_key)
    except (OSError, ssl.SSLError) as exc:
        parser.error(f"--tls-cert/--tls-key: cannot load {args.tls_cert} with {args.tls_key}: {exc}")
    return context



if __name__ == "__main__":
    sys.exit(main())
