"""The live timeline, its seam and the end summary, on consoles that write to a string (a CI log, a terminal)."""

import io
import threading
from pathlib import Path

import pytest
from rich.console import Console

from chaos import events, ledger, timeline
from chaos.errors import Exit
from chaos.run import Result
from probes import slo

T0 = 1_000_000.0


def console(terminal=False):
    return Console(file=io.StringIO(), force_terminal=terminal, color_system=None, width=120, highlight=False)


def lines(out):
    return out.file.getvalue().splitlines()


@pytest.fixture
def clock():
    return [T0]


def fault(state, error=""):
    return {"topic": "fault", "run_id": "run-1", "fault_id": "f1", "kind": "node-kubelet-stop",
            "target": {"node": "gpu-062"}, "state": state, "error": error, "at": T0}


def sample(phase, worst=("pod-3", 0.812), left=34.0, error=""):
    return {"topic": "slo", "indicator": "llama", "query": "q", "worst": worst, "error": error, "threshold": 0.5,
            "left": left, "phase": phase, "at": T0}


PROBE = {"type": "probe", "name": "ttft-back", "pauses": {"after": 5}}
RUN = {"status": "succeeded", "duration": 41.25,
       "output": {"verdict": "ok", "ok": True, "reason": "breached 7.0 s after the fault, back under 0.5 after 31.0 s"}}


def test_faults_probe_verdicts_and_slo_samples_are_lines_as_they_come(clock):
    out = console()
    tl = timeline.Timeline(out, clock=lambda: clock[0], slo_every=10)
    with tl:
        events.publish(fault("recorded"))
        events.publish(fault("applied"))
        clock[0] += 2.5
        tl.start_activity(PROBE)
        events.publish(sample("blind", ("pod-3", 0.2), left=58))
        clock[0] += 1
        events.publish(sample("breached"))
        clock[0] += 1
        events.publish(sample("breached", left=33))  # same phase, too soon: no line
        clock[0] += 10
        events.publish(sample("breached", ("pod-3", 0.9), left=23))  # 10 s on: a line again
        events.publish(sample("unknown", None, error="PromQL 'q' failed: refused", left=23))
        events.publish(sample("holding", ("pod-1", 0.31), left=12))
        tl.activity_completed(PROBE, RUN)
        events.publish(fault("reverted"))
    events.publish(fault("applied"))  # stopped: no longer heard
    assert lines(out) == [
        "00:00.0  fault applying   node-kubelet-stop node=gpu-062",
        "00:00.0  fault applied    node-kubelet-stop node=gpu-062",
        "00:02.5  probe started    ttft-back",
        "00:02.5  slo              llama: pod-3 0.200 <= 0.5, blind, 58 s left",
        "00:03.5  slo              llama: pod-3 0.812 > 0.5, breached, 34 s left",
        "00:14.5  slo              llama: pod-3 0.900 > 0.5, breached, 23 s left",
        "00:14.5  slo              llama: query failed (threshold 0.5), unknown, 23 s left",
        "00:14.5  slo              llama: pod-1 0.310 <= 0.5, holding, 12 s left",
        "00:14.5  probe ok         ttft-back: breached 7.0 s after the fault, back under 0.5 after 31.0 s (41.2 s)",
        "00:14.5  pause            5 s after ttft-back",
        "00:14.5  fault reverted   node-kubelet-stop node=gpu-062",
    ]


def test_failures_steady_states_and_a_fault_with_nothing_to_revert(clock):
    out = console()
    tl = timeline.Timeline(out, clock=lambda: clock[0])
    with tl:
        tl.started({"title": "S7 kill every replica"}, {})
        tl.hypothesis_before_completed({}, {"steady_state_met": True, "probes": []}, {})
        events.publish({**fault("recorded"), "fault_id": "k", "kind": "pod-kill", "target": {"pod": "p-0"}})
        events.publish({**fault("reverted"), "fault_id": "k", "kind": "pod-kill", "target": {"pod": "p-0"}})
        action = {"type": "action", "name": "isolate", "background": True}
        tl.start_activity(action)
        tl.activity_completed(action, {"status": "failed", "duration": 0.5, "exception": [
            "Traceback ...\n", "chaoslib.exceptions.ActivityFailed: node gpu-9 not found\n"]})
        tl.activity_completed({"type": "probe", "name": "count"}, {"status": "succeeded", "output": 3})
        tl.hypothesis_after_completed({}, {"steady_state_met": False, "probes": [
            {"activity": {"name": "ready"}, "tolerance_met": False}, {"activity": {"name": "p"}, "tolerance_met": True}]},
            {})
        events.publish(fault("applied", error="revert failed: agent unreachable"))
        tl.interrupted({}, {})
        tl.finish({"status": "interrupted", "deviated": True})
    assert [line[9:] for line in lines(out)] == [
        "run started      S7 kill every replica",
        "steady before    met",
        "fault applying   pod-kill pod=p-0",
        "fault applied    pod-kill pod=p-0 (nothing to revert)",
        "action started   isolate (background)",
        "action failed    isolate: chaoslib.exceptions.ActivityFailed: node gpu-9 not found (0.5 s)",
        "probe succeeded  count: output 3",
        "steady after     not met: ready",
        "revert failed    node-kubelet-stop node=gpu-062 (revert failed: agent unreachable)",
        "interrupted      the run was stopped",
        "run ended        interrupted, deviated",
    ]


