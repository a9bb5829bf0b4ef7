"""Reverts undo exactly what a run placed, when others share the target; and a plan that finds a
problem applies nothing. Each test here failed on the code before the plan/execute seam and the
stacking node isolation (see the closing note of the hardening issue)."""

from __future__ import annotations

import json
import signal
import time
import uuid

import pytest
import yaml

from chaos import ledger, plan, revert
from chaos.agent.client import AgentClient
from chaos.faults import Context
from chaos.vocabulary import AGENT_ENDPOINT_ANNOTATION, ISOLATION_TAINT
from tests.testbed.helpers import eventually, markers, run_cli, wait_ready

pytestmark = pytest.mark.testbed


def context(kube, prefix="x"):
    return Context(kube, AgentClient(kube), f"{prefix}-{uuid.uuid4().hex[:8]}", say=lambda _m: None)


def isolate(ctx, tmp_path, node, effect="NoSchedule"):
    book = ledger.Ledger(ctx.run_id, ctx.kube, tmp_path / "ledger")
    fault = plan.inject(ctx, book, {"kind": "node-isolate", "nodes": [node], "effect": effect, "ttl_seconds": 300})
    assert [r.state for r in fault.records] == ["applied"]
    return book, fault.records


def state(kube, node):
    """What a run may touch on a node: the cordon, the taints, kilocard's annotations. The node
    lifecycle controller mirrors the cordon as a taint a moment later: the cordon itself counts."""
    n = kube.read_node(node)
    return (bool(n.spec.unschedulable), sorted((t.key, t.value or "", t.effect) for t in n.spec.taints or []
                                               if t.key != "node.kubernetes.io/unschedulable"),
            sorted(k for k in (n.metadata.annotations or {}) if k.startswith("kilocard.io/isolat")))


def add_taints(kube, node, *taints):
    current = kube.read_node_raw(node)["spec"].get("taints") or []
    kube.patch_node(node, {"spec": {"taints": current + list(taints)}})


@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_a_foreign_taint_with_our_key_is_kept(kube, pool, tmp_path, effect):
    (node,) = pool(1).node_names
    add_taints(kube, node, {"key": ISOLATION_TAINT, "value": "ops-ticket-42", "effect": "NoSchedule"},
               {"key": "example.com/maintenance", "value": "true", "effect": "PreferNoSchedule"},
               {"key": "example.com/draining", "value": "x", "effect": "NoExecute", "timeAdded": "2026-12-01T00:00:00Z"})
    before = state(kube, node)
    raw_before = kube.read_node_raw(node)["spec"]["taints"]
    assert any(t.get("timeAdded") for t in raw_before)
    ctx = context(kube)
    book, records = isolate(ctx, tmp_path, node, effect)
    cordoned, taints, _ = state(kube, node)
    assert cordoned and any(k == ISOLATION_TAINT and e == effect for k, _v, e in taints)
    assert revert.revert(ctx, book, records) == []
    assert state(kube, node) == before
    # timeAdded and order kept. The node lifecycle controller mirrors the cordon as its own taint
    # (node.kubernetes.io/unschedulable) and takes it off after the uncordon, in its own time.
    assert eventually(lambda: kube.read_node_raw(node)["spec"]["taints"] == raw_before, 10), \
        kube.read_node_raw(node)["spec"]["taints"]


