"""Fault-landed verification on the real control plane: for every fault kind the testbed hosts,
its effect read back after the apply says Confirmed, and the same read-back, once the effect is
undone behind kilocard's back (a taint removed, allocatable restored, a fake node's effect
sabotaged), says Mismatch; a fault that never lands fails `kilocard run` unless it is allowed.

(The NPU kinds are proven the same way on the Ascend testbed, tests/testbed/test_ascend.py; the
real node agent's read-backs with real packets and processes in tests/netns.)"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from chaos import landed, ledger, plan, revert
from chaos.agent.client import AgentClient
from chaos.faults import Context, dra_card_isolation
from chaos.vocabulary import ISOLATION_TAINT, OUT_OF_SERVICE_TAINT
from testbed import fleet
from tests.testbed.helpers import agent, wait_ready
from tests.testbed.test_runner import kilocard_run

pytestmark = [pytest.mark.testbed, pytest.mark.long(70)]  # all, together (a module-scoped fixture)
SMALL = "llama-2-7b"
SOON = landed.Options(within_seconds=3)


@pytest.fixture
def ctx(kube):
    return Context(kube, AgentClient(kube), f"t-{uuid.uuid4().hex[:8]}", say=lambda _m: None)


@pytest.fixture
def book(ctx, kube, tmp_path):
    return ledger.Ledger(ctx.run_id, kube, tmp_path / "ledger")


@pytest.fixture(scope="module")
def serving(kube, module_pool):
    """One node serving a replica of a small model (pods to kill, a rank to stall), and a free one."""
    p = module_pool(2)
    fleet.deploy(kube, p.fleet(SMALL, replicas={SMALL: 1}), timeout=60, say=lambda _m: None)
    (pod,) = wait_ready(kube, p.namespace, SMALL, 1)
    return p, pod.spec.node_name, next(n for n in p.node_names if n != pod.spec.node_name)


def sim(kube, node: str, what: str) -> None:
    """Behind the agent's back, on the fake node: `sabotage/<node>/<id>` or `misfire/<node>/<kind>`."""
    endpoint, token = agent(kube, node)
    root = endpoint.rsplit("/nodes/", 1)[0]
    request = urllib.request.Request(f"{root}/sim/v1/{what}", method="POST", data=b"{}",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert reply.status == 200


def untaint(kube, node: str, key: str) -> None:
    kube.update_node(node, lambda n: {"spec": {"taints": [t for t in n["spec"].get("taints") or []
                                                         if t["key"] != key]}})


def fake_node(kube):
    return lambda record: sim(kube, record.undo["node"], f"sabotage/{record.undo['node']}/{record.undo['agent_id']}")


def applied_then_undone(ctx, book, raw: dict[str, Any], undo_by_hand: Callable[[Any], None]
                        ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the run's own read-back said after the apply, what the same read-back says once the
    effect was undone by hand); the fault is reverted afterwards whatever happened."""
    (fault,) = plan.plan(ctx, [(raw, "fault")]).faults
    try:
        plan.execute_one(ctx, book, fault)
        record = fault.records[0]
        assert record.state in ("applied", "reverted"), record.error
        first = record.landed
        undo_by_hand(record)
        return first, landed.verify(ctx, fault.module, fault.spec, record.target, record.undo, SOON)
    finally:
        assert revert.revert(ctx, book, fault.records) == []


def on(node: str, kind: str, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "nodes": [node], "ttl_seconds": 120, **fields}


AGENT_KINDS = [
    ("gpu-ecc", {"cards": [2], "params": {"type": "dbe", "count": 4}}),
    ("gpu-xid", {"cards": [2], "params": {"xid": 79}}),
    ("network-bandwidth", {"params": {"rate_mbit": 100}}),
    ("network-loss", {"params": {"percent": 5}}),
    ("network-partition", {}),
    ("network-delay", {"params": {"ms": 50}}),
    ("network-tcp-reset", {"params": {"ports": [29500]}}),
    ("node-kubelet-stop", {}),
]


@pytest.mark.parametrize(("kind", "fields"), AGENT_KINDS, ids=[k for k, _ in AGENT_KINDS])
def test_an_agent_kind_is_confirmed_and_a_mismatch_once_its_fake_node_is_restored(ctx, book, kube, serving, kind,
                                                                                    fields):
    _p, _busy, free = serving
    first, after = applied_then_undone(ctx, book, on(free, kind, **fields), fake_node(kube))
    assert first["status"] == "confirmed", first
    assert after["status"] == "mismatch", after


def test_card_isolate_is_confirmed_by_allocatable_and_a_mismatch_once_allocatable_is_restored(ctx, book, kube,
                                                                                             serving):
    _p, _busy, free = serving
    capacity = int(kube.read_node(free).status.capacity["nvidia.com/gpu"])

    def restore(_record):
        kube.patch_node_status(free, {"status": {"allocatable": {"nvidia.com/gpu": str(capacity)}}})

    first, after = applied_then_undone(ctx, book, on(free, "card-isolate", cards=[5]), restore)
    assert first["status"] == "confirmed" and f"dropped from {capacity} to {capacity - 1}" in first["evidence"], first
    assert after["status"] == "mismatch" and f"still {capacity}" in after["evidence"], after


def test_card_isolate_is_a_mismatch_when_the_fake_node_puts_the_card_back(ctx, book, kube, serving):
    _p, _busy, free = serving
    first, after = applied_then_undone(ctx, book, on(free, "card-isolate", cards=[6]), fake_node(kube))
    assert first["status"] == "confirmed", first
    assert after["status"] == "mismatch", after


@pytest.mark.parametrize(("kind", "taint"), [("node-isolate", ISOLATION_TAINT),
                                             ("node-out-of-service", OUT_OF_SERVICE_TAINT)])
def test_a_node_taint_is_confirmed_and_a_mismatch_once_someone_removes_it(ctx, book, kube, serving, kind, taint):
    _p, _busy, free = serving
    first, after = applied_then_undone(ctx, book, on(free, kind), lambda _r: untaint(kube, free, taint))
    assert first["status"] == "confirmed" and taint in first["evidence"], first
    assert after["status"] == "mismatch", after


def test_a_stalled_rank_is_confirmed_frozen_and_a_mismatch_once_thawed_behind_the_agents_back(ctx, book, kube,
                                                                                            serving):
    p, _busy, _free = serving
    raw = {"kind": "rank-stall", "namespace": p.namespace, "label_selector": f"kilocard.io/model={SMALL}",
           "ttl_seconds": 60}
    first, after = applied_then_undone(ctx, book, raw, fake_node(kube))
    assert first["status"] == "confirmed" and "is frozen" in first["evidence"], first
    assert after["status"] == "mismatch" and "runs" in after["evidence"], after


@pytest.mark.parametrize("kind", ["pod-kill", "tp-group-kill", "rank-kill"])
def test_a_kill_is_confirmed_and_a_pod_left_alive_is_a_mismatch(ctx, book, kube, serving, kind):
    p, _busy, _free = serving
    raw = {"kind": kind, "namespace": p.namespace, "label_selector": f"kilocard.io/model={SMALL}",
           **({"rank": 0} if kind == "rank-kill" else {})}
    (planned,) = plan.plan(ctx, [(raw, "fault")]).faults
    record = planned.records[0]
    # Not executed: the kill did not land (a dropped request, a webhook that swallowed it).
    alive = landed.verify(ctx, planned.module, planned.spec, record.target, record.undo, SOON)
    assert alive["status"] == "mismatch" and "still there" in alive["evidence"], alive
    plan.execute_one(ctx, book, planned)
    assert planned.records[0].landed["status"] == "confirmed", planned.records[0].landed
    wait_ready(kube, p.namespace, SMALL, 1)


FRESH_KILL = """
import json, sys, tempfile
from pathlib import Path
from chaos import ledger, plan
from chaos.agent.client import AgentClient
from chaos.faults import Context
from chaos.kube import Kube

kube = Kube.from_kubeconfig(sys.argv[1])
ctx = Context(kube, AgentClient(kube), "fresh-kill", say=lambda _m: None)
with tempfile.TemporaryDirectory() as d:
    done = plan.inject(ctx, ledger.Ledger(ctx.run_id, kube, Path(d)),
                       {"kind": "pod-kill", "namespace": sys.argv[2], "label_selector": sys.argv[3]})
typed = sorted(m for m in sys.modules if m.startswith("kubernetes.client.api."))
print(json.dumps({"landed": [r.landed for r in done.records], "typed": typed}))
"""


def test_a_fresh_pod_kill_reads_its_pods_back_on_the_bulk_connection_never_the_typed_client(testbed, kube,
                                                                                              serving):
    """The read-back once imported the typed API inside a cold kill's clock (a second) and opened
    a TLS connection per worker thread; it is a stream on the kill's own connection."""
    p, _busy, _free = serving
    out = subprocess.run([sys.executable, "-c", FRESH_KILL, str(testbed.paths.kubeconfig), p.namespace,
                          f"kilocard.io/model={SMALL}"], capture_output=True, text=True, timeout=120, check=True)
    seen = json.loads(out.stdout.splitlines()[-1])
    assert [r["status"] for r in seen["landed"]] == ["confirmed"] and seen["typed"] == [], seen
    wait_ready(kube, p.namespace, SMALL, 1)


FRESH_RUN = """
import json, sys
from chaos import cli
code = cli.main(sys.argv[1:])
typed = sorted(m for m in sys.modules if m.startswith("kubernetes.client.api."))
print(json.dumps({"code": code, "typed": typed}))
"""


def test_a_whole_run_with_a_pod_kill_never_imports_the_typed_client(testbed, kube, serving, tmp_path):
    """Its guards, ledger ConfigMap, follower, kill and probes all speak plain JSON: the typed
    API's module (about a second in a fresh process) is never loaded."""
    p, _busy, _free = serving
    arguments = {"model": SMALL, "namespace": p.namespace}
    placed = {"type": "probe", "name": "placed", "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"},
              "provider": {"type": "python", "module": "probes.chaostoolkit", "func": "placement_holds",
                           "arguments": arguments}}
    experiment = {"title": "t", "description": "d", "steady-state-hypothesis": {"title": "placed", "probes": [placed]},
                  "controls": [{"name": "guards", "provider": {"type": "python", "module": "chaos.guards",
                                                               "arguments": {"min_ready": 0}}}],  # its one replica
                  "method": [{"type": "action", "name": "kill", "provider": {
                      "type": "python", "module": "chaos.actions", "func": "apply_fault", "arguments": {"fault": {
                          "kind": "pod-kill", "namespace": p.namespace,
                          "label_selector": f"kilocard.io/model={SMALL}"}}},
                      # the replacement scheduled before placement is judged again (it was judged
                      # once within 10 ms of the kill: "no scheduled replica to judge")
                      "pauses": {"after": 3}}, placed]}
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump(experiment))
    out = subprocess.run([sys.executable, "-c", FRESH_RUN, "run", str(path), "--kubeconfig", str(testbed.paths.kubeconfig),
                          "--ledger-dir", str(tmp_path / "ledger"), "--journal", str(tmp_path / "j.json"), "--no-report",
                          "-q"], capture_output=True, text=True, timeout=120)
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen == {"code": 0, "typed": []}, (seen, out.stdout, out.stderr)
    assert json.loads((tmp_path / "j.json").read_text())["kilocard"]["faults"][0]["state"] == "reverted"
    wait_ready(kube, p.namespace, SMALL, 1)


