"""Inside a cluster (the reaper CronJob, a runner Job) kilocard authenticates as its pod's
ServiceAccount: a real token from the TokenRequest API, the reaper's least-privilege RBAC, the
testbed's apiserver, no kubeconfig anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from chaos import ledger, plan
from chaos.agent.client import AgentClient
from chaos.faults import Context
from tests.testbed.helpers import apply_deploy, markers

pytestmark = pytest.mark.testbed


def test_the_reaper_path_recovers_with_a_service_account_token(testbed, kube, pool, tmp_path):
    apply_deploy(kube, "namespace.yaml", "rbac-reaper.yaml")
    (node,) = pool(1).node_names
    ctx = Context(kube, AgentClient(kube), f"sa-{uuid.uuid4().hex[:6]}", say=lambda _m: None)
    plan.inject(ctx, ledger.Ledger(ctx.run_id, kube, tmp_path / "runner-ledger"),
                {"kind": "node-isolate", "nodes": [node], "ttl_seconds": 300})
    assert kube.read_node(node).spec.unschedulable and markers(kube, ctx.run_id)

    # What Kubernetes mounts into the reaper's pod: a token bound to its ServiceAccount, the CA.
    account = tmp_path / "serviceaccount"
    account.mkdir()
    token = kube.core.create_namespaced_service_account_token(
        "kilocard-reaper", "kilocard-system", {"spec": {"expirationSeconds": 600}}).status.token
    (account / "token").write_text(token)
    (account / "ca.crt").write_bytes(testbed.pki.ca_cert.read_bytes())
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "KILOCARD_STATE": str(tmp_path / "none"),
           "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(testbed.config.ports.apiserver),
           "KILOCARD_SERVICE_ACCOUNT_DIR": str(account)}
    result = subprocess.run([sys.executable, "-m", "chaos.cli", "recover", "--run", ctx.run_id, "--ledger-dir",
                             str(tmp_path / "no-local-ledger")], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"reverted {ctx.run_id} node-isolate {node}"
    assert not kube.read_node(node).spec.unschedulable and markers(kube, ctx.run_id) == []