@pytest.mark.parametrize("effects", [("NoSchedule", "NoSchedule"), ("NoSchedule", "NoExecute")])
@pytest.mark.parametrize("cordoned_before", [False, True])
def test_overlapping_runs_stack_and_each_revert_lifts_only_its_own(kube, pool, tmp_path, effects, cordoned_before):
    (node,) = pool(1).node_names
    if cordoned_before:
        kube.patch_node(node, {"spec": {"unschedulable": True}})
    before = state(kube, node)
    first, second = context(kube, "first"), context(kube, "second")
    book_a, records_a = isolate(first, tmp_path, node, effects[0])
    book_b, records_b = isolate(second, tmp_path, node, effects[1])
    # The first run ends while the second still holds the node: it stays isolated as the second asked.
    assert revert.revert(first, book_a, records_a) == []
    cordoned, taints, annotations = state(kube, node)
    assert cordoned and (ISOLATION_TAINT, "kilocard", effects[1]) in taints and annotations
    if effects[0] != effects[1]:
        assert (ISOLATION_TAINT, "kilocard", effects[0]) not in taints
    assert revert.revert(second, book_b, records_b) == []
    assert state(kube, node) == before
    assert markers(kube, first.run_id) == markers(kube, second.run_id) == []


def test_a_writer_changing_the_taints_at_the_same_moment_is_not_lost(kube, testbed, pool, tmp_path):
    (node,) = pool(1).node_names
    before = state(kube, node)
    mine = testbed.kube()  # the run's own connection; `kube` plays the other writer
    armed: list[dict] = []  # the other writer's next taint, written right after our next read

    def then_someone_writes(read):
        def reading(name):
            node_seen = read(name)
            if armed:
                add_taints(kube, name, armed.pop())
            return node_seen
        return reading

    for reader in ("read_node", "read_node_raw"):  # however the fault reads the node
        if hasattr(mine, reader):
            setattr(mine, reader, then_someone_writes(getattr(mine, reader)))
    try:
        ctx = context(mine)
        armed.append({"key": "example.com/health", "value": "degraded", "effect": "NoSchedule"})
        book, records = isolate(ctx, tmp_path, node)
        assert not armed and ("example.com/health", "degraded", "NoSchedule") in state(kube, node)[1]
        armed.append({"key": "example.com/second", "value": "x", "effect": "PreferNoSchedule"})
        assert revert.revert(ctx, book, records) == []
        assert not armed
    finally:
        mine.close()
    cordoned, taints, annotations = state(kube, node)
    assert taints == sorted(before[1] + [("example.com/health", "degraded", "NoSchedule"),
                                         ("example.com/second", "x", "PreferNoSchedule")])
    assert (cordoned, annotations) == (before[0], before[2])


def run_faults(testbed, tmp_path, faults, *extra):
    spec = tmp_path / "faults.yaml"
    spec.write_text(yaml.safe_dump(faults))
    proc = run_cli(testbed, tmp_path / "ledger", "fault", "-f", str(spec), "--duration", "1", *extra)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err, spec


@pytest.mark.parametrize("late", ["no targets", "no such node", "bad selector", "card out of range", "agent down"])
def test_a_late_validation_error_applies_nothing(kube, testbed, pool, tmp_path, late):
    a, b = pool(2).node_names
    if late == "agent down":  # b's agent endpoint: a port nothing listens on
        kube.patch_node(b, {"metadata": {"annotations": {AGENT_ENDPOINT_ANNOTATION: "http://127.0.0.1:9"}}})
    before = state(kube, a)
    bad, message = {
        "no targets": ({"kind": "node-isolate", "node_selector": "kilocard.io/pool=nowhere", "ttl_seconds": 60},
                       "[1]: no targets: the selectors match nothing"),
        "no such node": ({"kind": "node-isolate", "nodes": ["gpu-that-is-not"], "ttl_seconds": 60},
                         "[1].nodes: no such node: gpu-that-is-not"),
        # Found by kilocard's own reading of the syntax now, before the cluster is asked.
        "bad selector": ({"kind": "pod-kill", "namespace": "default", "label_selector": "app in (a,", "count": 1},
                         "[1].label_selector: expected a label selector like"),
        "card out of range": ({"kind": "gpu-ecc", "nodes": [b], "card": 9, "ttl_seconds": 60},
                              f"[1].card: node {b} has cards 0-7 (nvidia.com/gpu), got 9"),
        "agent down": ({"kind": "gpu-ecc", "nodes": [b], "card": 1, "ttl_seconds": 60},
                       f"[1]: the agent of node {b} does not answer"),
    }[late]
    code, out, err, spec = run_faults(testbed, tmp_path, [
        {"kind": "node-isolate", "nodes": [a], "ttl_seconds": 60}, bad])
    assert code == 2, (out, err)
    assert err.startswith(f"kilocard: {spec}{message}"), err
    assert "Traceback" not in err and out == ""
    assert state(kube, a) == before
    assert not (tmp_path / "ledger").exists()  # not even recorded
    if late != "agent down":
        agents = AgentClient(kube)
        assert agents.list(agents.endpoint(b)) == []


