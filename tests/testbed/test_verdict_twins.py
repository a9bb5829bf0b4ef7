"""Negative twins of the verdicts, through `kilocard run` on the testbed: each changes one cause
from a catalog experiment and asserts the reason the verdict gives (docs/verdicts.md). A probe
reached after its budget judges the run's record, not the present; a "holds" watches its whole
interval; another Chaos Toolkit driver's fault is judged like kilocard's own."""

from __future__ import annotations

import copy
import time
import uuid

import pytest

from chaos import ledger, plan, revert
from chaos.agent.client import AgentClient
from chaos.faults import Context
from probes import chaostoolkit
from testbed import timing
from tests.testbed.helpers import deploy, first_fault, wait_ready
from tests.testbed.test_catalog import BIG, TP8, experiment, probe
from tests.testbed.test_runner import kilocard_run

pytestmark = pytest.mark.testbed


def probe_of(name: str, func: str, **arguments) -> dict:
    return {"type": "probe", "name": name, "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"},
            "provider": {"type": "python", "module": "probes.chaostoolkit", "func": func, "arguments": arguments}}


@pytest.mark.long(65)
def test_a_recovery_probe_reached_after_its_budget_judges_the_record_not_the_present(testbed, tmp_path, two_tp8):
    """S1, its probes reached 35 s after the kill: the model is whole by then either way, but only
    the budget the recovery (about 25 s) fitted in passes, and it says when the recovery was."""
    p = two_tp8
    late = experiment("s1-kill-one-replica.yaml")
    kill = copy.deepcopy(late["method"][0])
    kill["pauses"] = {"after": 35}
    late["method"] = [kill,
                      probe_of("recovered-within-60", "tp_groups_recovered_within", model=TP8, budget=60,
                               namespace=p.namespace),
                      probe_of("recovered-within-20", "tp_groups_recovered_within", model=TP8, budget=20,
                               namespace=p.namespace)]
    code, journal, _ = kilocard_run(testbed, tmp_path, late, "--var", f"namespace={p.namespace}")
    within = probe(journal, "recovered-within-60")
    assert within["verdict"] == "ok" and 20 < within["recovered_after_seconds"] < 35, within["reason"]  # from the record
    assert within["impact_seen"] and within["observed_from"] < 1.0  # the record covers the interval from its start
    assert code == 1
    reason = journal["kilocard"]["reason"]
    assert reason.startswith(f"probe 'recovered-within-20' failed: 20 s after {first_fault(journal)}: "
                             f"{TP8}: "), reason
    assert "not Ready (0/1)" in reason, reason


@pytest.mark.long(60)
def test_a_hold_that_breaks_late_in_its_interval_fails(testbed, tmp_path, two_tp8):
    """S1 with a second fault 25 s in (a card of the other replica slows): its TTFT probe, which
    held through the blind window and its first ten seconds, must see the breach at the end of its
    interval and fail, naming it."""
    p = two_tp8
    twin = experiment("s1-kill-one-replica.yaml")
    second = {"type": "action", "name": "a-card-slows-later", "background": True, "pauses": {"before": 25},
              "provider": {"type": "python", "module": "chaos.actions", "func": "apply_fault", "arguments": {
                  "fault": {"kind": "gpu-ecc", "nodes_of": {"namespace": "${namespace}",
                                                            "label_selector": "kilocard.io/model=${model}"},
                            "count": 1, "card": 3, "params": {"type": "dbe", "speed": 0.5}, "ttl_seconds": 300}}}}
    ttft = next(a for a in twin["method"] if a["name"] == "ttft-holds-or-recovers")
    twin["method"] = [twin["method"][0], second, ttft]
    code, journal, _ = kilocard_run(testbed, tmp_path, twin, "--var", f"namespace={p.namespace}")
    assert code == 1
    held = probe(journal, "ttft-holds-or-recovers")
    assert held["outcome"] == "not_recovered" and held["breach_after"] > held["blind_until"] + held["hold"], held
    assert journal["kilocard"]["reason"].startswith("probe 'ttft-holds-or-recovers' failed: not recovered within "
                                                    "40 s"), journal["kilocard"]["reason"]


