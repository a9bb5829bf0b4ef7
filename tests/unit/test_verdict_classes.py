"""The classes of wrong verdicts issue 26 named, one test each (or a few): each failed on the code
before the fix, and each would fail again if its class came back. The oracle property tests
(tests/unit/test_verdict_oracles.py) cover the same ground on generated timelines; these are the
cases a person reads."""

from __future__ import annotations

import threading
import time

import pytest

from chaos import judgement, stop
from chaos.errors import Exit
from probes import hung, remediation, slo, tp_groups
from probes.hung import Figures, Progress
from probes.slo import Recovery, Sample
from probes.snapshot import ClusterSnapshot, NodeView, PodView

T0 = 1_000_000.0
NODES = (NodeView("n0", {"kubernetes.io/hostname": "n0"}, cards_capacity=8, cards_allocatable=8),
         NodeView("n1", {"kubernetes.io/hostname": "n1"}, cards_capacity=8, cards_allocatable=8))


def pod(name, node="n0", ready=True, model="m", group=None, rank=0, ready_since=None, **labels):
    return PodView("ns", name, f"uid-{name}", node, model, ready, False, 8, group or f"ns/{name}", rank,
                   {"kilocard.io/model": model, **labels}, ready_since=ready_since)


def series(points, start=0.0, step=1.0):
    return [Sample(T0 + start + i * step, p or {}) for i, p in enumerate(points)]


class FakeKube:
    """Just enough of chaos.kube.Kube for a probe with no follower: one list of pods and nodes, and a
    watch that says nothing more."""

    def __init__(self, pods, nodes):
        self.pods, self.nodes = pods, nodes

        class _Cfg:
            host = "https://fake:6443"

        class _Api:
            configuration = _Cfg()

        self.api_client = _Api()

    def batch(self, fn, items):
        return [fn(i) for i in items]

    def list_pods_raw(self, *args, **kwargs):
        return self.pods

    def list_nodes_raw(self, *args, **kwargs):
        return self.nodes

    def events(self, *args, until=None, **kwargs):
        yield "SYNC", self.pods
        while until is not None and time.monotonic() < until:
            time.sleep(0.05)

    def list_raw(self, what, path, *args, **kwargs):
        return []  # no Deployment or StatefulSet: bare pods


