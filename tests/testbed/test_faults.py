"""Every fault kind on the real control plane (agent kinds through the fake nodes' agent), with
its revert verified from the API; crash safety with a SIGKILLed runner and with TTL expiry."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
import yaml

from chaos import ledger, plan, revert
from chaos.agent.client import AgentClient
from chaos.errors import SpecError
from chaos.faults import Context
from chaos.kube import pod_ready
from chaos.vocabulary import ISOLATION_ANNOTATION, ISOLATION_TAINT
from testbed import fleet
from tests.testbed.helpers import markers, run_cli, wait_applied, wait_ready

pytestmark = pytest.mark.testbed
BIG, SMALL = "llama-3-70b", "llama-2-7b-fragile"


@pytest.fixture
def ctx(kube):
    run_id = f"t-{uuid.uuid4().hex[:8]}"
    return Context(kube, AgentClient(kube), run_id, say=lambda _m: None)


@pytest.fixture
def book(ctx, kube, tmp_path):
    return ledger.Ledger(ctx.run_id, kube, tmp_path / "ledger")




def test_pod_kill_is_reproducible_skips_terminating_pods_and_controllers_replace(ctx, book, kube, pool):
    p = pool(1)
    fleet.deploy(kube, p.fleet(SMALL, replicas={SMALL: 6}), timeout=60, say=lambda _m: None)
    pods = wait_ready(kube, p.namespace, SMALL, 6)
    # One pod hangs in Terminating (a finalizer holds it): it must never be picked again.
    held = pods[0]
    kube.patch_pod(p.namespace, held.metadata.name, {"metadata": {"finalizers": ["kilocard.io/test"]}})
    kube.delete_pod(p.namespace, held.metadata.name)
    # Its replacement is up before sampling, so both samples see the same live pods.
    kube.wait_until("pods", lambda items: sum(pod_ready(x) for x in items) == 6, timeout=30, namespace=p.namespace)
    try:
        spec = {"kind": "pod-kill", "namespace": p.namespace, "label_selector": f"kilocard.io/model={SMALL}",
                "count": 3, "seed": 7}
        module, parsed = plan.parse(spec, "fault")
        first = module.targets(ctx, parsed, "fault")
        assert first == module.targets(ctx, parsed, "fault")  # same seed, same cluster: same pods
        assert held.metadata.name not in {t["name"] for t in first}
        every_pod = {k: v for k, v in spec.items() if k != "count"} | {"percent": 100}
        everything = module.targets(ctx, plan.parse(every_pod, "fault")[1], "fault")
        # Six live pods (the ReplicaSet replaced the held one), the Terminating one not among them.
        assert len(everything) == 6 and held.metadata.name not in {t["name"] for t in everything}

        injection = plan.inject(ctx, book, spec)
        assert [r.state for r in injection.records] == ["reverted"] * 3  # done: nothing to undo
        killed = {t["uid"] for t in first}
        after = kube.wait_until("pods", lambda items: sum(pod_ready(x) for x in items) >= 6
                                and not killed & {x.metadata.uid for x in items},
                                timeout=30, namespace=p.namespace)
        assert not killed & {x.metadata.uid for x in after}
        assert markers(kube, ctx.run_id) == []  # a pod kill leaves nothing to recover
    finally:
        kube.patch_pod(p.namespace, held.metadata.name, {"metadata": {"finalizers": None}})


def test_eviction_blocked_by_pdb_is_reported_and_kills_nothing(ctx, book, kube, pool):
    p = pool(2)
    for o in p.fleet(BIG, replicas={BIG: 3}):  # one replica Pending: the PDB allows no disruption
        kube.apply(o)
    ready = wait_ready(kube, p.namespace, BIG, 2)
    kube.wait_until("poddisruptionbudgets", lambda items: bool(items) and items[0].status.expected_pods == 3
                    and items[0].status.disruptions_allowed == 0, timeout=30, namespace=p.namespace)
    injection = plan.inject(ctx, book, {
        "kind": "pod-kill", "namespace": p.namespace, "label_selector": f"kilocard.io/model={BIG}",
        "field_selector": "status.phase=Running", "count": 1, "mode": "evict", "eviction_deadline_seconds": 2})
    (record,) = injection.records
    assert record.state == "failed" and "blocked by a PodDisruptionBudget" in record.error
    assert {x.metadata.uid for x in wait_ready(kube, p.namespace, BIG, 2)} == {x.metadata.uid for x in ready}


def test_eviction_honours_the_grace_period(ctx, book, kube, pool):
    p = pool(1)
    fleet.deploy(kube, p.fleet(SMALL, replicas={SMALL: 1}), timeout=60, say=lambda _m: None)
    (victim,) = wait_ready(kube, p.namespace, SMALL, 1)
    # Every update of the victim, from the watch: kwok, as the kubelet, confirms the deletion at
    # once (grace 0), so only the watch sees the grace period the eviction gave it.
    graces, stop = [], threading.Event()

    def follow():
        for kind, pod in kube.events("pods", p.namespace, f"kilocard.io/model={SMALL}", stop=stop, raw=True):
            if kind != "SYNC" and pod["metadata"]["uid"] == victim.metadata.uid:
                graces.append(pod["metadata"].get("deletionGracePeriodSeconds"))

    watcher = threading.Thread(target=follow, daemon=True)
    watcher.start()
    time.sleep(0.5)
    try:
        fault = plan.inject(ctx, book, {"kind": "pod-kill", "namespace": p.namespace, "mode": "evict",
                                        "label_selector": f"kilocard.io/model={SMALL}", "grace_seconds": 7})
        assert [r.state for r in fault.records] == ["reverted"]
        deadline = time.monotonic() + 10
        while 7 not in graces and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert [g for g in graces if g is not None][:1] == [7], graces  # the first grace period set was ours


def test_tp_group_kill_takes_whole_groups_and_rank_kill_one_member(ctx, book, kube, pool):
    p = pool(4)
    fleet.deploy(kube, p.fleet("llama-3-405b"), timeout=60, say=lambda _m: None)
    pods = wait_ready(kube, p.namespace, "llama-3-405b", 4)
    selector = {"namespace": p.namespace, "label_selector": "kilocard.io/model=llama-3-405b", "seed": 1}
    injection = plan.inject(ctx, book, {"kind": "tp-group-kill", "count": 1, **selector})
    groups = {r.target["group"] for r in injection.records}
    assert len(groups) == 1 and sorted(r.target["rank"] for r in injection.records) == [0, 1]
    killed = {r.target["uid"] for r in injection.records}
    survivors = {x.metadata.uid for x in pods} - killed
    after = kube.wait_until("pods", lambda items: sum(pod_ready(x) for x in items) == 4
                            and not killed & {x.metadata.uid for x in items}, timeout=30, namespace=p.namespace)
    assert survivors <= {x.metadata.uid for x in after}  # the other group was not touched

    injection = plan.inject(ctx, book, {"kind": "rank-kill", "rank": 1, "count": 2, **selector})
    assert sorted((r.target["group"], r.target["rank"]) for r in injection.records) == [
        (f"{p.namespace}/llama-3-405b-g0", 1), (f"{p.namespace}/llama-3-405b-g1", 1)]


def test_node_isolation_restores_exactly_the_prior_state(ctx, book, kube, pool):
    p = pool(3)
    fleet.deploy(kube, p.fleet(SMALL, replicas={SMALL: 3}), timeout=60, say=lambda _m: None)
    pre_cordoned = p.node_names[0]
    kube.patch_node(pre_cordoned, {"spec": {"unschedulable": True}})
    injection = plan.inject(ctx, book, {"kind": "node-isolate", "nodes": p.node_names[:2], "effect": "NoExecute",
                                          "ttl_seconds": 300})
    assert [r.state for r in injection.records] == ["applied", "applied"]
    assert len(markers(kube, ctx.run_id)) == 1
    for name in p.node_names[:2]:
        node = kube.read_node(name)
        assert node.spec.unschedulable
        assert any(t.key == ISOLATION_TAINT and t.effect == "NoExecute" for t in node.spec.taints)
    # NoExecute evicts what does not tolerate it; the replicas end up on the third node.
    kube.wait_until("pods", lambda items: sum(pod_ready(x) for x in items) == 3
                    and {x.spec.node_name for x in items if pod_ready(x)} == {p.node_names[2]},
                    timeout=30, namespace=p.namespace)
    assert revert.revert(ctx, book, injection.records) == []
    first, second = (kube.read_node(n) for n in p.node_names[:2])
    assert first.spec.unschedulable is True  # cordoned before: stays cordoned
    assert not second.spec.unschedulable
    for node in (first, second):
        assert not [t for t in (node.spec.taints or []) if t.key == ISOLATION_TAINT]
        assert ISOLATION_ANNOTATION not in (node.metadata.annotations or {})
    assert markers(kube, ctx.run_id) == []


def test_card_and_ecc_faults_through_the_agent_are_reverted(ctx, book, kube, pool):
    p = pool(1)
    node = p.node_names[0]
    injection = plan.inject(ctx, book, {"kind": "card-isolate", "nodes": [node], "card": 5, "ttl_seconds": 120})
    injection2 = plan.inject(ctx, book, {"kind": "gpu-ecc", "nodes": [node], "cards": [1, 2], "ttl_seconds": 120})
    kube.wait_until("nodes", lambda items: items[0].status.allocatable["nvidia.com/gpu"] == "7", timeout=10,
                    label_selector=f"kubernetes.io/hostname={node}")
    endpoint = ctx.agents.endpoint(node)
    active = ctx.agents.list(endpoint)
    assert sorted((f["kind"], f["target"]["card"], f["run_id"]) for f in active) == [
        ("card-isolate", 5, ctx.run_id), ("ecc", 1, ctx.run_id), ("ecc", 2, ctx.run_id)]
    assert revert.revert(ctx, book, injection.records + injection2.records) == []
    assert ctx.agents.list(endpoint) == []
    kube.wait_until("nodes", lambda items: items[0].status.allocatable["nvidia.com/gpu"] == "8", timeout=10,
                    label_selector=f"kubernetes.io/hostname={node}")
    assert markers(kube, ctx.run_id) == []


def test_no_targets_is_an_error_and_nothing_is_recorded(ctx, book, kube):
    with pytest.raises(SpecError, match="no targets: the selectors match nothing"):
        plan.inject(ctx, book, {"kind": "node-isolate", "node_selector": "kilocard.io/pool=nowhere",
                                  "ttl_seconds": 60})
    assert not book.path.exists() and markers(kube, ctx.run_id) == []
    empty = plan.inject(ctx, book, {"kind": "node-isolate", "node_selector": "kilocard.io/pool=nowhere",
                                      "ttl_seconds": 60, "allow_empty": True})
    assert empty.records == []


def crash_spec(kube, p):
    a, b = p.node_names
    fleet.deploy(kube, p.fleet(SMALL, replicas={SMALL: 1}), timeout=60, say=lambda _m: None)
    return [
        {"kind": "network-policy-partition", "namespace": p.namespace, "pod_selector": {"kilocard.io/model": SMALL},
         "ttl_seconds": 600},
        {"kind": "node-isolate", "nodes": [a], "ttl_seconds": 600},
        {"kind": "card-isolate", "nodes": [b], "card": 0, "ttl_seconds": 600},
        {"kind": "gpu-ecc", "nodes": [b], "card": 3, "ttl_seconds": 600},
        {"kind": "network-delay", "nodes": [b], "params": {"ms": 50}, "ttl_seconds": 600},
    ]


def assert_clean(kube, agents, p, run_id):
    a, b = p.node_names
    node = kube.read_node(a)
    assert not node.spec.unschedulable
    assert not [t for t in (node.spec.taints or []) if t.key == ISOLATION_TAINT]
    assert agents.list(agents.endpoint(b)) == []
    kube.wait_until("nodes", lambda items: items[0].status.allocatable["nvidia.com/gpu"] == "8", timeout=10,
                    label_selector=f"kubernetes.io/hostname={b}")
    assert kube.list_network_policies(p.namespace) == []
    assert markers(kube, run_id) == []


def runner_with_every_revertible_kind(testbed, kube, p, tmp_path, prefix):
    """A `kilocard fault` runner holding one fault of each kind; returns once all are applied."""
    spec = tmp_path / "faults.yaml"
    faults = crash_spec(kube, p)
    spec.write_text(yaml.safe_dump(faults))
    run_id = f"{prefix}-{uuid.uuid4().hex[:6]}"
    proc = run_cli(testbed, tmp_path / "ledger", "fault", "-f", str(spec), "--duration", "600", "--run-id", run_id)
    wait_applied(proc, len(faults))
    return proc, run_id


def test_sigkilled_runner_then_recover_leaves_nothing_behind(testbed, kube, pool, tmp_path):
    p = pool(2)
    proc, run_id = runner_with_every_revertible_kind(testbed, kube, p, tmp_path, "crash")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    agents = AgentClient(kube)
    assert kube.read_node(p.node_names[0]).spec.unschedulable  # the runner died mid-fault
    assert len(agents.list(agents.endpoint(p.node_names[1]))) == 3
    (policy,) = kube.list_network_policies(p.namespace)
    assert policy["spec"]["policyTypes"] == ["Egress", "Ingress"] and policy["spec"].get("ingress") in (None, [])
    # Recover from "another machine": no local ledger, only the in-cluster markers; first, dry.
    dry = subprocess.run([sys.executable, "-m", "chaos.cli", "recover", "--run", run_id, "--dry-run", "-o", "json",
                          "--ledger-dir", str(tmp_path / "elsewhere")],
                         env={**os.environ, "KUBECONFIG": str(testbed.paths.kubeconfig)}, capture_output=True,
                         text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    would = json.loads(dry.stdout)
    assert len(would) == 5 and {r["run_id"] for r in would} == {run_id} and all(r["state"] != "reverted" for r in would)
    assert kube.read_node(p.node_names[0]).spec.unschedulable  # nothing reverted by the dry run
    assert len(agents.list(agents.endpoint(p.node_names[1]))) == 3
    result = subprocess.run([sys.executable, "-m", "chaos.cli", "recover", "--run", run_id, "--ledger-dir",
                             str(tmp_path / "elsewhere")], env={**os.environ, "KUBECONFIG": str(testbed.paths.kubeconfig)},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("reverted") == 5
    assert_clean(kube, agents, p, run_id)


def test_sigterm_makes_the_runner_revert_before_leaving(testbed, kube, pool, tmp_path):
    p = pool(2)
    proc, run_id = runner_with_every_revertible_kind(testbed, kube, p, tmp_path, "term")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"{run_id}: reverted" in out
    assert_clean(kube, AgentClient(kube), p, run_id)
    assert [r for r in ledger.read_disk(tmp_path / "ledger" / f"{run_id}.jsonl") if r.open] == []


def test_ttl_expiry_reverts_with_no_runner_alive(ctx, kube, pool, tmp_path):
    p = pool(1)
    node = p.node_names[0]
    book = ledger.Ledger(ctx.run_id, kube, tmp_path / "ledger")
    plan.inject(ctx, book, {"kind": "node-isolate", "nodes": [node], "ttl_seconds": 3})
    assert kube.read_node(node).spec.unschedulable
    # Nobody reverts: the in-cluster reaper (the fake nodes' agent) does, once the marker expires.
    kube.wait_until("nodes", lambda items: not items[0].spec.unschedulable, timeout=15,
                    label_selector=f"kubernetes.io/hostname={node}")
    assert not [t for t in (kube.read_node(node).spec.taints or []) if t.key == ISOLATION_TAINT]
    deadline = time.monotonic() + 10
    while markers(kube, ctx.run_id) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert markers(kube, ctx.run_id) == []


def test_cli_bad_input_applies_nothing(testbed, kube, tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump([{"kind": "node-isolate", "nodes": ["gpu-000"], "ttl_seconds": 60},
                                    {"kind": "pod-kill", "namespace": "x", "percent": 101}]))
    proc = run_cli(testbed, tmp_path / "ledger", "fault", "-f", str(spec))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err == f"kilocard: {spec}[1].percent: expected a number above 0 to 100, got 101\n"
    assert not kube.read_node("gpu-000").spec.unschedulable  # the valid first fault was not applied either
    assert not (tmp_path / "ledger").exists()
    assert out == ""


def test_chaostoolkit_action_applies_and_rollback_reverts(testbed, kube, pool, tmp_path):
    from chaoslib.experiment import run_experiment

    p = pool(1)
    node = p.node_names[0]
    run_id = f"ctk-{uuid.uuid4().hex[:6]}"

    def activity(name, func, **arguments):
        return {"type": "action", "name": name,
                "provider": {"type": "python", "module": "chaos.actions", "func": func, "arguments": arguments}}

    experiment = {
        "title": "isolate a node", "description": "kilocard actions under chaostoolkit-lib",
        "configuration": {"kilocard_run_id": run_id, "kilocard_kubeconfig": str(testbed.paths.kubeconfig),
                          "kilocard_ledger_dir": str(tmp_path / "ledger")},
        "method": [activity("isolate", "isolate_nodes", nodes=[node], ttl_seconds=120)],
        "rollbacks": [{"type": "action", "name": "revert", "provider": {
            "type": "python", "module": "chaos.actions", "func": "revert_faults"}}],
    }
    journal = run_experiment(experiment, settings={"runtime": {"rollbacks": {"strategy": "always"}}})
    assert journal["status"] == "completed", journal
    (applied,) = journal["run"][0]["output"]
    landed = applied.pop("landed")
    assert applied == {"kind": "node-isolate", "target": {"node": node}, "state": "applied", "run_id": run_id}
    assert landed["status"] == "confirmed" and "kilocard.io/isolated:NoSchedule" in landed["evidence"], landed
    assert journal["rollbacks"][0]["output"] == [{"kind": "node-isolate", "target": {"node": node}}]
    assert not kube.read_node(node).spec.unschedulable
    assert markers(kube, run_id) == []
