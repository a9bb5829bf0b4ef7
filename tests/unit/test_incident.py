"""An incident's symptoms judged against a replay (probes.incident): reproduced or not, fixed or
not, each symptom's row saying recorded against observed; the symptoms record writes (alerts,
replicas, pods deleted from outside through the audit log or the kubelet's events); the replay
experiment that judges them, and the summary that shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from chaos import record, replay, timeline
from chaos.errors import Exit, SpecError
from chaos.run import Result
from probes import snapshot
from probes.incident import Firing, Reading, Replacement, fixed, problems, reproduced

SLOW = {"alert": "ReplicaTtftP95High", "labels": {"namespace": "fleet", "model_name": "m"}, "firing_at": 3.0,
        "resolved_at": 25.0, "pod": "m-7f-abc"}
LOST = {"owner": "m-7f", "pod": "m-7f-abc", "deleted": 12.0, "started": 30.0}
SYMPTOMS = {"tolerance": 10.0, "alerts": [SLOW], "replicas": [LOST]}
BREACH = {"model": "m", "namespace": "fleet", "indicator": "ttft_p95", "threshold": 0.5, "window": "30s",
          "breached_at": 6.0, "recovered_at": 40.0}


def fired(at: float, lasted: float | None, pod: str = "m-7f-new", **labels: str) -> Firing:
    return Firing("ReplicaTtftP95High", {"namespace": "fleet", "model_name": "m", "pod": pod, **labels}, at,
                  None if lasted is None else at + lasted)


def test_an_incident_seen_again_within_tolerance_is_reproduced_on_another_replica_name() -> None:
    v = reproduced(SYMPTOMS, [fired(5.0, 20.0)], [Replacement("m-7f", "m-7f-qqq", 15.0, 36.0)], until=70)
    assert v.ok and v.reason == "reproduced: 2 of 2 symptom(s) seen again within tolerance"
    alert, replica = v.details["symptoms"]
    assert alert == {"symptom": "alert ReplicaTtftP95High{model_name=m,namespace=fleet}", "recorded": "fired +3.0 s",
                     "observed": "fired +5.0 s", "judgement": "ok", "why": "within 10 s of +3.0 s"}
    assert replica["observed"] == "m-7f-qqq deleted +15.0 s, started +36.0 s" and replica["judgement"] == "ok"


@pytest.mark.parametrize("firings, replaced, until, judgement, reason", [
    ([], [Replacement("m-7f", "x", 15, 36)], 70, "failed",
     "not reproduced: alert ReplicaTtftP95High{model_name=m,namespace=fleet} did not fire within 10 s of +3.0 s "
     "(watched to +70.0 s)"),
    ([fired(40.0, 5.0)], [Replacement("m-7f", "x", 15, 36)], 70, "failed",
     "not reproduced: alert ReplicaTtftP95High{model_name=m,namespace=fleet} fired +40.0 s, not within 10 s of +3.0 s"),
    ([fired(4.0, 5.0, model_name="other")], [Replacement("m-7f", "x", 15, 36)], 70, "failed",
     "not reproduced: alert ReplicaTtftP95High{model_name=m,namespace=fleet} did not fire"),  # another model's
    ([fired(4.0, 5.0)], [], 70, "failed", "not reproduced: no replica of m-7f was deleted within 10 s of +12.0 s"),
    ([fired(4.0, 5.0)], [Replacement("m-7g", "x", 12, 30)], 70, "failed", "not reproduced: no replica of m-7f"),
    ([fired(4.0, 5.0)], [Replacement("m-7f", "x", 12, 55)], 70, "failed",
     "not reproduced: replica of m-7f's replacement started +55.0 s, not within 10 s of +30.0 s"),
    ([fired(-2.0, None)], [Replacement("m-7f", "x", 12, 30)], 70, "unknown",
     "reproduced? alert ReplicaTtftP95High{model_name=m,namespace=fleet} was already firing before the replay's "
     "first fault: cannot judge, not healthy"),
    ([fired(4.0, 5.0)], [Replacement("m-7f", "x", 12, None)], 35, "unknown",
     "reproduced? replica of m-7f: its replacement had not started when the replay ended at +35.0 s"),
    ([fired(4.0, 5.0)], [], 20, "unknown", "reproduced? replica of m-7f: the replay ended at +20.0 s, before +22.0 s"),
])
def test_what_is_not_reproduced_says_which_symptom_and_what_was_seen(firings, replaced, until, judgement,
                                                                       reason) -> None:
    v = reproduced(SYMPTOMS, firings, replaced, until)
    assert v.judgement == judgement and v.reason.startswith(reason), v.reason


def test_each_phase_the_record_has_is_judged_scheduled_started_and_ready() -> None:
    """The replica came back in the replay, started on time, but Ready far later (a slow
    warm-up): not the incident's recovery, and the row names the phase."""
    phased = {"tolerance": 5.0, "replicas": [{**LOST, "scheduled": 13.0, "ready": 40.0}]}
    on_time = Replacement("m-7f", "x", 12.0, 31.0, scheduled=14.0, ready=42.0)
    v = reproduced(phased, [], [on_time], until=80)
    assert v.ok and v.details["symptoms"][0]["observed"] == "x deleted +12.0 s, scheduled +14.0 s, started +31.0 s, " \
                                                            "Ready +42.0 s", v.details
    assert v.details["symptoms"][0]["why"] == "deleted, scheduled, started and Ready within 5 s of the recorded offsets"
    slow = Replacement("m-7f", "x", 12.0, 31.0, scheduled=14.0, ready=70.0)
    v = reproduced(phased, [], [slow], until=80)
    assert not v.ok and v.reason == "not reproduced: replica of m-7f's replacement Ready +70.0 s, not within 5 s " \
                                    "of +40.0 s", v.reason
    never = Replacement("m-7f", "x", 12.0, 31.0, scheduled=14.0)
    assert reproduced(phased, [], [never], until=44).judgement == "unknown"  # Ready's window not passed
    v = reproduced(phased, [], [never], until=80)
    assert v.reason.startswith("not reproduced: replica of m-7f's replacement had not become Ready by +80.0 s"), v
    unscheduled = Replacement("m-7f", "x", 12.0, None)  # a phase failed outweighs one not yet known
    v = reproduced({**phased, "replicas": [{**phased["replicas"][0], "scheduled": 13.0}]}, [], [unscheduled], 30)
    assert v.judgement == "failed" and "had not been scheduled by +30.0 s" in v.reason, v.reason
    # A fix judged by Ready: the replacement started in time, but served 40 s later.
    v = fixed(phased, {"replicas": {"ready_within": 20}}, [], [slow], until=80)
    assert v.reason == "not fixed: replica of m-7f x took 58.0 s to become Ready again, over the fix's 20 s", v.reason
    assert fixed(phased, {"replicas": {"ready_within": 35}}, [], [on_time], until=80).ok