def test_a_ledger_write_is_heard(tmp_path, clock):
    out = console()
    book = ledger.Ledger("run-1", None, tmp_path)
    record = ledger.Record(run_id="run-1", fault_id="f1", kind="pod-kill", target={"namespace": "ns", "pod": "p-0"},
                           expires_at="2030-01-01T00:00:00Z")
    heard = []
    unsubscribe = events.subscribe(heard.append)
    with timeline.Timeline(out, clock=lambda: clock[0]):
        book.write([record])
        record.state = "applied"
        book.write([record])
    unsubscribe()
    assert [e["state"] for e in heard] == ["recorded", "applied"]
    assert heard[0]["run_id"] == "run-1" and heard[0]["kind"] == "pod-kill" and isinstance(heard[0]["at"], float)
    assert lines(out) == ["00:00.0  fault applying   pod-kill namespace=ns pod=p-0",
                          "00:00.0  fault applied    pod-kill namespace=ns pod=p-0"]


def test_the_slo_probe_publishes_each_live_sample_with_its_phase():
    def value(at):
        return 0.9 if 7 <= at - T0 < 12 else 0.2

    class Prom:
        def custom_query(self, query):
            return [{"metric": {"pod": "pod-3"}, "value": [0, str(value(now[0]))]}]

        def custom_query_range(self, query, start_time, end_time, step):  # what Prometheus recorded
            points = range(int(start_time.timestamp()), int(end_time.timestamp()) + 1)
            return [{"metric": {"pod": "pod-3"}, "values": [[at, str(value(at))] for at in points]}]

    now = [T0]

    def sleep(s):
        now[0] += s

    heard = []
    unsubscribe = events.subscribe(heard.append)
    try:
        verdict = slo.recovered_within(Prom(), slo.Indicator("llama", "q", "5s", "pod"), T0,
                                       slo.Recovery(threshold=0.5, budget=60, hold=10, blind=6), interval=1.0,
                                       clock=lambda: now[0], sleep=sleep)
    finally:
        unsubscribe()
    assert verdict.ok
    phases = [e["phase"] for e in heard]
    assert phases[:6] == ["blind"] * 6 and "breached" in phases and phases[-1] == "holding"
    breach = heard[phases.index("breached")]
    assert breach["worst"] == ("pod-3", 0.9) and breach["threshold"] == 0.5 and breach["indicator"] == "llama"
    assert heard[0]["left"] == 60 and heard[-1]["left"] == 60 - (len(heard) - 1)


def test_a_subscriber_that_raises_does_not_break_publish():
    heard = []

    def broken(event):
        raise RuntimeError("a bug in a view")

    off = [events.subscribe(broken), events.subscribe(heard.append)]
    try:
        events.publish({"topic": "fault"})
    finally:
        for unsubscribe in off:
            unsubscribe()
    events.publish({"topic": "fault"})
    assert heard == [{"topic": "fault"}]