@pytest.mark.long(75)
def test_a_remediation_probe_reached_after_its_budget_judges_from_the_fault(testbed, tmp_path, two_tp8):
    """S3, its probes reached 45 s after the ECC fault: the quarantine and drain (about 12 s on
    the testbed; 35 s once under a loaded CI, hence the wide pause: the remediation must be over
    before the probes look) fit in the catalog's 90 s, not in 5 s; counted from the probe's start,
    both would pass."""
    p = two_tp8
    late = experiment("s3-ecc-one-tp-member.yaml")
    fault = copy.deepcopy(late["method"][0])
    fault["pauses"] = {"after": 45}
    late["method"] = [fault,
                      probe_of("remediated-within-90", "remediated_within", models=[TP8], budget=90,
                               namespace=p.namespace),
                      probe_of("remediated-within-5", "remediated_within", models=[TP8], budget=5,
                               namespace=p.namespace)]
    code, journal, _ = kilocard_run(testbed, tmp_path, late, "--var", f"namespace={p.namespace}")
    within = probe(journal, "remediated-within-90")
    assert within["verdict"] == "ok" and 5 < within["recovered_after_seconds"] < 45, within["reason"]  # from the record
    assert code == 1
    (ecc,) = journal["kilocard"]["faults"]
    assert journal["kilocard"]["reason"].startswith(
        f"probe 'remediated-within-5' failed: 5 s after {first_fault(journal)}: "), (
        journal["kilocard"]["reason"])


@pytest.mark.long(60)
def test_s2_with_no_room_left_turns_its_recovery_probe_red(kube, pool, prom, testbed, tmp_path):
    """S2 on a two-node pool (each node full with a replica): the drained card's replica has
    nowhere to go. The room guard is lifted so the run goes on: the recovery probe, not the guard,
    is what fails, naming the replica left Pending."""
    tight = pool(2)
    deploy(kube, tight, {TP8: 2})
    twin = experiment("s2-isolate-one-card.yaml")
    twin["controls"] = [{"name": "guards", "provider": {"type": "python", "module": "chaos.guards",
                                                        "arguments": {"room": False}}}]
    # The budget shortened to 30 s: it is not the cause (with no room, no budget is long enough).
    code, journal, _ = kilocard_run(testbed, tmp_path, twin, "--var", f"namespace={tight.namespace}",
                                    "--var", "budget_seconds:int=30")
    assert code == 1
    reason = journal["kilocard"]["reason"]
    assert reason.startswith(f"probe 'replica-moved-within-budget' failed: 30 s after {first_fault(journal)}: "
                             f"{TP8}: "), reason
    assert "not scheduled" in reason, reason
    moved = probe(journal, "replica-moved-within-budget")
    assert moved["judgement"] == "failed" and moved["impact_seen"]


@pytest.mark.long(85)
def test_s6_without_a_throttle_that_bites_is_no_impact_not_a_pass(kube, pool, prom, testbed, tmp_path):
    """S6 with a bandwidth limit no link reaches (100 Gbit/s): the TP=16 probe, which needs the
    fault to show, says no impact observed."""
    p = pool(6)
    deploy(kube, p, {BIG: 4, TP8: 2})  # as S6 runs in the catalog: two TP=16 groups, two TP=8 replicas
    code, journal, _ = kilocard_run(testbed, tmp_path, experiment("s6-tp16-vs-tp8-network.yaml"),
                                    "--var", f"namespace={p.namespace}", "--var", "rate_mbit:int=100000")
    assert code == 1
    tp16 = probe(journal, "tp16-ttft-breached-then-recovered")
    assert tp16["outcome"] == "no_impact" and not tp16["impact_seen"], tp16["reason"]
    assert journal["kilocard"]["reason"].startswith("probe 'tp16-ttft-breached-then-recovered' failed: no impact "
                                                    "observed"), journal["kilocard"]["reason"]


