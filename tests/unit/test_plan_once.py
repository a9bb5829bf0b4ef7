"""A run meets each fault several times (checked before it starts, planned, applied by its action):
it is parsed once; and the guards' control judges the very plan an action executes, never one it
made again (chaos.plan's judges)."""

import collections
import copy

import pytest
from chaoslib.exceptions import InterruptExecution

from chaos import guards, judgement, plan
from chaos.errors import Exit, SpecError
from chaos.faults import Context

KILL = {"kind": "pod-kill", "namespace": "ns", "label_selector": "app=m", "count": 2, "seed": 1}


class Pods:
    """Three live pods, listed as the API lists them."""

    def list_pods_raw(self, namespace, label_selector, field_selector):
        return [{"metadata": {"namespace": "ns", "name": f"p{i}", "uid": f"u{i}"}, "spec": {"nodeName": "n"},
                 "status": {"phase": "Running"}} for i in range(3)]

    def batch(self, fn, items):
        return [fn(x) for x in items]


def test_a_fault_is_parsed_once_however_often_a_run_meets_it(monkeypatch):
    # A fresh process's memory of parses: this test may run twice in one process (mutmut's runs).
    monkeypatch.setattr(plan, "_parsed", {})
    monkeypatch.setattr(plan, "PARSED", collections.Counter())
    first = plan.parse_one(copy.deepcopy(KILL), "e.yaml: method[0] ('kill'): fault")
    reordered = dict(reversed(list(KILL.items())))
    for where in ("fault", "activity 'kill'", "e.yaml: method[0]"):
        assert plan.parse_one(copy.deepcopy(reordered), where) is first  # the same frozen spec
    assert plan.parses(KILL) == plan.parses(reordered) == 1
    other = {**KILL, "count": 3}
    assert plan.parses(other) == 0
    plan.parse_one(other, "fault")  # another fault is another parse
    assert plan.parses(other) == 1 and plan.parses(KILL) == 1
    for _ in range(2):  # a bad fault is never kept: each meeting says its error
        with pytest.raises(SpecError, match="fault.count: expected an integer from 1 to 100000, got 0"):
            plan.parse_one({**KILL, "count": 0}, "fault")


def test_the_runs_judges_see_the_plan_exactly_as_it_will_execute_and_may_refuse_it():
    ctx = Context(Pods(), None, "run-judged", say=lambda _m: None)
    seen = []

    def judge(_ctx, planned):
        seen.append(planned)

    plan.judge_with("run-judged", judge)
    try:
        planned = plan.plan(ctx, [(KILL, "fault")])
        assert seen == [planned]  # the object returned, not a plan made again
        assert plan.plan(Context(Pods(), None, "another-run", say=lambda _m: None), [(KILL, "fault")])
        assert len(seen) == 1  # another run's plans are not this run's to judge
    finally:
        plan.unjudge("run-judged", judge)
    assert "run-judged" not in plan._judges


def test_the_guards_control_refuses_an_actions_own_plan_and_interrupts_the_run_after_it(monkeypatch):
    """Around a kilocard action the control registers a judge; the action's plan (resolved once,
    by the action) is judged; a refusal raises before anything is applied, the control then
    interrupts the run, and the journal's verdict says the guard refused (exit 3, not told)."""
    judged = []

    def check(ctx, planned, limits, where, s=None):
        judged.append(planned)
        pods = len(planned.records)
        if pods > limits.max_pods:
            raise guards.GuardRefused(f"{where}: guard: blast radius: {pods} pods, over max_pods {limits.max_pods}")
        return {}

    monkeypatch.setattr(guards, "check", check)
    activity = {"name": "kill", "provider": {"type": "python", "module": "chaos.actions", "func": "apply_fault"}}
    configuration = {"kilocard_run_id": "run-guarded"}
    ctx = Context(Pods(), None, "run-guarded", say=lambda _m: None)

    guards.before_activity_control(activity, configuration, max_pods=2)
    planned = plan.plan(ctx, [(KILL, "fault")])  # 2 pods: allowed
    guards.after_activity_control(activity, configuration=configuration)
    assert judged == [planned]

    guards.before_activity_control(activity, configuration, max_pods=1)
    with pytest.raises(guards.GuardRefused, match="activity 'kill': guard: blast radius: 2 pods, over max_pods 1"):
        plan.plan(ctx, [(KILL, "fault")])
    with pytest.raises(InterruptExecution, match="over max_pods 1"):
        guards.after_activity_control(activity, configuration=configuration)
    assert "run-guarded" not in plan._judges  # nothing left behind for a later action

    journal = {"status": "interrupted"}
    guards.after_experiment_control(None, state=journal)
    found = judgement.verdict(journal)
    assert found.exit == Exit.ABORTED and found.basis == judgement.UNKNOWN
    assert found.reason.startswith("refused mid-run by a guard: activity 'kill': guard: blast radius")


def test_a_control_around_an_activity_that_is_no_kilocard_action_judges_nothing():
    probe = {"name": "p", "provider": {"type": "python", "module": "probes.chaostoolkit", "func": "placement_holds"}}
    guards.before_activity_control(probe, {"kilocard_run_id": "run-probe"}, max_pods=0)
    assert "run-probe" not in plan._judges
    guards.after_activity_control(probe)