def p95(*points: tuple[float, dict[str, float] | None]) -> dict[str, list[Reading]]:
    return {"fleet/m:ttft_p95": [Reading(at, values) for at, values in points]}


def timeline_of(start: float, end: float, values: dict[str, float], then: dict[str, float] | None = None,
                after: float = 1e9) -> list[tuple[float, dict[str, float] | None]]:
    """A reading every second from `start` to `end`: `values`, then `then` from `after` on."""
    return [(float(t), then if then is not None and t >= after else values) for t in range(int(start), int(end) + 1)]


def test_an_slo_breach_is_reproduced_when_one_starts_within_tolerance_of_the_recorded_one() -> None:
    """The ECC incident without an alert rule: the sick replica's P95 over 0.5 from +6 s."""
    slo = {"tolerance": 5.0, "slo": [BREACH]}
    sick = timeline_of(-5, 60, {"a": 0.2, "b": 0.2}, {"a": 0.2, "b": 1.4}, after=9)  # b breaches at +9
    v = reproduced(slo, [], [], 60, p95(*sick))
    assert v.ok and v.details["symptoms"][0] == {
        "symptom": "SLO ttft_p95 of fleet/m over 0.5", "recorded": "breached +6.0 s", "observed": "breached +9.0 s",
        "judgement": "ok", "why": "within 5 s of +6.0 s"}
    late = timeline_of(-5, 60, {"a": 0.2, "b": 0.2}, {"a": 0.2, "b": 1.4}, after=12)
    assert reproduced(slo, [], [], 60, p95(*late)).reason == ("not reproduced: SLO ttft_p95 of fleet/m over 0.5 "
                                                              "breached +12.0 s, not within 5 s of +6.0 s")
    calm = timeline_of(-5, 60, {"a": 0.2, "b": 0.2})
    assert reproduced(slo, [], [], 60, p95(*calm)).reason.startswith("not reproduced: SLO ttft_p95 of fleet/m over "
                                                                     "0.5 was not breached within 5 s of +6.0 s")
    # b falls silent while its pod lives: not "not breached", but not seen.
    silent = timeline_of(-5, 60, {"a": 0.2, "b": 0.2}, {"a": 0.2}, after=3)
    v = reproduced(slo, [], [], 60, p95(*silent))
    assert v.judgement == "unknown" and "not seen from +3.0 s to +11.0 s" in v.reason, v.reason
    # ... unless its pod was deleted (then its replacement, under a new name, speaks for it).
    assert reproduced(slo, [], [Replacement("m-7f", "b", 2.0, 20.0)], 60, p95(*silent)).judgement == "failed"
    # Unseen where the breach was due, then one seen off its offset: it may have begun unseen.
    blind = [(t, None if 3 <= t < 14 else v) for t, v in late]
    v = reproduced(slo, [], [], 60, p95(*blind))
    assert v.judgement == "unknown" and "not seen from +3.0 s to +11.0 s" in v.reason, v.reason
    already = timeline_of(-5, 60, {"a": 0.2, "b": 1.4})
    assert reproduced(slo, [], [], 60, p95(*already)).reason.startswith(
        "reproduced? SLO ttft_p95 of fleet/m over 0.5 was already breached before the replay's first fault")
    assert reproduced(slo, [], [], 60, {}).judgement == "unknown"  # no series at all: never "not breached"
    assert reproduced(slo, [], [], 10, p95(*calm[:16])).judgement == "unknown"  # its window not passed yet


