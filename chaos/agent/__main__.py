"""`python -m chaos.agent --listen 127.0.0.1:9470 --token-file /etc/kilocard/token --interface eth0`

Runs the node agent until SIGTERM/SIGINT, then reverts every fault it holds.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from pathlib import Path

from chaos.agent.backends import Backends, Tools
from chaos.agent.server import ALL_KINDS, DEFAULT_KINDS, AgentServer, Store


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
    args = parser.parse_args(argv)
    allow = frozenset(k for k in args.allow.split(",") if k)
    unknown = allow - ALL_KINDS
    if unknown:
        parser.error(f"--allow: unknown kinds {sorted(unknown)}")
    token = args.token_file.read_text().strip()
    if len(token) < 16:
        parser.error("--token-file: the token must have at least 16 characters")
    host, _, port = args.listen.rpartition(":")
    store = Store(Backends(Tools.find(), args.interface), args.node, allow, args.state_file)
    left = store.revert_leftovers()
    if left:
        print(f"agent: could not revert leftovers {left}: {store.errors}", file=sys.stderr, flush=True)
    server = AgentServer((host, int(port)), store, token)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    print(f"agent: listening on {args.listen} for node {args.node}", flush=True)
    while not stop.wait(0.5):
        store.reap()
    server.shutdown()
    left = store.revert_all()
    if left:
        print(f"agent: could not revert {left}: {store.errors}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