def raw_pod(name, node="n0", ready=True, model="m"):
    return {"metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}", "labels": {"kilocard.io/model": model},
                         "resourceVersion": "1"},
            "spec": {"nodeName": node, "containers": [{"resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                                           "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def raw_node(name, unschedulable=False, taints=()):
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}, "resourceVersion": "1"},
            "spec": {"unschedulable": unschedulable, "taints": list(taints)},
            "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


# --- 1. a budget overrun passes ---------------------------------------------------------------------------
def test_1_a_recovery_probe_that_starts_after_its_budget_does_not_pass_on_the_present_state():
    kube = FakeKube([raw_pod("a"), raw_pod("b", node="n1")], [raw_node("n0"), raw_node("n1")])
    v = tp_groups.recovered_within(kube, "m", set(), time.time() - 35.2, 10, "ns", "nvidia.com/gpu")
    assert not v.ok, v.reason  # was: ok, "m: 2 TP groups whole and Ready ... 35.2 s after the fault (budget 10 s)"
    assert v.details["outcome"] == "unknown" and "after its budget" in v.reason, v.reason


def test_1_remediation_counts_its_budget_from_the_fault_not_from_the_probe():
    taint = {"key": "kilocard.io/quarantined", "value": "ecc", "effect": "NoSchedule"}
    kube = FakeKube([raw_pod("b", node="n1")], [raw_node("n0", unschedulable=True, taints=[taint]), raw_node("n1")])
    v = remediation.within(kube, "n0", ("m",), 10, "ns", "nvidia.com/gpu", fault_at=time.time() - 35.2)
    assert not v.ok, v.reason  # was: a pass "after 0.0 s (budget 10 s)", the 35 s before the probe free


# --- 2. "holds" stops looking early ------------------------------------------------------------------------
def test_2_a_hold_covers_the_whole_interval_a_late_breach_fails_it():
    steady = Recovery(threshold=0.5, budget=60, hold=10, blind=6, expect_impact=False)
    late = series([{"a": 0.2}] * 22 + [{"a": 2.0}] * 39)  # healthy to 21 s, then over to the deadline
    v = slo.judge(late, T0, steady, final=True)
    assert not v.ok, v.reason  # was: ok, "breached 22.0 s after the fault, back under 0.5 after 11.0 s ..."
    assert v.details["breach_after"] == 22.0 and "never back under" in v.reason, v.reason


def test_2_a_recovery_that_relapses_before_the_deadline_fails():
    ecc = Recovery(threshold=0.5, budget=60, hold=10, blind=6, expect_impact=True)
    relapse = series([{"a": 0.2}] * 5 + [{"a": 0.9}] * 10 + [{"a": 0.2}] * 20 + [{"a": 0.9}] * 26)
    v = slo.judge(relapse, T0, ecc, final=True)
    assert not v.ok and v.details["outcome"] == "not_recovered", v.reason


# --- 3. silence reads as health ----------------------------------------------------------------------------
def test_3_a_replica_that_goes_silent_does_not_leave_the_worst_of_the_rest_to_judge():
    steady = Recovery(threshold=0.5, budget=60, hold=10, blind=6, expect_impact=False)
    silent = series([{"a": 0.2, "b": 0.2}] * 5 + [{"a": 0.3}] * 56)  # b stops completing requests (NaN)
    v = slo.judge(silent, T0, steady, final=True)
    assert not v.ok and v.details["outcome"] == "unknown" and "b" in v.reason, v.reason  # was: ok, "held"


def test_3_a_silent_replica_whose_pod_is_ready_is_not_healthy_one_whose_pod_is_gone_is_dropped():
    steady = Recovery(threshold=0.5, budget=60, hold=10, blind=6, expect_impact=False)
    ready = [Sample(s.at, s.values, pods={"a": True, "b": True}) for s in series([{"a": 0.2, "b": 0.2}] * 61)]
    silent = ready[:5] + [Sample(s.at, {"a": 0.3}, pods={"a": True, "b": True}) for s in ready[5:]]
    assert not slo.judge(silent, T0, steady, final=True).ok
    drained = ready[:5] + [Sample(s.at, {"a": 0.3}, pods={"a": True}) for s in ready[5:]]  # b deleted
    assert slo.judge(drained, T0, steady, final=True).ok


def test_3_a_sick_replica_that_dies_outright_is_not_a_recovery():
    ecc = Recovery(threshold=0.5, budget=60, hold=10, blind=6, expect_impact=True)
    points = [{"a": 0.2, "b": 0.2}] * 5 + [{"a": 0.2, "b": 2.0}] * 10 + [{"a": 0.2}] * 46
    pods = [{"a": True, "b": True}] * 15 + [{"a": True, "b": False}] * 46  # b NotReady, not deleted
    dead = [Sample(T0 + i, p, pods=r) for i, (p, r) in enumerate(zip(points, pods, strict=True))]
    v = slo.judge(dead, T0, ecc, final=True)
    assert not v.ok and v.details["outcome"] == "not_recovered", v.reason


def test_3_a_replica_ready_at_time_zero_that_had_no_series_yet_is_not_left_out():
    """Found on the real LeaderWorkerSet controller: the group a previous kill recreated was Ready
    but had served no rate window when the next fault took it down for 40 s; never seen, its
    outage was read as "held"."""
    steady = dict(threshold=0.5, budget=90, hold=10, blind=6, expect_impact=False)
    pods = [{"a": True, "b": True}] * 5 + [{"a": True, "b": False}] * 40 + [{"a": True, "b": True}] * 46
    points = [{"a": 0.2}] * 60 + [{"a": 0.2, "b": 0.3}] * 31  # b's first series 15 s after it is back
    outage = [Sample(T0 - 5 + i, p, pods=r) for i, (p, r) in enumerate(zip(points, pods, strict=True))]
    v = slo.judge(outage, T0, Recovery(**steady, expected=frozenset({"b"})), final=True)
    assert v.ok and v.details["outcome"] == "recovered" and v.details["recovered_after_seconds"] >= 55, v.details
    unseen = slo.judge(outage, T0, Recovery(**steady), final=True)
    assert unseen.details["outcome"] == "held"  # what the probe said before it asked who was Ready at zero


def test_3_a_replacement_under_a_new_name_that_serves_nothing_is_not_health():
    """A Deployment's replacement pod has a name no series had: once Ready a rate window and a
    scrape (the sample's `expected`), its silence is judged like any known replica's, not left to
    the survivor."""
    ecc = Recovery(threshold=0.5, budget=60, hold=10, blind=6, expect_impact=True)
    pods = [{"a": True, "b": True}] * 5 + [{"a": True}] * 5 + [{"a": True, "c": False}] * 10 + \
        [{"a": True, "c": True}] * 41  # b killed, its replacement c Ready from 20 s
    points = [{"a": 0.2, "b": 0.2}] * 5 + [{"a": 0.9}] * 5 + [{"a": 0.2}] * 51  # c never serves
    silent = [Sample(T0 + i, p, pods=r, expected=frozenset({"c"}) if i >= 32 else frozenset())
              for i, (p, r) in enumerate(zip(points, pods, strict=True))]
    v = slo.judge(silent, T0, ecc, final=True)
    assert not v.ok and v.details["outcome"] == "not_recovered" and "c Ready with no series" in v.reason, v.reason
    unknown_then = slo.judge([Sample(x.at, x.values, pods=x.pods) for x in silent], T0, ecc, final=True)
    assert unknown_then.details["outcome"] == "recovered"  # what it said before: the survivor spoke for c


def test_3_slo_under_and_the_stop_condition_see_a_silent_ready_replica():
    class Prom:
        def custom_query(self, query):
            return [{"metric": {"pod": "a"}, "value": [T0, "0.2"]}]

    ind = slo.Indicator("m", "q", "10s", by="pod")
    v = slo.under(Prom(), ind, 0.5, expected={"a", "b"})
    assert not v.ok and v.details["outcome"] == "unknown" and "b" in v.reason, v.reason
    c = stop.Condition("slo", "m", "ns", limit=5.0, window="10s")
    both = ClusterSnapshot((pod("a", ready_since=0.0), pod("b", node="n1", ready_since=0.0)), NODES)
    reason = stop.breach(c, both, {"a": 0.2})
    assert reason is not None and "b" in reason and stop.BLIND in reason, reason
    gone = ClusterSnapshot((pod("a", ready_since=0.0),), NODES)
    assert stop.breach(c, gone, {"a": 0.2}) is None


# --- 4. absence reads as impact ----------------------------------------------------------------------------
def test_4_a_scrape_gap_after_the_fault_is_not_a_breach_then_a_recovery():
    ecc = Recovery(threshold=0.5, budget=60, hold=10, blind=6, expect_impact=True)
    gap = series([None] * 12 + [{"a": 0.2, "b": 0.2}] * 49)
    v = slo.judge(gap, T0, ecc, final=True)
    assert not v.ok and v.details["outcome"] == "unknown", v.reason  # was: ok, "recovered"


def test_4_absence_with_corroboration_is_impact():
    ecc = Recovery(threshold=0.5, budget=60, hold=10, blind=6, expect_impact=True)
    gone = [Sample(T0 + i, {}, pods={"a": False, "b": False}) for i in range(12)]
    back = [Sample(T0 + 12 + i, {"a": 0.2, "b": 0.2}, pods={"a": True, "b": True}) for i in range(49)]
    v = slo.judge(gone + back, T0, ecc, final=True)
    assert v.ok and v.details["outcome"] == "recovered" and v.details["breach_after"] == 0.0, v.reason


# --- 5. a crash meets an expected failure ------------------------------------------------------------------
def journal(*runs):
    return {"status": "completed", "deviated": False, "run": list(runs),
            "steady_states": {"before": {"steady_state_met": True, "probes": []},
                              "after": {"steady_state_met": True, "probes": []}}}


def test_5_a_probe_that_raised_never_meets_an_expected_failure():
    crashed = {"activity": {"name": "replicas-kept-apart", "type": "probe",
                            "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"}},
               "status": "failed", "output": None,
               "exception": ["Traceback ...\n", "chaos.errors.KubeError: list nodes: 403 forbidden\n"]}
    expect = judgement.Expectation(Exit.FAILED, "probe 'replicas-kept-apart' failed: ")
    code, reason = judgement.judged(expect, *judgement.verdict(journal(crashed)))
    assert code == Exit.FAILED and "raised" in reason, reason  # was: exit 0, "as expected (failed): ..."