def test_an_slo_fix_holds_when_no_breach_starts_or_each_ends_within_its_budget() -> None:
    slo = {"tolerance": 5.0, "slo": [BREACH]}
    budget = {"slo": {"m": {"recovered_within": 20}}}
    brief = timeline_of(-5, 60, {"a": 0.2}, {"a": 0.9}, after=8)[:23] + timeline_of(18, 60, {"a": 0.2})  # 8..17
    v = fixed(slo, budget, [], [], 60, p95(*brief))
    assert v.ok and v.details["symptoms"][0]["observed"] == "breached +8.0 s, under again after 10.0 s", v.details
    assert fixed(slo, {}, [], [], 60, p95(*brief)).reason == ("not fixed: SLO ttft_p95 of fleet/m over 0.5 came "
                                                              "back: breached +8.0 s, under again after 10.0 s")
    long = timeline_of(-5, 60, {"a": 0.2}, {"a": 0.9}, after=8)
    assert fixed(slo, budget, [], [], 60, p95(*long)).reason.startswith(
        "not fixed: SLO ttft_p95 of fleet/m over 0.5 came back and lasted 52.0 s, over the fix's 20 s")
    assert fixed(slo, budget, [], [], 20, p95(*long[:26])).judgement == "unknown"  # over 12 s of 20 at the end
    # A breach that falls silent has not ended: silence is no recovery.
    hushed = long[:16] + [(float(t), None) for t in range(11, 61)]
    assert fixed(slo, budget, [], [], 60, p95(*hushed)).judgement == "failed"
    calm = timeline_of(-5, 60, {"a": 0.2})
    assert fixed(slo, {}, [], [], 60, p95(*calm)).ok
    # A replica silent from the moment its pod was deleted is not silence; a moment before, it is.
    drained = timeline_of(-5, 60, {"a": 0.2, "b": 0.2}, {"a": 0.2}, after=5)
    assert fixed(slo, {}, [], [Replacement("m-7f", "b", 5.0, None)], 60, p95(*drained)).ok
    assert fixed(slo, {}, [], [Replacement("m-7f", "b", 5.5, None)], 60, p95(*drained)).judgement == "unknown"
    # Silence after a breach ended is not health either: the breach may have come back unseen.
    then_silent = brief[:30] + [(float(t), None) for t in range(25, 61)]
    v = fixed(slo, budget, [], [], 60, p95(*then_silent))
    assert v.judgement == "unknown" and "not seen from +25.0 s to +60.0 s" in v.reason, v.reason
    gap = calm[:20] + [(15.0, None)] + calm[21:]
    v = fixed(slo, {}, [], [], 60, p95(*gap))
    assert v.judgement == "unknown" and "not seen from +15.0 s to +15.0 s" in v.reason, v.reason


def test_one_owners_deletions_are_matched_in_order_each_to_its_own() -> None:
    two = {"tolerance": 10.0, "replicas": [{**LOST, "deleted": 12.0, "started": 30.0},
                                           {**LOST, "pod": "m-7f-def", "deleted": 20.0, "started": 40.0}]}
    both = [Replacement("m-7f", "a", 14.0, 33.0), Replacement("m-7f", "b", 21.0, 41.0)]
    assert reproduced(two, [], both, until=80).ok
    # One deletion cannot stand for two.
    v = reproduced(two, [], both[:1], until=80)
    assert not v.ok and "no replica of m-7f was deleted within 10 s of +20.0 s" in v.reason


def test_a_timeline_with_no_symptom_cannot_be_judged_reproduced() -> None:
    v = reproduced({"alerts": [], "replicas": []}, [fired(3.0, 1.0)], [], until=60)
    assert v.judgement == "unknown" and "no symptom to judge" in v.reason