def test_a_network_policy_in_place_is_inconclusive_and_a_mismatch_once_deleted(ctx, book, kube, serving):
    p, _busy, _free = serving
    raw = {"kind": "network-policy-partition", "namespace": p.namespace,
           "pod_selector": {"kilocard.io/model": SMALL}, "ttl_seconds": 60}
    first, after = applied_then_undone(ctx, book, raw, lambda r: kube.delete_network_policy(p.namespace,
                                                                                            r.undo["name"]))
    assert first["status"] == "inconclusive" and "CNI" in first["evidence"], first  # no API says it is enforced
    assert after["status"] == "mismatch", after


def test_a_device_taint_rule_is_confirmed_and_a_mismatch_once_deleted(ctx, book, kube, serving):
    _p, _busy, free = serving
    raw = on(free, "dra-card-isolate", cards=[1])
    first, after = applied_then_undone(ctx, book, raw, lambda r: kube.delete_object(
        dra_card_isolation.API_VERSION, "DeviceTaintRule", r.undo["name"]))
    assert first["status"] == "confirmed", first
    assert after["status"] == "mismatch", after


def ecc_run(node: str, **verify: Any) -> dict[str, Any]:
    fault = {"kind": "gpu-ecc", "nodes": [node], "cards": [3], "ttl_seconds": 120,
             "verify": {"within_seconds": 2, **verify}}
    return {"method": [{"type": "action", "name": "ecc", "provider": {
        "type": "python", "module": "chaos.actions", "func": "apply_fault", "arguments": {"fault": fault}}}]}