# --- 6. a method probe without a tolerance is ignored ------------------------------------------------------
def test_6_a_kilocard_probes_failed_verdict_fails_the_run_without_a_tolerance():
    untolerated = {"activity": {"name": "apart", "type": "probe",
                                "provider": {"type": "python", "module": "probes.chaostoolkit",
                                             "func": "placement_holds"}},
                   "status": "succeeded", "output": {"verdict": "failed", "ok": False, "reason": "4 of 4 on n0"}}
    code, reason = judgement.verdict(journal(untolerated))[:2]
    assert code == Exit.FAILED and reason == "probe 'apart' failed: 4 of 4 on n0", reason  # was: passed


# --- 7. a group with no Ready pod is "whole" ---------------------------------------------------------------
@pytest.mark.parametrize("members", [
    (pod("r-0", ready=False),),  # a TP=8 replica NotReady
    (pod("g-0", ready=False, group="ns/g", **{"kilocard.io/group-size": "2"}),
     pod("g-1", ready=False, group="ns/g", rank=1, **{"kilocard.io/group-size": "2"})),  # TP=16, both NotReady
    (pod("p-0", node=None, ready=False),),  # Pending: not even scheduled
])
def test_7_a_group_is_whole_only_when_every_member_exists_is_scheduled_and_ready(members):
    v = tp_groups.check(ClusterSnapshot(members, NODES), "m", "ns")
    assert not v.ok, v.reason  # was: ok, "m: 1 TP groups whole, ..."