FIX = {"alerts": {"ReplicaTtftP95High": {"resolved_within": 15}}, "replicas": {"started_within": 25}}


@pytest.mark.parametrize("fix, firings, replaced, judgement, reason", [
    ({}, [], [], "ok", "fixed: 1 of 1 symptom(s) held by the fix"),  # the replica is not judged without a budget
    ({}, [fired(4.0, 3.0)], [], "failed", "not fixed: alert ReplicaTtftP95High{model_name=m,namespace=fleet} came "
                                          "back: fired +4.0 s, resolved after 3.0 s"),
    (FIX, [fired(4.0, 12.0)], [Replacement("m-7f", "x", 10, 30)], "ok", "fixed: 2 of 2 symptom(s) held by the fix"),
    (FIX, [fired(4.0, 12.0), fired(30.0, 16.0)], [], "failed",
     "not fixed: alert ReplicaTtftP95High{model_name=m,namespace=fleet} came back and lasted 16.0 s, over the fix's "
     "15 s (fired +30.0 s, resolved after 16.0 s)"),
    (FIX, [fired(50.0, None)], [], "unknown", "fixed? alert ReplicaTtftP95High{model_name=m,namespace=fleet} still "
                                              "firing when the replay ended, 10.0 s of the fix's 15 s"),
    (FIX, [fired(4.0, None)], [], "failed", "not fixed: alert ReplicaTtftP95High{model_name=m,namespace=fleet} came "
                                            "back and lasted 56.0 s, over the fix's 15 s (fired +4.0 s, still firing"),
    (FIX, [], [Replacement("m-7f", "x", 10, 40)], "failed",
     "not fixed: replica of m-7f x took 30.0 s to start again, over the fix's 25 s"),
    (FIX, [], [Replacement("m-7f", "x", 50, None)], "unknown",
     "fixed? replica of m-7f x had not started when the replay ended, 10.0 s of the fix's 25 s"),
    # Fired at the replay's first fault itself: the replay's own, not one from before it.
    (FIX, [fired(0.0, 12.0)], [], "ok", "fixed: 2 of 2 symptom(s) held by the fix"),
    (FIX, [fired(-1.0, 3.0)], [], "unknown", "fixed? alert ReplicaTtftP95High{model_name=m,namespace=fleet} was "
                                             "already firing before the replay's first fault"),
])
def test_a_fix_holds_when_no_symptom_comes_back_or_each_within_its_budget(fix, firings, replaced, judgement,
                                                                          reason) -> None:
    v = fixed(SYMPTOMS, fix, firings, replaced, until=60)
    assert v.judgement == judgement and v.reason.startswith(reason), v.reason
    assert v.details["expect"] == "fixed" and len(v.details["symptoms"]) == 2