def test_a_fault_that_never_lands_fails_the_run_unless_the_experiment_allows_it(kube, testbed, serving, tmp_path):
    _p, _busy, free = serving
    sim(kube, free, f"misfire/{free}/ecc")  # the DCGM field is never injected
    code, journal, _ = kilocard_run(testbed, tmp_path / "strict", ecc_run(free))
    assert code == 1 and "did not land" in journal["kilocard"]["reason"], journal["kilocard"]["reason"]
    (fault,) = journal["kilocard"]["faults"]
    assert fault["landed"]["status"] == "mismatch" and fault["state"] == "reverted", fault
    assert journal["kilocard"]["landed"] == {"confirmed": 0, "mismatch": 1, "inconclusive": 0}

    sim(kube, free, f"misfire/{free}/ecc")
    code, journal, _ = kilocard_run(testbed, tmp_path / "allowed", ecc_run(free, allow_mismatch=True))
    (fault,) = journal["kilocard"]["faults"]
    assert fault["landed"]["status"] == "mismatch" and fault["state"] == "reverted"  # allowed: applied, then said
    # ... but with no probe that saw its effect, nothing shows the fault happened: not a pass either.
    assert code == 1 and journal["kilocard"]["basis"] == "unknown", journal["kilocard"]["reason"]
    assert journal["kilocard"]["reason"].startswith("1 of 1 fault(s) not confirmed landed (mismatch: ")

    code, journal, _ = kilocard_run(testbed, tmp_path / "landing", ecc_run(free))
    assert code == 0 and journal["kilocard"]["landed"]["confirmed"] == 1, json.dumps(journal["kilocard"])[:2000]
