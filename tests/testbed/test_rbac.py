"""R5: the RBAC of kilocard's chart (deploy/chart/kilocard, installed as helm renders it; its files
are also what deploy/kustomization.yaml installs) on the real apiserver, each identity authenticated as its pod would be
(a TokenRequest token of its ServiceAccount, not impersonation): the runner performs a fault of
each way it changes the cluster (pod delete and eviction, node holds, the agent, NetworkPolicies,
DeviceTaintRules) and reads what its probes read; the reaper reverts every kind it may find in
a ledger marker; the agent's pods (the namespace's default account, no token mounted) can call
nothing; and each is refused everything else with a 403."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
import yaml

from chaos import ledger, plan, release, revert
from chaos.agent.client import AgentClient
from chaos.errors import KubeError
from chaos.fault_events import FaultEvents
from chaos.faults import Context
from chaos.kube import Kube
from probes import snapshot
from testbed import fleet
from tests.testbed.helpers import CHART_FILES, DEPLOY, install_chart, markers, service_account_kubeconfig, wait_ready

pytestmark = pytest.mark.testbed
SMALL = "llama-2-7b-fragile"


@pytest.fixture
def identity(kube, testbed, tmp_path):
    """identity(account) -> a Kube authenticated as kilocard-system/<account>."""
    install_chart(kube)
    made: list[Kube] = []

    def make(account: str) -> Kube:
        path = service_account_kubeconfig(testbed, kube, "kilocard-system", account, tmp_path / f"{account}.kubeconfig")
        made.append(Kube.from_kubeconfig(path))
        return made[-1]

    yield make
    for k in made:
        k.close()


def every_kind(p, driver: str) -> list[dict]:
    a, b = p.node_names
    return [
        {"kind": "pod-kill", "namespace": p.namespace, "label_selector": "kilocard.io/model", "count": 1},
        {"kind": "pod-kill", "namespace": p.namespace, "label_selector": "kilocard.io/model", "count": 1,
         "mode": "evict"},
        {"kind": "node-isolate", "nodes": [a], "drain": True, "ttl_seconds": 300},
        {"kind": "node-out-of-service", "nodes": [b], "ttl_seconds": 300},
        {"kind": "gpu-ecc", "nodes": [b], "card": 0, "params": {"type": "sbe"}, "ttl_seconds": 300},  # no quarantine
        {"kind": "network-policy-partition", "namespace": p.namespace, "pod_selector": {"kilocard.io/model": SMALL},
         "ttl_seconds": 300},
        {"kind": "dra-card-isolate", "nodes": [b], "cards": [1], "driver": driver, "ttl_seconds": 300},
    ]


def residue(kube: Kube, p, run_id: str) -> list[str]:
    """What of the run is still in the cluster."""
    nodes = [kube.read_node(n) for n in p.node_names]
    left = [f"{n.metadata.name} cordoned" for n in nodes if n.spec.unschedulable]
    left += [f"{n.metadata.name} taint {t.key}" for n in nodes for t in (n.spec.taints or [])
             if t.key.startswith("kilocard.io/") and t.key != fleet.POOL_LABEL
             or t.key == "node.kubernetes.io/out-of-service"]
    left += [f"NetworkPolicy {x['metadata']['name']}" for x in kube.list_network_policies(p.namespace)]
    left += [f"DeviceTaintRule {r['metadata']['name']}" for r in kube.list_objects("resource.k8s.io/v1beta2",
                                                                                 "DeviceTaintRule")
             if r["metadata"].get("labels", {}).get("kilocard.io/run-id") == run_id]
    agents = AgentClient(kube)
    left += [f"agent fault {f['kind']} on {n}" for n in p.node_names for f in agents.list(agents.endpoint(n))]
    return left + [f"marker {c.metadata.name}" for c in markers(kube, run_id)]


def deployed(kube, pool):
    p = pool(2)
    fleet.deploy(kube, p.fleet(SMALL, replicas={SMALL: 2}), timeout=60, say=lambda _m: None)
    wait_ready(kube, p.namespace, SMALL, 2)
    return p


def test_the_runner_performs_every_fault_kind_and_reads_what_its_probes_read(identity, kube, pool, tmp_path):
    runner = identity("kilocard-runner")
    p = deployed(kube, pool)
    ctx = Context(runner, AgentClient(runner), f"rbac-{uuid.uuid4().hex[:6]}", say=lambda _m: None)
    book = ledger.Ledger(ctx.run_id, runner, tmp_path)
    told = FaultEvents(runner, ctx.run_id).start()  # as a run does: each transition an Event on its target
    records = []
    for raw in every_kind(p, f"{p.name}.gpu.kilocard.io"):
        injection = plan.inject(ctx, book, raw)
        assert not injection.failed, injection.failed
        records += injection.records
    seen = snapshot.fetch(runner, "nvidia.com/gpu", p.namespace)  # the snapshot probes' two LISTs
    assert {n.name for n in seen.nodes} >= set(p.node_names)
    assert release.fetch(runner, [(p.namespace, SMALL)])  # the journal's release metadata
    assert revert.revert(ctx, book, records) == []
    assert residue(kube, p, ctx.run_id) == []
    summary = told.stop()
    assert summary["failed"] == [] and summary["sent"] >= len(records), summary


def test_the_reaper_reverts_every_kind_with_its_own_account(identity, kube, testbed, pool, tmp_path):
    p = deployed(kube, pool)
    run_id = f"reap-{uuid.uuid4().hex[:6]}"
    ctx = Context(kube, AgentClient(kube), run_id, say=lambda _m: None)
    book = ledger.Ledger(run_id, kube, tmp_path / "runner-ledger")
    for raw in every_kind(p, f"{p.name}.gpu.kilocard.io")[2:]:  # the kinds that leave something to revert
        assert not plan.inject(ctx, book, raw).failed
    identity("kilocard-reaper")  # its kubeconfig, for the process below
    result = subprocess.run(
        [sys.executable, "-m", "chaos.cli", "recover", "--run", run_id, "--kubeconfig",
         str(tmp_path / "kilocard-reaper.kubeconfig"), "--ledger-dir", str(tmp_path / "no-local-ledger")],
        env={**os.environ, "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("reverted ") == 5, result.stdout
    assert residue(kube, p, run_id) == []


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "default"},
       "spec": {"containers": [{"name": "c", "image": "i"}]}}
REFUSED = {
    "kilocard-runner": {
        "create a workload": lambda k: k.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
            "name": "x", "namespace": "default"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                "metadata": {"labels": {"a": "b"}}, "spec": POD["spec"]}}}),
        "create a pod": lambda k: k.apply(POD),
        "read another secret": lambda k: k.read_secret("kilocard-system", "some-other-secret"),
        "read a secret elsewhere": lambda k: k.read_secret("kube-system", "kilocard-agent-token"),
        "delete a namespace": lambda k: k.delete_namespace("kilocard-rbac-victim"),
        "delete a node": lambda k: k.delete_node("gpu-000"),
        "create a DeviceClass": lambda k: k.apply({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                                  "metadata": {"name": "x"}}),
        "change RBAC": lambda k: k.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                                          "metadata": {"name": "escalate"},
                                          # its own role: no escalation check refuses it first
                                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                      "kind": "ClusterRole", "name": "kilocard-runner"},
                                          "subjects": [{"kind": "ServiceAccount", "name": "kilocard-runner",
                                                        "namespace": "kilocard-system"}]}),
    },
    "kilocard-reaper": {
        "delete a pod": lambda k: k.delete_pod("default", "x"),
        "evict a pod": lambda k: k.evict_pod("default", "x"),
        "list pods elsewhere": lambda k: k.list_pods_raw("default"),
        "create a NetworkPolicy": lambda k: k.create_network_policy("default", {
            "metadata": {"name": "x"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}),
        "create a DeviceTaintRule": lambda k: k.apply({
            "apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule", "metadata": {"name": "x"},
            "spec": {"deviceSelector": {"driver": "d"}, "taint": {"key": "k", "effect": "NoSchedule"}}}),
        "read another secret": lambda k: k.read_secret("kilocard-system", "some-other-secret"),
        "delete a node": lambda k: k.delete_node("gpu-000"),
        "record an Event": lambda k: k.record_event("Node", "gpu-000", "default", "X", "x", "kilocard"),
    },
    "default": {  # the agent DaemonSet's pods: no token mounted, and none would help
        "list nodes": lambda k: k.list_nodes(),
        "read the agent token": lambda k: k.read_secret("kilocard-system", "kilocard-agent-token"),
        "list pods": lambda k: k.list_pods_raw(None),
        "read a ledger marker": lambda k: k.list_config_maps("kilocard-system"),
    },
}


@pytest.mark.parametrize("account, attempt", [(a, what) for a, calls in REFUSED.items() for what in calls])
def test_each_identity_is_refused_everything_else(identity, kube, account, attempt):
    kube.ensure_namespace("kilocard-rbac-victim")  # one that admission would let go: only RBAC stops it
    as_it = identity(account)
    with pytest.raises(KubeError) as refused:
        REFUSED[account][attempt](as_it)
    # RBAC's own refusal ("... cannot <verb> resource ..."), not admission's or an escalation check's.
    assert refused.value.status == 403 and " cannot " in str(refused.value), refused.value


def test_the_agent_daemonset_mounts_no_token_and_the_reaper_runs_as_its_own_account():
    (agent,) = yaml.safe_load_all((CHART_FILES / "agent-daemonset.yaml").read_text())
    pod = agent["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
    (reaper,) = yaml.safe_load_all((CHART_FILES / "reaper-cronjob.yaml").read_text())
    assert reaper["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"] == "kilocard-reaper"
    kustomized = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    assert {f"chart/kilocard/files/{name}" for name in ("rbac-runner.yaml", "rbac-reaper.yaml", "agent-daemonset.yaml",
                                                         "reaper-cronjob.yaml")} <= set(kustomized)


def test_every_object_the_chart_can_render_is_admitted_by_the_apiserver(kube):
    """All values on: Ascend's rights (in MindX DL's namespaces), a run's Job, a game day's CronJob
    in its time zone. Admitted as they are (a field the API does not know would be refused)."""
    kube.ensure_namespace("mindx-dl")
    objects = install_chart(kube, values={
        "ascend": {"enabled": True}, "agent": {"allow": "tc-delay,kubelet-stop"},
        "run": {"enabled": True, "configMap": "exps", "experiments": ["s1.yaml"], "vars": ["namespace=serving"]},
        "gamedays": [{"name": "weekly", "schedule": "0 10 * * 3", "timeZone": "Asia/Shanghai",
                      "configMap": "weekly-plan", "plan": "plan.yaml"}],
        "prometheus": {"url": "https://prometheus.monitoring:9090", "podLabel": "exported_pod"}})
    assert {o["kind"] for o in objects} == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                            "RoleBinding", "DaemonSet", "CronJob", "Job"}
    npu = kube.get_object("rbac.authorization.k8s.io/v1", "Role", "kilocard-npu", "mindx-dl").to_dict()
    assert npu["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