@pytest.mark.parametrize("symptoms, fix, message", [
    ([], None, "t: symptoms: expected a mapping"),
    ({"alert": []}, None, "t: symptoms.alert: unknown field"),
    ({"tolerance": -1}, None, "t: symptoms.tolerance: expected seconds (0 or more), got -1"),
    ({"alerts": [{"alert": "A", "labels": {}}]}, None, "t: symptoms.alerts[0].firing_at: required, seconds"),
    ({"alerts": [{"alert": "", "labels": {}, "firing_at": 1}]}, None, "t: symptoms.alerts[0].alert: required, a name"),
    ({"alerts": [{"alert": "A", "labels": {}, "firing_at": 1, "resolved_at": "soon"}]}, None,
     "t: symptoms.alerts[0].resolved_at: expected seconds (0 or more) or null, got 'soon'"),
    ({"replicas": [{"owner": "o", "pod": "p", "deleted": 1, "when": 2}]}, None, "t: symptoms.replicas[0].when: unknown"),
    ({"replicas": [{"owner": "o", "pod": "p", "deleted": True}]}, None, "t: symptoms.replicas[0].deleted: required"),
    (SYMPTOMS, {"alerts": {"Typo": {"resolved_within": 5}}}, "t: fixed.alerts.Typo: no such symptom; expected one of "
                                                             "ReplicaTtftP95High"),
    (SYMPTOMS, {"alerts": {"ReplicaTtftP95High": {"resolved_within": 0}}},
     "t: fixed.alerts.ReplicaTtftP95High: expected {resolved_within: seconds above 0}, got"),
    (SYMPTOMS, {"replicas": {"booted_within": 5}}, "t: fixed.replicas: expected {started_within: seconds above 0} "
                                                  "or {ready_within: seconds above 0}"),
    (SYMPTOMS, {"replicas": {"started_within": 5, "ready_within": 9}}, "t: fixed.replicas: expected"),
    ({"replicas": [{"owner": "o", "pod": "p", "deleted": 1, "ready": -2}]}, None,
     "t: symptoms.replicas[0].ready: expected seconds (0 or more) or null"),
    (SYMPTOMS, {"slow": {}}, "t: fixed.slow: unknown field; expected alerts, replicas or slo"),
    (SYMPTOMS, {"slo": {"m": {"recovered_within": 5}}}, "t: fixed.slo.m: no such symptom; expected one of none"),
    ({**SYMPTOMS, "slo": [BREACH]}, {"slo": {"m": {"recovered_within": 0}}},
     "t: fixed.slo.m: expected {recovered_within: seconds above 0}"),
    ({"slo": [{**BREACH, "indicator": "p99"}]}, None,
     "t: symptoms.slo[0].indicator: expected one of ttft_p95, itl_p95, error_ratio, got 'p99'"),
    ({"slo": [{**BREACH, "window": 30}]}, None, "t: symptoms.slo[0].window: expected a name, got 30"),
    ({"slo": [{**BREACH, "window": "30"}]}, None, "t: symptoms.slo[0].window: expected a Prometheus duration above "
                                                  "0 (e.g. 30s, 1m), got '30'"),
    ({"slo": [{**BREACH, "window": "0s"}]}, None, "t: symptoms.slo[0].window: expected a Prometheus duration"),
    ({"slo": [{k: v for k, v in BREACH.items() if k != "threshold"}]}, None,
     "t: symptoms.slo[0].threshold: required, seconds (0 or more); got None"),
    (SYMPTOMS, [], "t: fixed: expected a mapping"),
])
def test_bad_symptoms_and_fixes_name_the_entry_and_field(symptoms, fix, message) -> None:
    found = problems(symptoms, fix, "t")
    assert any(p.startswith(message) for p in found), found
    assert problems(SYMPTOMS, FIX, "t") == []


# --- recording ---------------------------------------------------------------------------------------
def audit(verb: str, pod: str, at: str, user: str = "kubernetes-admin", code: int = 200, subresource: str = "",
          stage: str = "ResponseComplete") -> str:
    ref = {"resource": "pods", "namespace": "fleet", "name": pod, **({"subresource": subresource} if subresource
                                                                      else {})}
    return json.dumps({"kind": "Event", "stage": stage, "verb": verb, "objectRef": ref, "user": {"username": user},
                       "responseStatus": {"code": code}, "stageTimestamp": at})


def test_the_audit_log_gives_each_completed_pod_delete_and_eviction_in_the_range() -> None:
    lines = [audit("delete", "m-7f-abc", "2026-12-01T10:00:10.000000Z"),
             audit("create", "m-7f-def", "2026-12-01T10:00:11.000000Z", subresource="eviction"),
             audit("delete", "m-7f-ghi", "2026-12-01T10:00:12.000000Z", code=404),  # already gone: not a deletion
             audit("delete", "m-7f-jkl", "2026-12-01T10:00:12.000000Z", stage="RequestReceived"),
             audit("delete", "m-7f-mno", "2026-12-01T09:00:00.000000Z"),  # before the range
             "not json", json.dumps(["a list"])]
    t0 = 1796119200.0  # 2026-12-01T10:00:00Z
    assert record.audit_deletions(lines, t0, t0 + 60) == [(t0 + 10, "fleet/m-7f-abc", "kubernetes-admin"),
                                                          (t0 + 11, "fleet/m-7f-def", "kubernetes-admin")]


def test_a_deletion_nothing_explains_is_a_pod_kill_and_a_remediators_or_controllers_is_not() -> None:
    t0 = 1796119200.0
    deletions = [(t0 + 10, "fleet/m-7f-abc", "kubernetes-admin"), (t0 + 11, "fleet/m-7f-abc", "the kubelet"),
                 (t0 + 12, "fleet/m-7f-evi", "kubernetes-admin"),  # the remediator's: an Evicted event says so
                 (t0 + 13, "fleet/m-7f-gc", "system:serviceaccount:kube-system:replicaset-controller"),
                 (t0 + 14, "fleet/n-1-nos", "kubernetes-admin"),  # nothing selects its siblings: left out
                 (t0 + 15, "other/m-7f-xyz", "kubernetes-admin")]  # not a namespace asked for
    events = [{"involvedObject": {"kind": "Pod", "name": "m-7f-evi", "namespace": "fleet"}, "reason": "Evicted",
               "eventTime": "2026-12-01T10:00:11.500000Z"}]
    by_label = {"label_selector": "kilocard.io/model=m"}
    selectors = {"fleet/m-7f-abc": by_label, "fleet/m-7f-evi": by_label, "fleet/m-7f-gc": by_label,
                 "fleet/n-1-nos": None, "other/m-7f-xyz": by_label}
    kept = record.unexplained(deletions, events, selectors, ["fleet"])
    assert kept == [(t0 + 10, "fleet/m-7f-abc", "kubernetes-admin")]  # what the recovery rows are read for, too
    assert [pod for _, pod, _ in record.unexplained(deletions, events, selectors)] == ["fleet/m-7f-abc",
                                                                                       "other/m-7f-xyz"]
    (kill,) = record.faults_from_deletions(kept, selectors)
    assert kill == record.Sighting("deleted by kubernetes-admin", {"kind": "pod-kill", "namespace": "fleet",
                                                                   "label_selector": "kilocard.io/model=m",
                                                                   "count": 1}, t0 + 10, None,
                                  event="deleted fleet/m-7f-abc")


