"""Incident timelines: their checks, the replay experiment, the play loop's timing, and recording
one from alerts and Events (pure parts; the testbed test records and replays a real S3 run)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from chaos import lifecycle, record, replay
from chaos.cli import main
from chaos.errors import SpecError
from chaos.ledger import Record
from probes.incident import Reading

ECC = {"kind": "gpu-ecc", "nodes": ["gpu-070"], "card": 3, "params": {"type": "dbe"}, "ttl_seconds": 600}
LOSS = {"kind": "network-loss", "node_selector": "kilocard.io/rack=rack-02", "percent": 100,
        "params": {"percent": 5}, "ttl_seconds": 600}
KUBELET = {"kind": "node-kubelet-stop", "nodes": ["gpu-013"], "ttl_seconds": 600}


def timeline(*faults: dict, **top) -> dict:
    return {"title": "incident", "faults": list(faults), **top}


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "incident.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_timeline_reads_into_its_faults_in_order(tmp_path: Path) -> None:
    t = replay.load(write(tmp_path, timeline({"at": 300, "fault": KUBELET}, {"at": 0, "for": 120, "fault": ECC},
                                             {"at": 90, "for": 60, "fault": LOSS}, observe=30)))
    assert [(e.at, e.hold, e.fault["kind"]) for e in t.entries] == [
        (0, 120, "gpu-ecc"), (90, 60, "network-loss"), (300, None, "node-kubelet-stop")]
    assert t.length == 300 and t.observe == 30


@pytest.mark.parametrize("data, message", [
    ({"faults": []}, "title: required"),
    (timeline({"at": 0, "fault": ECC}, extra=1), "extra: unknown field"),
    (timeline({"at": -1, "fault": ECC}), "faults[0].at: expected seconds (0 or more), got -1"),
    (timeline({"at": 0, "for": 0, "fault": ECC}), "faults[0].for: expected seconds above 0, got 0"),
    (timeline({"at": 0}), "faults[0]: fault: required"),
    (timeline({"at": 0, "fault": {**ECC, "card": -1}}), "faults[0].fault.card"),
    (timeline({"at": 0, "fault": {**ECC, "ttl_seconds": None}}), "faults[0].fault.ttl_seconds"),
    (timeline({"at": 0, "fault": ECC}, observe=-5), "observe: expected seconds (0 or more), got -5"),
])
def test_bad_timelines_name_the_entry_and_field(tmp_path: Path, data: dict, message: str) -> None:
    with pytest.raises(SpecError, match=r"incident\.yaml: .*" + message.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(").replace(")", r"\)")):
        replay.load(write(tmp_path, data))


def test_overlapping_faults_on_one_target_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, timeline({"at": 0, "for": 120, "fault": ECC}, {"at": 90, "for": 60, "fault": ECC}))
    with pytest.raises(SpecError) as caught:
        replay.load(path)
    assert str(caught.value) == (f"{path}: faults[1] overlaps faults[0]: both gpu-ecc on gpu-070 card 3 between "
                                 "90 s and 120 s; one fault per target at a time (end the first with `for`)")
    # One after the other, another card, or another kind on the same node: all fine.
    replay.load(write(tmp_path, timeline({"at": 0, "for": 90, "fault": ECC}, {"at": 90, "fault": ECC})))
    replay.load(write(tmp_path, timeline({"at": 0, "fault": ECC}, {"at": 5, "fault": {**ECC, "card": 4}})))
    replay.load(write(tmp_path, timeline({"at": 0, "fault": ECC}, {"at": 5, "fault": {**KUBELET,
                                                                                        "nodes": ["gpu-070"]}})))
    # A fault with no `for` lasts to the end: a later one on its target overlaps it.
    with pytest.raises(SpecError, match="between 500 s and the end"):
        replay.load(write(tmp_path, timeline({"at": 0, "fault": ECC}, {"at": 500, "for": 1, "fault": ECC})))
    # A kill has no window: two kills of one model's replicas 84 s apart are two events (a recording's).
    kill = {"kind": "pod-kill", "namespace": "fleet", "label_selector": "kilocard.io/model=m", "count": 1}
    replay.load(write(tmp_path, timeline({"at": 0, "fault": kill}, {"at": 83.8, "fault": kill})))


def test_resolved_targets_overlap_as_the_named_ones_do() -> None:
    entries = (replay.Entry(0, 60, LOSS, "a"), replay.Entry(30, 60, LOSS, "b"))
    records = [Record("r", "f", "network-loss", {"node": "gpu-001"}, ""), Record("r", "g", "network-loss",
                                                                                 {"node": "gpu-002"}, "")]
    targets = {0: replay.resolved_targets(records), 1: replay.resolved_targets(records[1:])}
    (problem,) = replay.overlaps(entries, targets, "t.yaml")
    assert "both network-loss on gpu-002 between 30 s and 60 s" in problem


def test_the_replay_is_an_experiment_with_one_timed_action(tmp_path: Path) -> None:
    probe = {"type": "probe", "name": "back", "provider": {"type": "python", "module": "probes.chaostoolkit",
                                                           "func": "tp_groups_whole", "arguments": {}}}
    t = replay.load(write(tmp_path, timeline({"at": 0, "for": 30, "fault": ECC}, verify=[probe],
                                             recorded={"recovery": [{"pod": "p", "deleted": 12}]},
                                             configuration={"namespace": "kilocard-fleet"})))
    data = replay.experiment(t)
    action, judged = data["method"]
    assert action["provider"]["func"] == "replay_timeline" and judged == probe
    assert action["provider"]["arguments"] == {"timeline": [{"at": 0, "for": 30, "fault": ECC}], "observe": 60}
    assert data["configuration"] == {"namespace": "kilocard-fleet"}
    assert data["extensions"][0]["recorded"] == {"recovery": [{"pod": "p", "deleted": 12}]}


class Played:
    """plan/execute/revert stand-ins that note when each was called."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, applying: float = 0.0) -> None:
        self.calls: list[tuple[str, str, float]] = []
        self.t0 = time.time()

        def plan(ctx, items):
            ((fault, where),) = items
            return SimpleNamespace(faults=[SimpleNamespace(kind=fault["kind"], where=where, records=[], failed=[],
                                                           problems=lambda: "")])

        def execute_one(ctx, book, planned):
            now = time.time()
            time.sleep(applying)  # an apply that takes this long (an eviction a PDB holds up)
            self.calls.append(("apply", planned.where, now - self.t0))
            planned.records = [Record("r", planned.where, planned.kind, {"node": "n"}, "", state="applied",
                                      applied_at=now)]
            return planned

        def revert(ctx, book, records):
            self.calls.append(("revert", records[0].fault_id, time.time() - self.t0))
            return []

        monkeypatch.setattr(replay.plan, "plan", plan)
        monkeypatch.setattr(lifecycle, "execute_one", execute_one)
        monkeypatch.setattr(lifecycle.revert, "revert", revert)


