"""The README's main command at full size: `kilocard testbed up --fleet default` on its own ports
gives 128 Ready nodes, 1024 allocatable cards, the whole fleet Running and Ready, TP=8 replicas on
distinct nodes and every TP group whole; `down` then leaves nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from chaos.kube import Kube, pod_ready
from probes import placement, snapshot, tp_groups
from testbed import fleet
from testbed.config import TestbedConfig, taken_ports
from tests.testbed.conftest import PORT_BASE

pytestmark = pytest.mark.testbed


def kilocard(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_the_thousand_card_testbed_with_its_fleet(tmp_path):
    state = ["--state-dir", str(tmp_path)]
    up = kilocard("testbed", "up", "--fleet", "default", "--port-base", str(PORT_BASE + 60), *state)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        status = json.loads(kilocard("testbed", "status", "--json", *state).stdout)
        assert status["nodes"] == {"total": 128, "ready": 128}
        assert status["cards"]["allocatable"] == 1024 and all(p["healthy"] for p in status["processes"])
        kube = Kube.from_kubeconfig(tmp_path / "kubeconfig")
        try:
            pods = kube.list_pods(fleet.DEFAULT_NAMESPACE).items
            expected = fleet.expected_pods(fleet.load("default", "nvidia.com/gpu"))
            assert len(pods) == expected and all(p.status.phase == "Running" and pod_ready(p) for p in pods)
            snap = snapshot.fetch(kube, namespace=fleet.DEFAULT_NAMESPACE)
        finally:
            kube.close()
        big = placement.anti_affinity(snap, "llama-3-70b", namespace=fleet.DEFAULT_NAMESPACE)
        assert big.ok and len({p.node for p in snap.replicas("llama-3-70b")}) == 8, big.reason
        for model in snap.models():
            assert tp_groups.check(snap, model).ok, model
    finally:
        down = kilocard("testbed", "down", *state)
    assert down.returncode == 0, down.stderr
    assert taken_ports(TestbedConfig(port_base=PORT_BASE + 60).ports) == []