def chaosk8s_kill(namespace: str, budget: int) -> dict:
    """S1's kill by chaostoolkit-kubernetes' terminate_pods, judged by kilocard's recovery probe."""
    return {"configuration": {"namespace": namespace},
            "method": [{"type": "action", "name": "terminate-one-replica", "provider": {
                "type": "python", "module": "chaosk8s.pod.actions", "func": "terminate_pods",
                "arguments": {"label_selector": f"kilocard.io/model={TP8}", "ns": namespace, "qty": 1,
                              "rand": True}}},
                       probe_of("replaced-within-budget", "tp_groups_recovered_within", model=TP8, budget=budget,
                                namespace=namespace)]}


@pytest.mark.long(75)
def test_a_kill_by_chaostoolkit_kubernetes_is_judged_by_kilocards_recovery_probe(kube, testbed, tmp_path, two_tp8):
    p = two_tp8
    env = {"KUBECONFIG": str(testbed.paths.kubeconfig)}  # how chaostoolkit-kubernetes finds the cluster
    code, journal, _ = kilocard_run(testbed, tmp_path / "within", chaosk8s_kill(p.namespace, 60), env=env)
    assert code == 0, journal["kilocard"]["reason"]
    (killed,) = journal["run"][0]["output"]
    replaced = probe(journal, "replaced-within-budget")
    assert replaced["impact_seen"] and 20 < replaced["recovered_after_seconds"] < 60, replaced["reason"]
    assert "after the end of action 'terminate-one-replica' (chaosk8s.pod.actions)" in replaced["reason"]
    assert journal["kilocard"]["faults"] == []  # nothing in kilocard's ledger: the other driver's fault
    assert killed not in {x.metadata.name for x in wait_ready(kube, p.namespace, TP8, 2, timeout=90)}
    # A budget shorter than the replacement's start-up (its timing's, which no replacement beats:
    # one measured run, less a margin, is not, on a busy machine): the same probe fails.
    deployment = next(o for o in p.fleet(TP8) if o["kind"] == "Deployment")
    short = int(timing.ready_after(deployment["spec"]["template"]["metadata"]["labels"], "default")) - 5
    code, journal, _ = kilocard_run(testbed, tmp_path / "short", chaosk8s_kill(p.namespace, short), env=env)
    assert code == 1
    reason = journal["kilocard"]["reason"]
    assert reason.startswith(f"probe 'replaced-within-budget' failed: {short} s after the end of action "
                             "'terminate-one-replica' (chaosk8s.pod.actions): "), reason
    assert journal["kilocard"]["basis"] == "judged"