def test_play_applies_each_fault_at_its_offset_and_reverts_it_when_its_window_ends(monkeypatch) -> None:
    played = Played(monkeypatch)
    ctx = SimpleNamespace(stop=threading.Event())
    entries = [{"at": 0.6, "fault": KUBELET}, {"at": 0, "for": 0.4, "fault": ECC}, {"at": 0.2, "for": 0.2,
                                                                                       "fault": LOSS}]
    out = replay.play(ctx, None, entries, observe=0.2)
    order = [(what, where) for what, where, _ in played.calls]
    assert order == [("apply", "timeline[1]"), ("apply", "timeline[2]"), ("revert", "timeline[1]"),
                     ("revert", "timeline[2]"), ("apply", "timeline[0]")]
    for (_, _, at), want in zip(played.calls, (0, 0.2, 0.4, 0.4, 0.6), strict=True):
        assert abs(at - want) < 0.1, played.calls
    assert [round(o["at"], 1) for o in out] == [0.6, 0, 0.2]
    assert all(abs(o["applied_after"] - o["at"]) < 0.1 for o in out)
    assert abs(out[1]["reverted_after"] - 0.4) < 0.1 and "reverted_after" not in out[0]  # to the end: the runner's
    assert time.time() - played.t0 >= 0.8  # watched `observe` past the last fault


def test_a_fault_whose_apply_outlasts_its_window_is_reverted_at_once_not_at_the_end(monkeypatch) -> None:
    played = Played(monkeypatch, applying=0.3)
    out = replay.play(SimpleNamespace(stop=threading.Event()), None, [{"at": 0, "for": 0.1, "fault": ECC}],
                      observe=0.5)
    (_, _, applied), (what, _, reverted) = played.calls
    assert what == "revert" and reverted - applied < 0.45, played.calls  # after the apply, before `observe` ends
    assert out[0]["reverted_after"] < 0.45


