"""The node agent on a network: TLS only, its certificate made by the commands deploy/ documents,
verified by the toolkit for the agents' one name; a cleartext request answered 400 and nothing
read; a silent client cut off; connections bounded; a token never sent in cleartext beyond this
machine. A real agent process on loopback (no fault applied: its backends are not needed)."""

from __future__ import annotations

import re
import secrets
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.agent.client import AgentClient, AgentError, tls_opener
from chaos.agent.http import TokenServer
from chaos.agent.protocol import AGENT_TLS_NAME
from testbed import pki
from tests.netns.netns import free_port, start_agent

ROOT = Path(__file__).resolve().parents[2]


def documented_openssl(directory: Path) -> tuple[Path, Path, Path]:
    """Run the openssl commands deploy/kustomization.yaml tells an operator to run, as written."""
    comment = "\n".join(line[1:] for line in (ROOT / "deploy/kustomization.yaml").read_text().splitlines()
                        if line.startswith("#"))
    commands = [re.sub(r"\\\n\s*", "", c).split() for c in re.findall(r"^\s+(openssl (?:.*\\\n)*.*)$", comment,
                                                                      re.MULTILINE)]
    assert len(commands) == 2, commands
    for argv in commands:
        done = subprocess.run(argv, cwd=directory, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    return directory / "ca.crt", directory / "tls.crt", directory / "tls.key"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return documented_openssl(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def agent(certificates: tuple[Path, Path, Path],
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    ca, cert, key = certificates
    folder = tmp_path_factory.mktemp("agent")
    token = secrets.token_urlsafe(24)
    (folder / "token").write_text(token)
    port = free_port()
    proc = start_agent([sys.executable, "-m", "chaos.agent", "--listen", f"127.0.0.1:{port}", "--token-file",
                        str(folder / "token"), "--interface", "lo", "--node", "tls-node", "--tls-cert", str(cert),
                        "--tls-key", str(key), "--client-timeout", "3"])
    try:
        yield f"https://127.0.0.1:{port}", token, ca
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
        assert "Traceback" not in proc.stderr.read()  # refused clients leave no trace on its log


def listing(url: str, token: str, ca: Path) -> tuple[int, bytes]:
    request = urllib.request.Request(f"{url}/v1/faults", headers={"Authorization": f"Bearer {token}"})
    try:
        with tls_opener(ssl.create_default_context(cafile=ca)).open(request, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_the_documented_certificate_serves_and_is_verified_for_the_agents_name(agent: tuple[str, str, Path]) -> None:
    url, token, ca = agent
    assert listing(url, token, ca) == (200, b'{"faults": []}\n')
    assert listing(url, "not-the-token", ca)[0] == 401


def test_another_ca_or_another_name_is_refused(agent: tuple[str, str, Path], tmp_path: Path) -> None:
    url, token, _ca = agent
    other_ca, _, _ = pki.serving(tmp_path / "other", AGENT_TLS_NAME)
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        listing(url, token, other_ca)
    # Dialled as an ordinary https URL, the certificate's name is not the address dialled: refused too.
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(f"{url}/healthz", context=ssl.create_default_context(cafile=_ca), timeout=10)


def test_a_cleartext_request_is_answered_400_and_its_token_goes_unread(agent: tuple[str, str, Path]) -> None:
    url, token, ca = agent
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(f"POST /v1/faults HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                     "Content-Length: 2\r\n\r\n{}".encode())
        reply = b"".join(iter(lambda: conn.recv(4096), b""))
    assert reply.startswith(b"HTTP/1.1 400 Bad Request\r\n") and reply.endswith(b"this agent speaks https only (TLS)\n")
    assert listing(url, token, ca) == (200, b'{"faults": []}\n')


def test_a_silent_client_is_cut_off_and_a_full_agent_closes_new_connections(agent: tuple[str, str, Path]) -> None:
    url, token, ca = agent
    port = int(url.rsplit(":", 1)[1])
    silent = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(TokenServer.max_connections)]
    try:
        time.sleep(1)  # each is taken by a thread, waiting for its handshake
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # no thread left: closed at once
            listing(url, token, ca)
        for conn in silent:  # the agent hangs up on each after --client-timeout (3 s), not the client
            conn.settimeout(5)
            assert conn.recv(1) == b""
    finally:
        for conn in silent:
            conn.close()
    assert listing(url, token, ca)[0] == 200  # and serves again


@pytest.mark.parametrize(("extra", "said"), [
    (["--listen", "0.0.0.0:9470", "--plaintext"], "--plaintext: only on a loopback address (got '0.0.0.0')"),
    (["--listen", "127.0.0.1:9470"], "--tls-cert and --tls-key are required"),
    (["--listen", "127.0.0.1:9470", "--tls-cert", "/nonexistent", "--tls-key", "/nonexistent"],
     "--tls-cert/--tls-key: cannot load /nonexistent"),
    (["--listen", "127.0.0.1:9470", "--plaintext", "--client-timeout", "0"], "--client-timeout: expected seconds"),
])
def test_an_agent_without_tls_beyond_loopback_does_not_start(extra: list[str], said: str, tmp_path: Path) -> None:
    (tmp_path / "token").write_text(secrets.token_urlsafe(24))
    done = subprocess.run([sys.executable, "-m", "chaos.agent", "--token-file", str(tmp_path / "token"), *extra],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr


class _NoKube:
    """The client must refuse before it looks anything up."""

    def __getattr__(self, name: str) -> None:
        raise AssertionError(f"the client asked the cluster ({name}) before refusing")


def test_the_client_never_sends_the_token_in_cleartext_beyond_this_machine() -> None:
    client = AgentClient(_NoKube(), token="t" * 24)  # type: ignore[arg-type]
    with pytest.raises(AgentError, match=r"refusing to send the agent token in cleartext to http://10\.0\.0\.5:9470"):
        client.list("http://10.0.0.5:9470")


def test_without_a_ca_an_https_agent_is_not_called(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from chaos.errors import NotFound

    class NoConfigMap:
        def read_config_map(self, namespace: str, name: str) -> None:
            raise NotFound(f"{namespace}/{name}")

    monkeypatch.delenv("KILOCARD_AGENT_CA", raising=False)
    with pytest.raises(AgentError, match="no CA to verify the agents' certificates: set \\$KILOCARD_AGENT_CA"):
        AgentClient(NoConfigMap(), token="t" * 24).list("https://10.0.0.5:9470")  # type: ignore[arg-type]
    monkeypatch.setenv("KILOCARD_AGENT_CA", str(tmp_path / "missing.crt"))
    with pytest.raises(AgentError, match="\\$KILOCARD_AGENT_CA: cannot load the agents' CA from"):
        AgentClient(NoConfigMap(), token="t" * 24).list("https://10.0.0.5:9470")  # type: ignore[arg-type]