@pytest.mark.long(100)
def test_a_replacement_that_never_serves_is_not_read_as_healthy(kube, testbed, tmp_path, two_tp8):
    """A killed llama-3-70b replica's replacement is frozen before it is Ready (rank-stall): Ready,
    it never exports a series under its new name. Its survivor alone used to say "held"; once the
    replacement has been Ready a rate window and a scrape, its silence is not health."""
    p = two_tp8
    run_id = f"t-{uuid.uuid4().hex[:8]}"
    cfg = {"kilocard_kubeconfig": str(testbed.paths.kubeconfig), "kilocard_prometheus_url": testbed.prometheus_url,
           "kilocard_run_id": run_id, "kilocard_ledger_dir": str(tmp_path / "ledger")}
    ctx = Context(kube, AgentClient(kube), run_id, say=lambda _m: None)
    book = ledger.Ledger(run_id, kube, tmp_path / "ledger")
    before = {x["metadata"]["uid"] for x in kube.list_pods_raw(p.namespace)}
    killed = plan.inject(ctx, book, {"kind": "pod-kill", "namespace": p.namespace, "count": 1,
                                     "label_selector": f"kilocard.io/model={TP8}"})
    zero = killed.records[0].applied_at

    def running_replacement() -> dict | None:
        return next((x for x in kube.list_pods_raw(p.namespace) if x["metadata"]["uid"] not in before
                     and any("running" in (c.get("state") or {}) for c in x["status"].get("containerStatuses") or [])),
                    None)

    deadline = time.monotonic() + 30
    while (new := running_replacement()) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert new is not None and not any(c["type"] == "Ready" and c["status"] == "True"
                                       for c in new["status"].get("conditions") or []), new
    kube.core.patch_namespaced_pod(new["metadata"]["name"], p.namespace, {"metadata": {"labels": {"twin": "silent"}}})
    stalled = plan.inject(ctx, book, {"kind": "rank-stall", "namespace": p.namespace, "label_selector": "twin=silent",
                                      "ttl_seconds": 120})
    try:
        assert stalled.records[0].landed["status"] == "confirmed", stalled.records[0].landed
        held = chaostoolkit.slo_recovered_within(TP8, budget=60, expect_impact=False, namespace=p.namespace,
                                                 window="10s", fault_at=zero, configuration=cfg)
    finally:
        assert revert.revert(ctx, book, stalled.records) == []
    silent = f"{new['metadata']['name']} Ready with no series"
    assert held["verdict"] != "ok" and held["outcome"] == "unknown" and silent in held["reason"], held["reason"]
    wait_ready(kube, p.namespace, TP8, 2)


@pytest.mark.long(90)
def test_a_steady_state_not_met_is_looked_at_again_while_its_model_starts_and_judged_at_once_after(
        kube, testbed, tmp_path, two_tp8):
    """The settle rule (chaos.settle.before) and its negative twin, one cause changed: how long the
    model has served. S1 with a threshold nothing meets (P95 TTFT under 1 ms), a replica just made
    anew: the run looks again while it is younger than kilocard_settle_seconds (30 s), then fails
    saying it waited and for what. The same run once the model has served that long fails at its
    first look: a breached SLO on a settled fleet is not waited for."""
    p = two_tp8
    (victim, _) = [pod.metadata.name for pod in wait_ready(kube, p.namespace, TP8, 2)]
    kube.delete_pod(p.namespace, victim)
    kube.wait_until("pods", lambda pods: victim not in {x.metadata.name for x in pods} and len(pods) == 2 and all(
        c.type == "Ready" and c.status == "True" for x in pods for c in x.status.conditions or [] if c.type == "Ready"),
        timeout=90, namespace=p.namespace, label_selector=f"kilocard.io/model={TP8}")
    unmet = ["--var", f"namespace={p.namespace}", "--var", "ttft_threshold=0.001", "--var", "kilocard_settle_seconds=30"]
    code, journal, _ = kilocard_run(testbed, tmp_path / "young", experiment("s1-kill-one-replica.yaml"), *unmet)
    k = journal["kilocard"]
    assert code == 1 and k["reason"].startswith("steady state not met before the method: ttft-under-threshold: "), k
    assert f"waited {k['settle']['waited_seconds']:.0f} s for the fleet to settle ({TP8}: " in k["reason"], k["reason"]
    assert k["settle"]["looks"] > 2 and not k["settle"]["met"] and 20 <= k["settle"]["waited_seconds"] <= 32, k["settle"]
    code, journal, seconds = kilocard_run(testbed, tmp_path / "settled", experiment("s1-kill-one-replica.yaml"), *unmet)
    k = journal["kilocard"]
    assert code == 1 and k["reason"].startswith("steady state not met before the method: ttft-under-threshold: "), k
    assert "waited" not in k["reason"] and k["settle"]["looks"] == 1 and k["settle"]["starting"] == [], k
    assert seconds < 20, seconds  # judged at once, not after the settle window