def test_a_stop_ends_the_play_before_the_next_fault(monkeypatch) -> None:
    played = Played(monkeypatch)
    ctx = SimpleNamespace(stop=threading.Event())
    threading.Timer(0.2, ctx.stop.set).start()
    out = replay.play(ctx, None, [{"at": 0, "fault": ECC}, {"at": 5, "fault": LOSS}], observe=60)
    assert [w for _, w, _ in played.calls] == ["timeline[0]"] and out[1] == {}
    assert time.time() - played.t0 < 1


# --- recording -----------------------------------------------------------------------------------
def test_fill_takes_the_first_label_present_and_numbers_stay_numbers() -> None:
    filled = record.fill(record.ALERT_FAULTS["GpuDoubleBitEccErrors"]["fault"], {"hostname": "gpu-070", "gpu": "3"},
                         "alert")
    assert filled == {"kind": "gpu-ecc", "nodes": ["gpu-070"], "card": 3, "params": {"type": "dbe", "speed": 0.5}}
    with pytest.raises(SpecError, match="alert: no label 'gpu' to fill the fault with"):
        record.fill({"card": "{gpu}"}, {"hostname": "x"}, "alert")


def test_alerts_become_faults_with_their_windows_and_the_rest_stay_alerts() -> None:
    ecc = {"metric": {"__name__": "ALERTS", "alertname": "GpuDoubleBitEccErrors", "alertstate": "firing",
                      "Hostname": "gpu-070", "gpu": "3"}, "values": [[t, "1"] for t in range(1001, 1031)]}
    slo = {"metric": {"alertname": "ReplicaTtftP95High", "pod": "p"}, "values": [[t, "1"] for t in range(1007, 1020)]}
    faults, others = record.faults_from_alerts([ecc, slo], 1.0, until=1100, mapping=record.ALERT_FAULTS)
    (s,) = faults
    assert (s.name, s.start, s.end, s.fault["nodes"], s.fault["card"]) == ("GpuDoubleBitEccErrors", 1001, 1031,
                                                                           ["gpu-070"], 3)
    assert others == [{"name": "ReplicaTtftP95High", "labels": {"alertname": "ReplicaTtftP95High", "pod": "p"},
                       "firing_at": 1007, "resolved_at": 1020}]
    still, _ = record.faults_from_alerts([ecc], 1.0, until=1031, mapping=record.ALERT_FAULTS)
    assert still[0].end is None  # firing when the range ends: open-ended


def event(kind: str, name: str, reason: str, at: str, message: str = "", ns: str = "fleet") -> dict:
    return {"involvedObject": {"kind": kind, "name": name, "namespace": ns}, "reason": reason, "message": message,
            "eventTime": at}


EVENTS = [
    event("Node", "gpu-013", "NodeNotReady", "2026-12-01T10:00:40.000000Z", ns="default"),
    event("Pod", "m-7f-abc", "Evicted", "2026-12-01T10:00:12.500000Z"),
    event("ReplicaSet", "m-7f", "SuccessfulCreate", "2026-12-01T10:00:12.600000Z", "Created pod: m-7f-xyz"),
    event("Pod", "m-7f-xyz", "Scheduled", "2026-12-01T10:00:12.700000Z", "Successfully assigned fleet/m-7f-xyz to gpu-2"),
    event("StatefulSet", "big-g0", "SuccessfulCreate", "2026-12-01T10:01:30.000000Z",
          "create Pod big-g0-1 in StatefulSet big-g0 successful"),
    event("Node", "gpu-013", "NodeReady", "2026-12-01T10:02:00.000000Z", ns="default"),
]


def test_node_events_become_faults_until_the_node_is_back() -> None:
    (s,) = record.faults_from_events(EVENTS, record.EVENT_FAULTS)
    t0 = s.start + 40  # NodeNotReady comes after the node controller's grace (the lead)
    assert s.fault == {"kind": "node-kubelet-stop", "nodes": ["gpu-013"]} and s.end - t0 == 80


def test_pod_events_give_the_recorded_recovery() -> None:
    t0 = 1796119200.0  # 2026-12-01T10:00:00Z
    (row,) = record.recovery_from_events(EVENTS, t0)
    assert row == {"pod": "m-7f-abc", "deleted": 12.5, "replacement": "m-7f-xyz", "created": 12.6,
                   "scheduled": 12.7, "node": "gpu-2"}
    # Ready is no Event: the replacement's Ready condition (ready_times) tells it.
    (row,) = record.recovery_from_events(EVENTS, t0, ready={"fleet/m-7f-xyz": t0 + 41.0, "fleet/m-7f-abc": t0})
    assert row["ready"] == 41.0
    assert record.symptoms([row], [])["replicas"] == [{"owner": "m-7f", "pod": "m-7f-abc", "deleted": 12.5,
                                                       "scheduled": 12.7, "ready": 41.0}]


