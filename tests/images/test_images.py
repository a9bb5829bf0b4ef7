"""kilocard's images built from nothing but Debian's archive, PyPI and this tree (python -m images
build), read back from their OCI layout (every digest checked), unpacked layer over layer as a
runtime does, and their entry points run in a chroot in namespaces of their own (no container
runtime here): the runner as its own user, the agent as root with ip, tc and nft, applying and
reverting a real nftables fault in a network namespace the test made. Built twice: the same bytes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import chaos
from images import build, oci

pytestmark = pytest.mark.long(120)
TAG = chaos.__version__


@pytest.fixture(scope="module")
def layout(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("images") / "oci"
    build.build(out, TAG)
    return out


def unpacked(layout: Path, name: str, dest: Path) -> oci.Image:
    image = oci.read(layout, f"{name}:{TAG}")
    dest.mkdir()
    oci.unpack(image, dest)
    return image


def inside(root: Path, image: oci.Image, argv: list[str], *, net: bool = False) -> subprocess.CompletedProcess[str]:
    """`argv` in `root` as the image's user, with its environment and working directory: a mount
    namespace with its own /proc (and with `net`, a network namespace with loopback up)."""
    config = image.config["config"]
    user = config["User"]
    script = f'mount -t proc proc "{root}/proc" && ' + ("ip link set lo up && " if net else "") + \
        f'exec chroot --userspec={user}:{user} "{root}" /usr/bin/env -i --chdir={config["WorkingDir"]} ' \
        f'{" ".join(config["Env"])} HOME={config["WorkingDir"]} "$@"'
    namespaces = ["--mount", "--propagation", "private", "--pid", "--fork", *(["--net"] if net else [])]
    return subprocess.run(["unshare", *namespaces, "sh", "-c", script, "inside", *argv], capture_output=True,
                          text=True, timeout=120)


def test_the_runner_image_runs_kilocard_as_its_own_user_and_checks_the_catalog(layout, tmp_path):
    root = tmp_path / "runner"
    image = unpacked(layout, "kilocard", root)
    config = image.config["config"]
    assert config["User"] == str(build.RUNNER_UID) and config["Entrypoint"] == ["/opt/kilocard/bin/kilocard"]
    helped = inside(root, image, [*config["Entrypoint"], *config["Cmd"]])
    assert helped.returncode == 0 and "usage: kilocard" in helped.stdout, helped.stderr
    catalog = inside(root, image, ["kilocard", "catalog", "--path"])
    assert catalog.returncode == 0, catalog.stderr
    checked = inside(root, image, ["kilocard", "validate", catalog.stdout.strip()])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    whoami = inside(root, image, ["python", "-c", "import os, kubernetes, chaoslib; print(os.getuid(), os.getcwd())"])
    assert whoami.stdout.split() == [str(build.RUNNER_UID), "/home/kilocard"], whoami.stderr
    assert not (root / "opt" / "kilocard" / "bin" / "pip").exists()  # nothing to install with at run time


AGENT_SCRIPT = r"""
import json, subprocess, sys, time, urllib.request
token = "image-test-token-0123456789"
open("/tmp/token", "w").write(token)
agent = subprocess.Popen(["python", "-m", "chaos.agent", "--listen", "127.0.0.1:9470", "--plaintext",
                          "--token-file", "/tmp/token", "--interface", "lo", "--state-file", "/tmp/agent.json"],
                         stdout=subprocess.PIPE, text=True)
print(agent.stdout.readline().strip(), flush=True)

def call(method, path, body=None):
    request = urllib.request.Request("http://127.0.0.1:9470" + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return reply.status, json.loads(reply.read())

status, fault = call("POST", "/v1/faults", {"kind": "partition", "target": {}, "params": {"cidrs": ["10.9.0.0/16"]},
                                            "ttl_seconds": 60, "run_id": "image-test"})
print("applied", status, json.dumps(sorted(fault)), flush=True)
print("ruleset", "kilocard_" in subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout)
print("reverted", call("DELETE", "/v1/faults/" + fault["id"])[0])
print("ruleset", "kilocard_" in subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout)
agent.terminate()
print("exit", agent.wait(30))
"""


def test_the_agent_image_runs_as_root_with_its_tools_and_applies_and_reverts_a_real_nftables_fault(layout, tmp_path):
    root = tmp_path / "agent"
    image = unpacked(layout, "kilocard-agent", root)
    config = image.config["config"]
    assert config["User"] == "0" and config["Entrypoint"] == ["/opt/kilocard/bin/python", "-m", "chaos.agent"]
    helped = inside(root, image, [*config["Entrypoint"], *config["Cmd"]])
    assert helped.returncode == 0 and "--listen" in helped.stdout, helped.stderr
    for tool in (["ip", "-V"], ["tc", "-V"], ["nft", "--version"]):
        assert inside(root, image, tool).returncode == 0, tool
    # The DaemonSet's own command (deploy/chart/kilocard/files/agent-daemonset.yaml) resolves in the image.
    (root / "tmp" / "agent.py").write_text(AGENT_SCRIPT)
    ran = inside(root, image, ["python", "/tmp/agent.py"], net=True)
    said = ran.stdout.splitlines()
    assert ran.returncode == 0 and said[0].startswith("agent: listening on http://127.0.0.1:9470"), ran.stderr
    assert said[1].startswith("applied 201") and said[2:] == ["ruleset True", "reverted 200", "ruleset False",
                                                             "exit 0"], ran.stdout + ran.stderr


def test_a_second_build_gives_the_same_bytes(layout, tmp_path):
    again = tmp_path / "oci"
    build.build(again, TAG)
    index = json.loads((layout / "index.json").read_text())
    assert json.loads((again / "index.json").read_text()) == index
    assert {p.name for p in (again / "blobs" / "sha256").iterdir()} == {
        p.name for p in (layout / "blobs" / "sha256").iterdir()}