def test_events_from_other_threads_each_make_their_line(clock):
    out = console()
    with timeline.Timeline(out, clock=lambda: clock[0]):
        threads = [threading.Thread(target=lambda: [events.publish(fault("applied")) for _ in range(50)])
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert lines(out) == ["00:00.0  fault applied    node-kubelet-stop node=gpu-062"] * 200


def test_disabled_prints_nothing(clock):
    out = console(terminal=True)
    tl = timeline.Timeline(out, enabled=False, clock=lambda: clock[0])
    with tl:
        events.publish(fault("applied"))
        tl.start_activity(PROBE)
        tl.activity_completed(PROBE, RUN)
    assert out.file.getvalue() == ""


def test_on_a_terminal_rows_print_above_the_live_area(clock):
    out = console(terminal=True)
    tl = timeline.Timeline(out, clock=lambda: clock[0])
    with tl:
        tl.start_activity({"type": "action", "name": "wait-for-recovery", "timeout": 120})
        events.publish(sample("breached"))
        clock[0] += 7
        view = Console(file=io.StringIO(), width=120)
        view.print(tl._view())
        events.publish(fault("applied"))
    text = out.file.getvalue()
    assert "fault applied    node-kubelet-stop node=gpu-062" in text and "action started" in text
    live = view.file.getvalue()
    assert "action wait-for-recovery: 7 s of 120 s" in live
    assert "SLO llama: pod-3 0.812 > 0.5, breached, 27 s left" in live


JOURNAL = {
    "start": "2026-12-01T11:38:47+00:00", "status": "completed", "deviated": True,
    "steady_states": {
        "before": {"steady_state_met": True, "probes": [
            {"activity": {"type": "probe", "name": "groups-whole"}, "status": "succeeded", "tolerance_met": True,
             "output": {"verdict": "ok", "reason": "2 TP groups whole"}}]},
        "after": {"steady_state_met": False, "probes": [
            {"activity": {"type": "probe", "name": "groups-whole"}, "status": "succeeded", "tolerance_met": False,
             "output": {"verdict": "failed", "reason": "1 of 2 groups whole: [rank 1] missing"}}]}},
    "run": [
        {"activity": {"type": "action", "name": "lose-node"}, "status": "succeeded", "output": []},
        {"activity": {"type": "probe", "name": "ttft-back"}, "status": "succeeded",
         "output": {"verdict": "failed", "reason": "not recovered within 60 s (never back under 0.5)"}}],
    "kilocard": {
        "faults": [{"kind": "node-kubelet-stop", "target": {"node": "gpu-062"}, "state": "reverted", "error": "",
                    "applied_at": 1796125137.0, "at": "2026-12-01T11:39:46Z"},
                   {"kind": "pod-kill", "target": {"pod": "p-0"}, "state": "applied", "error": "revert failed: gone",
                    "applied_at": 1796125130.5, "at": "2026-12-01T11:38:50Z"}],
        "recovery": [{"pod": "p-0", "deleted": 0.4, "scheduled": 3.25, "ready": 41.0}]},
}


def rendered(renderable):
    out = console()
    out.print(renderable)
    return out.file.getvalue()


def test_at_80_columns_without_a_terminal_each_reason_is_on_its_own_lines_the_width_long():
    """A CI log: the reason column would be 16 characters wide; it goes under its row instead."""
    out = Console(file=io.StringIO(), force_terminal=False, color_system=None, width=80, highlight=False)
    reason = "not recovered within 60 s (never back under 0.5): llama-3-70b-649fdf9855-4rmml 1.532 above 0.5"
    out.print(timeline.summary(Result(Path("s5.yaml"), "run-1", Exit.FAILED, "steady state deviated",
                                      {**JOURNAL, "run": [{**JOURNAL["run"][1], "output": {"verdict": "failed",
                                                                                           "reason": reason}}]})))
    text = [line.strip("│ ").rstrip() for line in out.file.getvalue().splitlines()]
    assert "stage   activity      verdict" in text
    at = text.index("method  ttft-back     failed")
    assert " ".join(text[at + 1:at + 3]).split() == reason.split()  # two lines of the panel's width, not six
    assert all(len(line) <= 80 for line in out.file.getvalue().splitlines())


def test_the_summary_shows_verdict_exit_reasons_faults_and_recovery():
    text = rendered(timeline.summary(Result(Path("s5.yaml"), "run-1", Exit.FAILED, "steady state deviated", JOURNAL)))
    assert "kilocard run run-1 s5.yaml" in text and "failed (exit 1): steady state deviated" in text
    for needle in ("2 TP groups whole", "1 of 2 groups whole: [rank 1] missing", "ttft-back",
                   "not recovered within 60 s (never back under 0.5)", "node-kubelet-stop", "node=gpu-062",
                   "+10.0 s", "+59.0 s", "+3.5 s", "applied: revert failed: gone", "scheduled", "3.2", "41.0"):
        assert needle in text, needle
    assert "lose-node" not in text  # an action that succeeded is no probe
    rows = [line.split() for line in text.splitlines()]
    assert ["│", "before", "groups-whole", "ok", "2", "TP", "groups", "whole", "│"] in rows
    assert ["│", "method", "ttft-back", "failed", "not", "recovered", "within", "60", "s", "(never", "back", "under",
            "0.5)", "│"] in rows


def test_the_summary_of_invalid_input_is_its_verdict_alone():
    text = rendered(timeline.summary(Result(Path("bad.yaml"), "", Exit.INVALID, "bad.yaml: timeout: expected seconds",
                                            {"kilocard": {"exit_code": 2}})))
    assert "kilocard run bad.yaml" in text and "invalid (exit 2): bad.yaml: timeout: expected seconds" in text
    assert "probes" not in text and "faults" not in text


def test_progress_prints_a_line_at_each_end_off_a_terminal():
    out = console()
    with timeline.progress("starting the local testbed", out) as update:
        update("3 of 8 nodes Ready")
    with pytest.raises(RuntimeError), timeline.progress("waiting for recovery", out):
        raise RuntimeError("gave up")
    assert [line.split(" in ")[0].split(" after ")[0] for line in lines(out)] == [
        "starting the local testbed ...", "starting the local testbed: 3 of 8 nodes Ready",
        "starting the local testbed: done", "waiting for recovery ...", "waiting for recovery: failed"]


def test_progress_on_a_terminal_ends_with_its_time():
    out = console(terminal=True)
    with timeline.progress("starting the local testbed", out) as update:
        update("kind up")
    assert "starting the local testbed: done in" in out.file.getvalue()