def test_a_failed_pull_is_a_phase_of_the_recovery() -> None:
    t0 = 1796119200.0
    pulled = [*EVENTS,
              event("Pod", "m-7f-xyz", "Failed", "2026-12-01T10:00:13.000000Z",
                    'Failed to pull image "vllm/vllm-openai:v0.11.0": connection refused'),
              event("Pod", "m-7f-xyz", "Failed", "2026-12-01T10:00:23.000000Z", "Failed to pull image again"),
              event("Pod", "m-7f-abc", "Failed", "2026-12-01T10:00:11.000000Z", "Liveness probe failed"),
              event("Pod", "m-7f-xyz", "Started", "2026-12-01T10:00:40.000000Z", "Started container")]
    (row,) = record.recovery_from_events(pulled, t0)
    assert row["pull_failed"] == 13.0 and row["started"] == 40.0  # the first failure; a probe's is no pull's


def test_ready_times_are_the_ready_conditions_last_transitions() -> None:
    def pod(name: str, *conditions: tuple[str, str, str | None]) -> dict:
        return {"metadata": {"namespace": "fleet", "name": name}, "status": {"conditions": [
            {"type": t, "status": st, **({"lastTransitionTime": at} if at else {})} for t, st, at in conditions]}}

    class Kube:
        asked: list = []

        def list_objects(self, api_version, kind, namespace=None):
            self.asked.append((api_version, kind, namespace))
            return [pod("a", ("PodScheduled", "True", "2026-12-01T10:00:01Z"), ("Ready", "True", "2026-12-01T10:00:41Z")),
                    pod("b", ("Ready", "False", "2026-12-01T10:00:30Z")),  # not Ready now: no time
                    pod("c", ("Ready", "True", None)), pod("d")]

    kube = Kube()
    assert record.ready_times(record.pods(kube, ["fleet", "fleet"])) == {"fleet/a": 1796119241.0}
    assert kube.asked == [("v1", "Pod", "fleet")]  # one LIST per namespace


def test_a_models_slo_breach_in_the_range_is_a_symptom_from_its_first_breach_to_its_last_recovery() -> None:
    t0 = 1796119200.0
    entry = {"model": "m", "namespace": "fleet", "indicator": "ttft_p95", "threshold": 0.5, "window": "30s"}

    def p95(values: dict[int, dict[str, float]]) -> list[Reading]:
        return [Reading(t0 + t, v) for t, v in sorted(values.items())]

    calm, sick = {"a": 0.2, "b": 0.2}, {"a": 0.2, "b": 1.4}
    # Over before the first fault (not its symptom), under, then two breaches after it.
    twice = p95({t: sick if -5 <= t < -2 or 8 <= t < 20 or 30 <= t < 36 else calm for t in range(-10, 60)})
    quiet = p95({t: calm for t in range(-10, 60)})
    found, before = record.slo_symptoms([(entry, twice), ({**entry, "model": "n"}, quiet)], t0, t0 + 59, [])
    assert found == [{**entry, "breached_at": 8.0, "recovered_at": 36.0}] and before == []  # n: no breach
    still = p95({t: sick if t >= 8 else calm for t in range(-10, 60)})
    assert record.slo_symptoms([(entry, still)], t0, t0 + 59, [])[0][0]["recovered_at"] is None
    # Over already at the first fault (an alert's fault dated after the breach began): said, not kept.
    early = p95({t: sick if -3 <= t < 20 else calm for t in range(-10, 60)})
    assert record.slo_symptoms([(entry, early)], t0, t0 + 59, []) == (
        [], ["fleet/m ttft_p95 over 0.5 before the first fault"])
    data = record.timeline("t", [record.Sighting("x", {"kind": "gpu-ecc", "nodes": ["n1"], "card": 1,
                                                       "params": {"type": "dbe"}}, t0, t0 + 30)],
                           [], [], {}, slo_found=[(entry, twice)], end=t0 + 59)
    assert data["symptoms"]["slo"] == found and data["observe"] >= 15


def test_models_are_read_from_the_pods_as_everywhere_else() -> None:
    labelled = {"metadata": {"namespace": "fleet", "name": "m-0", "labels": {"kilocard.io/model": "m"}}}
    other = {"metadata": {"namespace": "fleet", "name": "x", "labels": {}}, "spec": {"containers": [
        {"name": "c", "image": "busybox", "args": ["sleep", "1"]}]}}
    assert record.models([labelled, labelled, other]) == [("fleet", "m")]