# --- 8. a fault from another driver cannot be judged, or is timed from the wrong disruption -----------
def test_8_time_zero_is_the_end_of_another_drivers_action_before_the_probe(tmp_path):
    from chaos import timezero
    from probes import chaostoolkit

    cfg = {"kilocard_run_id": "run-8", "kilocard_ledger_dir": str(tmp_path)}
    timezero.acted("run-8", "terminate-pods", "chaosk8s.pod.actions", T0 - 5, T0)
    at, source = chaostoolkit.time_zero(cfg, None, since=None)
    assert (at, source) == (T0, "the end of action 'terminate-pods' (chaosk8s.pod.actions)")
    assert chaostoolkit.time_zero(cfg, None, since=T0 + 7)[0] == T0  # the journal before an explicit since
    assert chaostoolkit.time_zero({"kilocard_run_id": "none", "kilocard_ledger_dir": str(tmp_path)}, None,
                                  since=T0 + 7) == (T0 + 7, "since")


def fault(kind: str, at: float, node: str = "n1"):
    from chaos import ledger

    return ledger.Record(run_id="r", fault_id=kind, kind=kind, target={"node": node, "namespace": "ns", "name": kind},
                         expires_at="", applied_at=at)


def test_8_a_kilocard_fault_after_another_drivers_kill_does_not_restart_the_kills_recovery_clock(tmp_path):
    """chaostoolkit-kubernetes kills a replica, kilocard faults another model 20 s later: the budget
    of the kill's recovery ran from the kilocard fault (passing a replacement 24 s late as 4.3 s)."""
    from chaos import timezero
    from probes import chaostoolkit

    cfg = {"kilocard_run_id": "run-8b", "kilocard_ledger_dir": str(tmp_path)}
    timezero.acted("run-8b", "terminate-pods", "chaosk8s.pod.actions", T0 - 0.2, T0)
    later = [fault("gpu-ecc", T0 + 20)]
    assert chaostoolkit.time_zero(cfg, None, first=True, faults=later) == (
        T0, "the end of action 'terminate-pods' (chaosk8s.pod.actions), the run's first disruption")
    # The mirror: a probe timed from the run's last disruption, a kilocard fault then another driver's kill.
    timezero.acted("run-8c", "terminate-pods", "chaosk8s.pod.actions", T0 + 19.8, T0 + 20)
    cfg["kilocard_run_id"] = "run-8c"
    assert chaostoolkit.time_zero(cfg, None, faults=[fault("gpu-ecc", T0)]) == (
        T0 + 20, "the end of action 'terminate-pods' (chaosk8s.pod.actions), the run's last disruption")
    # kilocard's own actions are in its ledger: an action of chaos.actions is not a disruption of its own.
    timezero.acted("run-8d", "heal", "chaos.actions", T0 + 30, T0 + 31)
    cfg["kilocard_run_id"] = "run-8d"
    assert chaostoolkit.time_zero(cfg, None, faults=[fault("gpu-ecc", T0)]) == (
        T0, "the run's last fault (gpu-ecc on ns/gpu-ecc)")


