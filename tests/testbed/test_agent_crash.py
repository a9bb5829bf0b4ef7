"""The real node agent (tc, nftables) behind a cluster node: a SIGKILLed runner leaves its qdisc
and nft tables in place, and `kilocard recover` removes them through the agent, by the ledger's
in-cluster markers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import pytest
import yaml

from testbed import nodes
from tests.netns.netns import free_port, start_agent, veth_pair
from tests.testbed.helpers import markers, run_cli, wait_applied

pytestmark = pytest.mark.testbed


def test_sigkilled_runner_then_recover_clears_real_qdiscs_and_nft_tables(testbed, kube, tmp_path):
    with veth_pair() as pair:
        port = free_port()
        agent = start_agent([sys.executable, "-m", "chaos.agent", "--plaintext", "--listen", f"127.0.0.1:{port}",
                             "--token-file", str(testbed.paths.agent_token), "--interface", pair.veth_a,
                             "--state-file", str(tmp_path / "agent.json")])
        node = f"real-agent-{uuid.uuid4().hex[:6]}"
        manifest = nodes.node_manifest(0, testbed.config, prefix=node)
        manifest["metadata"]["name"] = node
        manifest["metadata"]["annotations"][nodes.AGENT_ANNOTATION] = f"http://127.0.0.1:{port}"
        kube.create_node(manifest)
        try:
            spec = tmp_path / "faults.yaml"
            spec.write_text(yaml.safe_dump([
                {"kind": f"network-{kind}", "nodes": [node], "netns": pair.a, "params": params, "ttl_seconds": 600}
                for kind, params in (("bandwidth", {"rate_mbit": 10}), ("loss", {"percent": 20}),
                                     ("partition", {"cidrs": [f"{pair.ip_b}/32"]}))]))
            run_id = f"agent-{uuid.uuid4().hex[:6]}"
            proc = run_cli(testbed, tmp_path / "ledger", "fault", "-f", str(spec), "--duration", "600",
                           "--run-id", run_id)
            wait_applied(proc, 3)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            assert "tbf" in pair.qdisc() and pair.nft_tables().count("kilocard_") == 2
            assert pair.udp_delivered(100) == 0

            result = subprocess.run([sys.executable, "-m", "chaos.cli", "recover", "--run", run_id],
                                    env={**os.environ, "KUBECONFIG": str(testbed.paths.kubeconfig),
                                         "KILOCARD_LEDGER": str(tmp_path / "elsewhere")},
                                    capture_output=True, text=True, timeout=60)
            assert result.returncode == 0, result.stderr
            assert "tbf" not in pair.qdisc() and "kilocard" not in pair.nft_tables()
            assert pair.udp_delivered(200) >= 198
            assert markers(kube, run_id) == []
        finally:
            kube.delete_node(node)
            agent.terminate()
            agent.wait(timeout=30)