def test_a_recorded_timeline_loads_as_a_timeline(tmp_path: Path) -> None:
    ecc = record.Sighting("GpuDoubleBitEccErrors", {"kind": "gpu-ecc", "nodes": ["gpu-070"], "card": 3,
                                                    "params": {"type": "dbe"}}, 1796119210.0, 1796119240.0)
    data = record.timeline("S3 as it happened", [ecc], EVENTS, [], {"since": "x"}, {"namespace": "fleet"})
    assert data["faults"] == [{"at": 0.0, "for": 30.0, "fault": {**ecc.fault, "ttl_seconds": 330},
                               "note": "recorded as GpuDoubleBitEccErrors"}]
    assert data["recorded"]["recovery"][0]["deleted"] == 2.5  # offsets from the first fault
    t = replay.load(write(tmp_path, data))
    assert t.entries[0].fault["kind"] == "gpu-ecc" and t.configuration == {"namespace": "fleet"}
    with pytest.raises(SpecError, match="no fault found in the range"):
        record.timeline("empty", [], EVENTS, [], {})


def test_cli_refuses_bad_ranges_and_timelines(tmp_path: Path, capsys) -> None:
    assert main(["record", "--since", "yesterday", "--until", "now", "-o", str(tmp_path / "t.yaml")]) == 2
    assert "--since: expected RFC 3339" in capsys.readouterr().err
    assert main(["record", "--since", "200", "--until", "100", "-o", str(tmp_path / "t.yaml")]) == 2
    assert "--until: 100 is not after --since 200" in capsys.readouterr().err
    bad = write(tmp_path, timeline({"at": 0, "for": 120, "fault": ECC}, {"at": 90, "fault": ECC}))
    assert main(["replay", str(bad), "--reports", str(tmp_path / "reports")]) == 2
    assert "faults[1] overlaps faults[0]" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()  # refused before anything, even the experiment file


def test_a_fix_replayed_with_faults_that_touch_no_replica_of_the_model_its_alerts_name_is_refused(tmp_path: Path) -> None:
    data = {"title": "t", "faults": [{"at": 0, "for": 10, "fault": {"kind": "gpu-ecc", "nodes": ["gpu-001"], "card": 3,
                                                                   "ttl_seconds": 60}}],
            "symptoms": {"alerts": [{"alert": "ReplicaTtftP95High", "firing_at": 8, "labels": {
                "namespace": "ns", "model_name": "llama-3-70b", "severity": "page"}}]}}
    timeline = replay.parse(data, tmp_path / "t.yaml")
    (fixed,) = replay.unreached(timeline, {("ns", "other")}, "t.yaml", "fixed")
    assert fixed.startswith("t.yaml: the replay's faults, resolved now, touch no replica of ns/llama-3-70b, ")
    assert fixed.endswith("or the replay cannot judge the fix")
    assert replay.unreached(timeline, set(), "t.yaml", "reproduced") == []  # judged: not reproduced, exit 1
    assert replay.unreached(timeline, {("ns", "llama-3-70b"), ("ns", "other")}, "t.yaml", "fixed") == []
    assert replay.unreached(timeline, {("ns2", "llama-3-70b")}, "t.yaml", "fixed")  # another namespace's model
    data["symptoms"]["alerts"][0]["labels"] = {"severity": "page"}  # an alert of no model: not judged here
    assert replay.unreached(replay.parse(data, tmp_path / "t.yaml"), set(), "t.yaml", "fixed") == []
    # An SLO breach names its model too: with no alert at all, a fault on nothing is refused as well.
    data["symptoms"] = {"slo": [{"model": "llama-3-70b", "namespace": "ns", "indicator": "ttft_p95", "threshold": 0.5,
                                 "breached_at": 8}]}
    slo_only = replay.parse(data, tmp_path / "t.yaml")
    assert replay.unreached(slo_only, {("ns", "other")}, "t.yaml", "fixed")
    assert replay.unreached(slo_only, {("ns", "llama-3-70b")}, "t.yaml", "fixed") == []
    judged = replay.experiment(slo_only)  # something to judge: the SLO breach alone
    assert [p["provider"]["func"] for p in judged["method"] if p["type"] == "probe"] == ["incident_symptoms"]
    assert replay.namespaces(slo_only) == ["ns"]