# --- 9. a fault that did not land gives a green run --------------------------------------------------------
def test_9_an_unconfirmed_landing_that_no_probe_saw_the_effect_of_fails_the_run():
    held = {"activity": {"name": "tp16-holds", "type": "probe"}, "status": "succeeded",
            "output": {"verdict": "ok", "ok": True, "reason": "held", "outcome": "held", "impact_seen": False}}
    landed = [{"status": "inconclusive", "evidence": "gpu-ecc has no read-back"}]
    why = judgement.unseen(landed, journal(held))
    assert why is not None and "inconclusive" in why and "no probe saw" in why, why
    saw = {**held, "output": {**held["output"], "outcome": "recovered", "impact_seen": True}}
    assert judgement.unseen(landed, journal(saw)) is None
    assert judgement.unseen([{"status": "confirmed", "evidence": "qdisc tbf"}], journal(held)) is None


# --- 10. the smaller ones ----------------------------------------------------------------------------------
def test_10_the_error_ratio_resolves_its_failures_counter():
    class Prom:  # stores the gateway's total, and no failures counter by that name at all
        def custom_query(self, query):
            return [{"metric": {}, "value": [T0, "4"]}] if "kilocard_sim_requests_total" in query else []

    with pytest.raises(slo.SloError, match="kilocard_sim_requests_failed_typo"):
        slo.indicator(Prom(), "error_ratio", "m", "ns", "10s", failed_metric="kilocard_sim_requests_failed_typo")


def test_10_a_frozen_engine_whose_waiting_gauge_froze_at_zero_is_hung_when_requests_are_running():
    pods = (pod("g0", ready_since=T0 - 600), pod("g1", node="n1", ready_since=T0 - 600))
    figures = Figures(T0, {("ns", "g0"): Progress(0, 0, 0, running=3), ("ns", "g1"): Progress(150, 0, 0, running=2)})
    v = hung.judge(ClusterSnapshot(pods, NODES), figures, "m")
    assert not v.ok and v.details["outcome"] == "hung" and "g0" in v.reason, v.reason


def test_10_the_stop_watcher_fires_on_any_exception_instead_of_dying():
    fired = threading.Event()
    watcher = stop.Watcher({}, stop.Settings(0.2, (stop.Condition("zero-ready", "m"),)), fire=fired.set)

    def broken():
        raise TypeError("'NoneType' object is not subscriptable")

    watcher.check = broken  # a bug in a condition: the run must not go on unguarded
    watcher.start()
    try:
        assert fired.wait(5), "the watcher died silently"
    finally:
        watcher.stop()
    assert watcher.fired is not None and stop.BLIND in watcher.fired["reason"]
    assert "TypeError" in watcher.fired["reason"]