def test_two_deletions_of_one_models_pods_are_two_faults_each_at_its_own_time():
    """A kilocard run killed one replica, a `kubectl delete pod` another 84 s later: the same fault
    template twice, open-ended. Once merged as one fault seen twice, the replay looked for the
    second deletion's symptom and found no fault near it: "not reproduced"."""
    t0 = 1_000_000.0
    by_label = {"label_selector": "kilocard.io/model=m", "namespace": "fleet"}
    deletions = [(t0, "fleet/m-7f-abc", "kilocard-runner"), (t0 + 83.8, "fleet/m-7f-def", "kubernetes-admin")]
    found = record.merged(record.faults_from_deletions(deletions, {"fleet/m-7f-abc": by_label,
                                                                   "fleet/m-7f-def": by_label}))
    assert [(f.start, f.name) for f in found] == [(t0, "deleted by kilocard-runner"),
                                                  (t0 + 83.8, "deleted by kubernetes-admin")]
    # One deletion seen by two sources (the audit log, the kubelet's Killing event) is still one fault.
    ecc = {"kind": "gpu-ecc", "nodes": ["n1"], "card": 3}
    assert len(record.merged([record.Sighting("alert", ecc, t0, t0 + 30),
                              record.Sighting("condition", ecc, t0 + 1, None)])) == 1
    same = record.faults_from_deletions(deletions[:1], {"fleet/m-7f-abc": by_label})
    assert len(record.merged([*same, *same])) == 1



