"""The `kilocard testbed` commands against the running test testbed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.testbed


def kilocard(*args):
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True, timeout=60)


def test_up_on_a_running_testbed_is_a_no_op(testbed):
    pids = [p.pid for p in testbed.procs()]
    result = kilocard("testbed", "up", "--state-dir", str(testbed.paths.root))
    assert result.returncode == 0, result.stderr
    assert "testbed already running" in result.stdout
    assert [p.pid for p in testbed.procs()] == pids and testbed.running()


def test_status_reports_endpoints_nodes_cards_and_health(testbed, kube):
    result = kilocard("testbed", "status", "--json", "--state-dir", str(testbed.paths.root))
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["running"] is True
    assert status["endpoints"]["kube-apiserver"] == f"https://127.0.0.1:{testbed.config.ports.apiserver}"
    assert [p["name"] for p in status["processes"]] == [
        "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok",
        "prometheus", "fleet-simulator", "remediator"]
    assert all(p["healthy"] and p["rss_mib"] > 0 for p in status["processes"])
    n = testbed.config.nodes
    assert status["nodes"] == {"total": n, "ready": n}
    assert status["cards"]["capacity"] == n * testbed.config.cards_per_node
    assert kube.server_version() == "v1.36.3"
