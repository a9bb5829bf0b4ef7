"""Real packets: two network namespaces joined by a veth pair, made and removed by the tests, and
the node agent running with its real backends (tc, nftables) against namespace A.

Needs root, iproute2, tc and nftables (./bootstrap installs them). Missing ones fail the tests
rather than skip them: a skipped test proves nothing.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos.agent.protocol import AGENT_TLS_NAME
from testbed import pki
from tests.netns.netns import Agent, Pair, free_port, start_agent, veth_pair


@pytest.fixture(scope="session")
def tools() -> None:
    missing = [t for t in ("ip", "tc", "nft") if shutil.which(t) is None]
    assert os.geteuid() == 0, "network-namespace tests need root"
    assert not missing, f"missing {missing}: run ./bootstrap"


@pytest.fixture
def pair(tools: None) -> Iterator[Pair]:
    with veth_pair() as p:
        yield p


@pytest.fixture
def agent(pair: Pair, tmp_path: Path) -> Iterator[Any]:
    started: list[Agent] = []

    ca, cert, key = pki.serving(tmp_path / "tls", AGENT_TLS_NAME)  # what the Secret kilocard-agent-tls holds

    def make(allow: str | None = None, *extra: str) -> Agent:
        token_file = tmp_path / "token"
        token_file.write_text(secrets.token_urlsafe(24))
        port = free_port()
        state = tmp_path / f"agent-{port}.json"
        argv = [sys.executable, "-m", "chaos.agent", "--listen", f"127.0.0.1:{port}", "--token-file",
                str(token_file), "--interface", pair.veth_a, "--node", "netns-node", "--state-file", str(state),
                "--tls-cert", str(cert), "--tls-key", str(key), *extra]
        if allow:
            argv += ["--allow", allow]
        a = Agent(f"https://127.0.0.1:{port}", token_file.read_text(), start_agent(argv), state, argv, ca)
        started.append(a)
        return a

    yield make
    for a in started:
        if a.proc.poll() is None:
            a.proc.terminate()
            a.proc.wait(timeout=30)