def pod(name: str, labels: dict[str, str], args: tuple[str, ...] = ()) -> dict:
    return {"metadata": {"name": name, "namespace": "fleet", "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "redis:7", "args": list(args)}]}}


def test_a_deleted_pods_siblings_are_found_again_by_kilocards_label_the_served_model_or_the_replicaset(tmp_path):
    labelled = pod("m-7f-abc", {"kilocard.io/model": "m", "pod-template-hash": "7f"})
    assert record.target_of(labelled, snapshot.identities([labelled])) == {"label_selector": "kilocard.io/model=m"}
    # A KServe predictor as the stack makes it (tests/unit/stacks/kserve.yaml): no label of kilocard's.
    stack = yaml.safe_load((Path(__file__).parent / "stacks" / "kserve.yaml").read_text())
    found = {p["metadata"]["name"]: record.target_of(p, snapshot.identities(stack)) for p in stack}
    assert found == {"llama3-predictor-6c9f8d7b5-x2k4q": {"model": "llama3"},
                     "big-predictor-5d8c7f9b6-h7p2m": {"model": "big"},
                     # the Ray worker names no model: its InferenceService's, read from its head
                     "big-predictor-worker-7b9d6c5f4-q9w8e": {"model": "big"}}, found
    # Replayed by that name: a timeline whose pod-kill picks the model's pods as kilocard finds them.
    t0 = 1796119200.0
    kill = record.faults_from_deletions([(t0, "serving/llama3-predictor-6c9f8d7b5-x2k4q", "kubernetes-admin")],
                                        {"serving/llama3-predictor-6c9f8d7b5-x2k4q": {"model": "llama3"}})
    data = record.timeline("by hand", kill, [], [], {}, {"namespace": "serving"}, [], 10)
    assert data["faults"][0]["fault"] == {"kind": "pod-kill", "namespace": "serving", "model": "llama3", "count": 1}
    replay.load(write(tmp_path, data))
    other = pod("cache-7f-abc", {"pod-template-hash": "7f"})
    assert record.target_of(other, snapshot.identities([other])) == {"label_selector": "pod-template-hash=7f"}
    assert record.target_of(pod("x", {"app": "x"}), {}) is None


def test_a_pod_deleted_by_hand_is_recorded_with_its_replacement_as_the_symptom(tmp_path: Path) -> None:
    t0 = 1796119200.0
    events = [
        {"involvedObject": {"kind": "ReplicaSet", "name": "m-7f", "namespace": "fleet"}, "reason": "SuccessfulCreate",
         "message": "Created pod: m-7f-new", "eventTime": "2026-12-01T10:00:00.300000Z"},
        {"involvedObject": {"kind": "Pod", "name": "m-7f-new", "namespace": "fleet"}, "reason": "Started",
         "eventTime": "2026-12-01T10:00:25.000000Z"}]
    kill = record.faults_from_deletions([(t0, "fleet/m-7f-abc", "kubernetes-admin")],
                                        {"fleet/m-7f-abc": {"label_selector": "kilocard.io/model=m"}})
    data = record.timeline("by hand", kill, events, [], {}, {"namespace": "fleet"}, [(t0, "fleet/m-7f-abc")], 10)
    (fault,) = data["faults"]
    assert fault["fault"] == {"kind": "pod-kill", "namespace": "fleet", "label_selector": "kilocard.io/model=m",
                              "count": 1} and "for" not in fault
    assert data["symptoms"] == {"tolerance": 10, "alerts": [], "replicas": [
        {"owner": "m-7f", "pod": "m-7f-abc", "deleted": 0.0, "started": 25.0}]}
    assert data["observe"] == 35  # to the last symptom (+25 s) and its 10 s tolerance: the kill itself takes no time
    replay.load(write(tmp_path, data))


def test_record_writes_each_alert_symptom_once_by_its_stable_labels_and_watches_long_enough() -> None:
    ecc = record.Sighting("GpuDoubleBitEccErrors", {"kind": "gpu-ecc", "nodes": ["gpu-070"], "card": 3}, 1000.0,
                          1010.0)
    alerts = [{"name": "ReplicaTtftP95High", "labels": {"alertname": "ReplicaTtftP95High", "model_name": "m",
                                                        "pod": p, "severity": "page"}, "firing_at": at,
               "resolved_at": at + 20} for p, at in (("a", 1003.0), ("b", 1090.0))]
    early = {"name": "Noise", "labels": {"alertname": "Noise"}, "firing_at": 990.0, "resolved_at": None}
    data = record.timeline("t", [ecc], [], [*alerts, early], {}, tolerance=15)
    assert data["symptoms"]["alerts"] == [{"alert": "ReplicaTtftP95High", "labels": {"model_name": "m",
                                                                                     "severity": "page"},
                                           "firing_at": 3.0, "resolved_at": 23.0, "pod": "a"}]
    assert data["observe"] == 15  # the last symptom (+3 s) and its 15 s end inside the tolerance after the fault


# --- the replay --------------------------------------------------------------------------------------
ECC = {"kind": "gpu-ecc", "nodes": ["gpu-070"], "card": 3, "params": {"type": "dbe"}, "ttl_seconds": 600}


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "incident.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_replay_judges_the_symptoms_after_the_faults_as_it_is_asked(tmp_path: Path) -> None:
    t = replay.load(write(tmp_path, {"title": "t", "faults": [{"at": 0, "for": 30, "fault": ECC}],
                                     "symptoms": SYMPTOMS, "fixed": FIX, "configuration": {"namespace": "fleet"}}))
    action, judge = replay.experiment(t)["method"]
    assert judge["name"] == "incident-reproduced" and judge["provider"]["func"] == "incident_symptoms"
    assert judge["provider"]["arguments"] == {"symptoms": SYMPTOMS, "expect": "reproduced", "fixed": FIX,
                                              "namespaces": ["fleet"], "first_at": 0.0}
    assert judge["tolerance"] == {"type": "regex", "target": "verdict", "pattern": "^ok$"}
    _, judge = replay.experiment(t, "fixed")["method"]
    assert judge["name"] == "incident-fixed" and judge["provider"]["arguments"]["expect"] == "fixed"


def test_a_replay_with_nothing_to_judge_or_a_fix_without_symptoms_is_refused(tmp_path: Path) -> None:
    bare = replay.load(write(tmp_path, {"title": "t", "faults": [{"at": 0, "fault": ECC}]}))
    with pytest.raises(SpecError, match="nothing to judge the replay by: the timeline records no symptom"):
        replay.experiment(bare)
    with pytest.raises(SpecError, match="fixed: a fix is judged against the symptoms, and the timeline has none"):
        replay.load(write(tmp_path, {"title": "t", "faults": [{"at": 0, "fault": ECC}], "fixed": FIX}))
    with pytest.raises(SpecError, match=r"incident\.yaml: fixed\.alerts\.Typo: no such symptom"):
        replay.load(write(tmp_path, {"title": "t", "faults": [{"at": 0, "fault": ECC}], "symptoms": SYMPTOMS,
                                     "fixed": {"alerts": {"Typo": {"resolved_within": 3}}}}))


def test_the_summary_sets_each_symptom_recorded_against_observed(tmp_path: Path) -> None:
    verdict = fixed(SYMPTOMS, FIX, [fired(4.0, 30.0)], [], until=60).to_json()
    journal = {"run": [{"activity": {"type": "probe", "name": "incident-fixed", "provider": {
        "type": "python", "module": "probes.chaostoolkit", "func": "incident_symptoms"}}, "status": "succeeded",
        "output": verdict}], "kilocard": {"faults": [], "recovery": []}}
    console = Console(width=200, record=True)
    console.print(timeline.summary(Result(tmp_path / "t.yaml", "r1", Exit.FAILED, "probe 'incident-fixed' failed: "
                                          + verdict["reason"], journal)))
    text = console.export_text()
    assert "incident: not fixed: alert ReplicaTtftP95High{model_name=m,namespace=fleet} came back and lasted 30.0 s" \
        in text
    assert "fired +3.0 s, resolved +25.0 s" in text and "fired +4.0 s, resolved after 30.0 s" in text
    assert "not judged" not in text  # both judged: the fix has a replica budget


def test_a_replay_that_passes_says_what_its_probes_said_not_that_nothing_was_checked() -> None:
    from chaos.judgement import verdict

    said = reproduced(SYMPTOMS, [fired(5.0, 20.0)], [Replacement("m-7f", "x", 15.0, 36.0)], until=70).to_json()
    action = {"activity": {"type": "action", "name": "replay-timeline"}, "status": "succeeded", "output": []}
    probe = {"activity": {"type": "probe", "name": "incident-reproduced", "provider": {
        "type": "python", "module": "probes.chaostoolkit", "func": "incident_symptoms"}}, "status": "succeeded",
        "output": said}
    bare = {"activity": {"type": "probe", "name": "plain"}, "status": "succeeded", "output": 3}
    journal = {"status": "completed", "steady_states": {"before": None, "after": None}, "run": [action, probe, bare]}
    assert verdict(journal)[:2] == (Exit.PASSED, "the method's probes passed: incident-reproduced: reproduced: 2 of 2 "
                                                 "symptom(s) seen again within tolerance; plain: within tolerance")
    assert verdict({**journal, "run": [action]})[:2] == (Exit.PASSED, "method ran; no steady-state hypothesis to check")


@pytest.mark.parametrize("path", sorted((Path(__file__).parents[2] / "experiments" / "incidents").glob("*.yaml")),
                         ids=lambda p: p.stem)
def test_the_field_accounts_incidents_load_and_judge_their_symptoms(path: Path) -> None:
    t = replay.load(path)
    assert t.symptoms["alerts"] and t.description and t.source["from"].startswith("../shared/reference/")
    for expect in ("reproduced", "fixed"):
        *_, judge = replay.experiment(t, expect)["method"]
        assert judge["provider"]["arguments"]["expect"] == expect
        assert judge["provider"]["arguments"]["namespaces"] == ["kilocard-fleet"]


def test_a_timeline_sets_its_replays_guards_and_a_bad_limit_is_named(tmp_path: Path) -> None:
    t = replay.load(write(tmp_path, {"title": "t", "faults": [{"at": 0, "fault": ECC}], "symptoms": SYMPTOMS,
                                     "guards": {"max_nodes": 16}}))
    (control,) = replay.experiment(t)["controls"]
    assert control == {"name": "guards", "provider": {"type": "python", "module": "chaos.guards",
                                                      "arguments": {"max_nodes": 16}}}
    with pytest.raises(SpecError, match=r"incident\.yaml: guards.*max_nodes"):
        replay.load(write(tmp_path, {"title": "t", "faults": [{"at": 0, "fault": ECC}], "symptoms": SYMPTOMS,
                                     "guards": {"max_nodes": -1}}))


def test_without_an_audit_log_the_kubelets_killing_event_is_the_deletion() -> None:
    events = [{"involvedObject": {"kind": "Pod", "name": "m-7f-abc", "namespace": "fleet"}, "reason": "Killing",
               "eventTime": "2026-12-01T10:00:10.000000Z"},
              {"involvedObject": {"kind": "Node", "name": "gpu-1"}, "reason": "Killing",
               "eventTime": "2026-12-01T10:00:11.000000Z"}]
    assert record.kubelet_deletions(events) == [(1796119210.0, "fleet/m-7f-abc", "the kubelet's Killing event")]