def test_plan_resolves_and_checks_but_changes_nothing(kube, testbed, pool, tmp_path):
    a, b = pool(2).node_names
    before = state(kube, a)
    spec = tmp_path / "faults.yaml"
    spec.write_text(yaml.safe_dump([{"kind": "node-isolate", "nodes": [a], "ttl_seconds": 60},
                                    {"kind": "gpu-ecc", "nodes": [b], "cards": [2, 5], "ttl_seconds": 60}]))
    proc = run_cli(testbed, tmp_path / "ledger", "plan", "-f", str(spec), "--json")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert [(f["where"], f["kind"], f["targets"]) for f in json.loads(out)] == [
        (f"{spec}[0]", "node-isolate", [{"node": a}]),
        (f"{spec}[1]", "gpu-ecc", [{"node": b, "card": 2}, {"node": b, "card": 5}])]
    assert state(kube, a) == before and not (tmp_path / "ledger").exists()
    agents = AgentClient(kube)
    assert agents.list(agents.endpoint(b)) == []


def test_two_faults_of_one_run_on_one_node_are_two_holders(kube, pool, tmp_path):
    (node,) = pool(1).node_names
    before = state(kube, node)
    ctx = context(kube)
    book = ledger.Ledger(ctx.run_id, kube, tmp_path / "ledger")
    planned = plan.plan(ctx, [({"kind": "node-isolate", "nodes": [node], "ttl_seconds": 60}, "f[0]"),
                              ({"kind": "node-isolate", "nodes": [node], "effect": "NoExecute", "ttl_seconds": 60},
                               "f[1]")])
    for fault in planned.faults:
        plan.execute_one(ctx, book, fault)
    taints = state(kube, node)[1]
    assert (ISOLATION_TAINT, "kilocard", "NoSchedule") in taints and (ISOLATION_TAINT, "kilocard", "NoExecute") in taints
    first, second = planned.faults
    assert revert.revert(ctx, book, first.records) == []
    assert (ISOLATION_TAINT, "kilocard", "NoExecute") in state(kube, node)[1] and state(kube, node)[0]
    assert revert.revert(ctx, book, second.records) == []
    assert state(kube, node) == before


def test_entries_of_one_plan_that_cannot_stack_and_a_hold_past_the_ttl_are_refused(kube, testbed, pool, tmp_path):
    (node,) = pool(1).node_names
    code, out, err, spec = run_faults(testbed, tmp_path, [
        {"kind": "network-bandwidth", "nodes": [node], "params": {"rate_mbit": 100}, "ttl_seconds": 60},
        {"kind": "network-delay", "nodes": [node], "params": {"ms": 20}, "ttl_seconds": 60}])
    assert code == 2 and err.startswith(f"kilocard: {spec}[1]: {node} {{}} cannot stack with {spec}[0] of this plan")
    code, out, err, spec = run_faults(testbed, tmp_path, [{"kind": "node-isolate", "nodes": [node], "ttl_seconds": 5}],
                                      "--duration", "10")
    assert code == 2 and "--duration: 10 s is longer than the shortest ttl_seconds (5 s)" in err, err
    agents = AgentClient(kube)
    assert agents.list(agents.endpoint(node)) == [] and not kube.read_node(node).spec.unschedulable


