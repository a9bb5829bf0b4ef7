"""The runner's RBAC from deploy/ on the real apiserver: everything the faults need is allowed,
everything else is refused (impersonating the runner's ServiceAccount)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from chaos import ledger, plan, revert
from chaos.agent.client import AgentClient
from chaos.errors import KubeError
from chaos.faults import Context
from chaos.kube import Kube
from testbed import fleet
from tests.testbed.helpers import wait_ready

pytestmark = pytest.mark.testbed
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RUNNER = "system:serviceaccount:kilocard-system:kilocard-runner"


@pytest.fixture
def runner(kube, testbed):
    for name in ("namespace.yaml", "rbac-runner.yaml"):
        for doc in yaml.safe_load_all((DEPLOY / name).read_text()):
            kube.apply(doc)
    as_runner = Kube.from_kubeconfig(testbed.paths.kubeconfig)
    as_runner.api_client.set_default_header("Impersonate-User", RUNNER)
    as_runner.api_client.set_default_header("Impersonate-Group", "system:serviceaccounts")
    yield as_runner
    as_runner.close()


def test_runner_can_do_what_its_faults_need(runner, kube, pool, tmp_path):
    p = pool(2)
    fleet.deploy(kube, p.fleet("llama-2-7b-fragile", replicas={"llama-2-7b-fragile": 2}), timeout=60,
                 say=lambda _m: None)
    wait_ready(kube, p.namespace, "llama-2-7b-fragile", 2)
    ctx = Context(runner, AgentClient(runner), f"rbac-{uuid.uuid4().hex[:6]}", say=lambda _m: None)
    book = ledger.Ledger(ctx.run_id, runner, tmp_path)
    records = []
    for raw in ({"kind": "pod-kill", "namespace": p.namespace, "label_selector": "kilocard.io/model", "count": 1},
                {"kind": "pod-kill", "namespace": p.namespace, "label_selector": "kilocard.io/model", "count": 1,
                 "mode": "evict"},
                {"kind": "node-isolate", "nodes": [p.node_names[0]], "drain": True, "ttl_seconds": 60},
                {"kind": "gpu-ecc", "nodes": [p.node_names[1]], "card": 0, "ttl_seconds": 60},
                {"kind": "network-policy-partition", "namespace": p.namespace,
                 "pod_selector": {"kilocard.io/model": "llama-2-7b-fragile"}, "ttl_seconds": 60}):
        injection = plan.inject(ctx, book, raw)
        assert not injection.failed, injection.failed
        records += injection.records
    assert revert.revert(ctx, book, records) == []
    assert not kube.read_node(p.node_names[0]).spec.unschedulable


@pytest.mark.parametrize("attempt", ["create a workload", "read another secret", "delete a namespace",
                                     "read a secret elsewhere", "change RBAC"])
def test_runner_is_refused_everything_else(runner, attempt):
    calls = {
        "create a workload": lambda: runner.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                                                   "metadata": {"name": "x", "namespace": "default"},
                                                   "spec": {"selector": {"matchLabels": {"a": "b"}},
                                                            "template": {"metadata": {"labels": {"a": "b"}},
                                                                         "spec": {"containers": [
                                                                             {"name": "c", "image": "i"}]}}}}),
        "read another secret": lambda: runner.read_secret("kilocard-system", "some-other-secret"),
        "delete a namespace": lambda: runner.delete_namespace("default"),
        "read a secret elsewhere": lambda: runner.read_secret("kube-system", "kilocard-agent-token"),
        "change RBAC": lambda: runner.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                                             "metadata": {"name": "escalate"},
                                             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                         "name": "cluster-admin"},
                                             "subjects": [{"kind": "ServiceAccount", "name": "kilocard-runner",
                                                           "namespace": "kilocard-system"}]}),
    }
    with pytest.raises(KubeError) as refused:
        calls[attempt]()
    assert refused.value.status == 403, refused.value