def test_card_isolated_by_another_open_run_is_refused_naming_it(kube, testbed, pool, tmp_path):
    (node,) = pool(1).node_names
    holder = context(kube, "holder")
    book = ledger.Ledger(holder.run_id, kube, tmp_path / "holder")
    held = plan.inject(holder, book, {"kind": "card-isolate", "nodes": [node], "card": 4, "ttl_seconds": 120})
    try:
        code, out, err, spec = run_faults(testbed, tmp_path, [
            {"kind": "card-isolate", "nodes": [node], "cards": [3, 4], "ttl_seconds": 60}])
        assert code == 2, (out, err)
        assert f"is held by run {holder.run_id} (card-isolate" in err and err.startswith(f"kilocard: {spec}: "), err
        agents = AgentClient(kube)
        assert [f["run_id"] for f in agents.list(agents.endpoint(node))] == [holder.run_id]
    finally:
        assert revert.revert(holder, book, held.records) == []


def test_a_remediator_sharing_the_node_keeps_its_cordon_and_lifts_it_itself(kube, pool, tmp_path):
    (node,) = pool(1).node_names
    before = state(kube, node)
    ctx = context(kube)
    book, records = isolate(ctx, tmp_path, node)
    agents = AgentClient(kube)
    sick = agents.create(agents.endpoint(node), "ecc", {"card": 0}, {}, 120, "other-actor")

    def quarantined(items):
        return any(t.key == "nvidia.com/gpu-error" for t in items[0].spec.taints or [])

    try:
        kube.wait_until("nodes", quarantined, timeout=40, label_selector=f"kubernetes.io/hostname={node}")
        # Our run ends first: our taint goes, but the remediator still holds the node cordoned.
        assert revert.revert(ctx, book, records) == []
        cordoned, taints, annotations = state(kube, node)
        assert cordoned and not annotations and ISOLATION_TAINT not in {k for k, _v, _e in taints}
        assert ("nvidia.com/gpu-error", "fatal", "NoSchedule") in taints
    finally:
        agents.delete(agents.endpoint(node), sick["id"])  # the card is reset: the remediator releases it
    kube.wait_until("nodes", lambda items: not items[0].spec.unschedulable and not quarantined(items), timeout=40,
                    label_selector=f"kubernetes.io/hostname={node}")
    assert state(kube, node) == before


def test_a_stop_during_apply_skips_the_rest_and_exits_3(kube, testbed, pool, tmp_path):
    p = pool(2)
    for o in p.fleet("llama-3-70b", replicas={"llama-3-70b": 3}):  # one Pending: the PDB allows no eviction
        kube.apply(o)
    wait_ready(kube, p.namespace, "llama-3-70b", 2)
    kube.wait_until("poddisruptionbudgets", lambda items: bool(items) and items[0].status.expected_pods == 3
                    and items[0].status.disruptions_allowed == 0, timeout=30, namespace=p.namespace)
    spec = tmp_path / "faults.yaml"
    spec.write_text(yaml.safe_dump([
        {"kind": "pod-kill", "namespace": p.namespace, "label_selector": "kilocard.io/model=llama-3-70b",
         "field_selector": "status.phase=Running", "mode": "evict", "eviction_deadline_seconds": 300},
        {"kind": "node-isolate", "nodes": [p.node_names[0]], "ttl_seconds": 60}]))
    proc = run_cli(testbed, tmp_path / "ledger", "fault", "-f", str(spec), "--duration", "30")
    ledger_file = tmp_path / "ledger"
    assert eventually(lambda: any(ledger_file.glob("*.jsonl")), 30)  # the eviction is recorded, then waits
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)  # not the 300 s the eviction would have waited
    assert proc.returncode == 3, (out, err)
    assert f"kilocard: stopped before applying {spec}[1] (node-isolate)" in err
    assert "stopped while a PodDisruptionBudget blocked it" in out
    assert not kube.read_node(p.node_names[0]).spec.unschedulable
