"""Running a game day (chaos.gameday.day, .gates, .store, .view) with a fake runner, a fake
clock, a fake terminal and a fake ConfigMap API: no cluster, no waiting."""

import copy
import io
import json
import os
import signal
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from chaos import gameday
from chaos.errors import Conflict, Exit, KubeError, NotFound, SpecError
from chaos.gameday import gates, store, view
from chaos.gameday.day import SLICE_SECONDS, Status
from chaos.run import Result

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
S1, S2, S8 = (str(EXPERIMENTS / f) for f in ("s1-kill-one-replica.yaml", "s2-isolate-one-card.yaml",
                                              "s8-fragile-placement.yaml"))
SHANGHAI = timezone(timedelta(hours=8))
MONDAY_11 = datetime(2025, 6, 2, 11, 0, tzinfo=SHANGHAI)  # inside weekdays 10:00-16:00 Shanghai
GATES = {"namespace": "kilocard-system", "name": "gameday-gates"}
CONTROL = {"namespace": "kilocard-system", "name": "gameday-control"}


def write_plan(tmp_path, steps, **top):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"title": "test game day", **top, "steps": steps}))
    return gameday.load(path)


class Clock:
    def __init__(self, at=MONDAY_11):
        self.at = at
        self.slept = []

    def now(self):
        return self.at

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.at += timedelta(seconds=seconds)

    def advance(self, seconds):
        self.at += timedelta(seconds=seconds)


class Runner:
    """run_one: each file's (exit, reason) by its stem, each run taking `takes` seconds."""

    def __init__(self, clock, verdicts=None, takes=60.0, during=None):
        self.clock, self.verdicts, self.takes, self.during = clock, verdicts or {}, takes, during
        self.calls = []

    def __call__(self, path, variables):
        self.calls.append((path.name, variables))
        if self.during:
            self.during()
        self.clock.advance(self.takes)
        code, reason = self.verdicts.get(path.stem, (Exit.PASSED, "steady state met before and after the method"))
        run_id = f"run-{len(self.calls)}"
        return Result(path, run_id, code, reason, {"kilocard": {"run_id": run_id, "exit_code": int(code)}})


class Terminal:
    """read_line: each slice, the next scripted line (None: nothing typed in that slice)."""

    def __init__(self, clock, lines=()):
        self.clock, self.lines = clock, list(lines)

    def __call__(self, seconds):
        if self.lines and self.lines[0] is not None:
            return self.lines.pop(0)
        if self.lines:
            self.lines.pop(0)
        self.clock.advance(seconds)
        return None


class ConfigMaps:
    """The Kube methods the gates and the switch call, over ConfigMaps in memory. `change(at, ...)`
    schedules an annotation change that many seconds after the clock's start; time passes in watches."""

    def __init__(self, clock, *names):
        self.clock, self.start = clock, clock.now()
        self.maps = {name: {"metadata": {"name": name, "namespace": "kilocard-system", "resourceVersion": "1",
                                         "annotations": {}}} for name in names}
        self.changes = []  # (when, name, annotations), in time order
        self.patches = []
        self.watch_errors = []  # KubeErrors the next watches raise, one each
        self.created = []

    def change(self, after_seconds, name, annotations):
        self.changes.append((self.start + timedelta(seconds=after_seconds), name, annotations))
        self.changes.sort(key=lambda c: c[0])

    def _apply(self, name, annotations):
        meta = self.maps[name]["metadata"]
        for k, v in annotations.items():
            if v is None:
                meta["annotations"].pop(k, None)
            else:
                meta["annotations"][k] = v
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    def _until(self, moment):
        while self.changes and self.changes[0][0] <= moment:
            _, name, annotations = self.changes.pop(0)
            self._apply(name, annotations)

    def read_config_map(self, namespace, name):
        self._until(self.clock.now())
        if name not in self.maps:
            raise NotFound(f"get configmap {namespace}/{name}: 404 not found", status=404)
        return copy.deepcopy(self.maps[name])

    def watch_config_map(self, namespace, name, resource_version, timeout_seconds):
        if self.watch_errors:
            raise self.watch_errors.pop(0)
        deadline = self.clock.now() + timedelta(seconds=timeout_seconds)
        while True:
            mine = next((c for c in self.changes if c[1] == name and c[0] <= deadline), None)
            if mine is None:
                break
            self.clock.at = max(self.clock.at, mine[0])
            self._until(mine[0])
            yield "MODIFIED", copy.deepcopy(self.maps[name])
        self.clock.at = max(self.clock.at, deadline)
        self._until(deadline)

    def patch_config_map(self, namespace, name, patch):
        if name not in self.maps:
            raise NotFound(f"patch configmap {namespace}/{name}: 404 not found", status=404)
        self.patches.append((name, patch))
        self._apply(name, (patch.get("metadata") or {}).get("annotations") or {})

    def create_config_map(self, namespace, body):
        if any(b["metadata"]["name"] == body["metadata"]["name"] for _, b in self.created):
            raise Conflict("create configmap: 409 already exists", status=409)
        self.created.append((namespace, body))


class Watcher:
    def __init__(self):
        self.seen = []

    def started(self, step):
        self.seen.append(("started", step.id))

    def ended(self, outcome):
        self.seen.append(("ended", outcome.step.id, str(outcome.status)))

    def say(self, text):
        self.seen.append(("say", text))


def statuses(day):
    return [(o.step.id, str(o.status)) for o in day.steps]


# --- the order of things ------------------------------------------------------------------------
def test_steps_run_in_order_with_their_vars_and_pauses(tmp_path):
    clock = Clock()
    plan = write_plan(tmp_path, [{"experiment": S1}, {"pause": 12}, {"experiment": S8, "vars": {"budget_seconds": 90}}])
    runner, watcher = Runner(clock), Watcher()
    day = gameday.run(plan, runner, clock=clock, observer=watcher)
    assert runner.calls == [("s1-kill-one-replica.yaml", []), ("s8-fragile-placement.yaml", ["budget_seconds:int=90"])]
    assert statuses(day) == [("step-1", "ran"), ("step-2", "paused"), ("step-3", "ran")]
    assert sum(clock.slept) == 12 and max(clock.slept) <= SLICE_SECONDS
    assert day.exit == Exit.PASSED and day.reason == "every step done: 2 experiment(s) passed"
    assert day.started_at == MONDAY_11 and day.ended_at == MONDAY_11 + timedelta(seconds=132)
    assert day.steps[0].run_id == "run-1" and day.steps[0].exit == Exit.PASSED
    assert watcher.seen == [("started", "step-1"), ("ended", "step-1", "ran"), ("started", "step-2"),
                            ("ended", "step-2", "paused"), ("started", "step-3"), ("ended", "step-3", "ran")]


def test_a_failed_experiment_skips_the_rest(tmp_path):
    clock = Clock()
    plan = write_plan(tmp_path, [{"experiment": S1}, {"pause": 5}, {"experiment": S2}])
    runner = Runner(clock, {"s1-kill-one-replica": (Exit.FAILED, "probe 'x' failed: 1 of 2 pods Ready")})
    day = gameday.run(plan, runner, clock=clock)
    assert day.exit == Exit.FAILED
    assert day.reason == f"step-1 (experiment {S1}) exit 1: probe 'x' failed: 1 of 2 pods Ready"
    assert statuses(day) == [("step-1", "ran"), ("step-2", "skipped"), ("step-3", "skipped")]
    assert day.steps[2].reason == day.reason and len(runner.calls) == 1


def test_continue_on_failure_goes_on_and_the_game_day_still_fails(tmp_path):
    clock = Clock()
    plan = write_plan(tmp_path, [{"experiment": S1, "continue_on_failure": True, "name": "kill one"},
                                 {"experiment": S2}])
    runner = Runner(clock, {"s1-kill-one-replica": (Exit.INVALID, "the room guard refused")})
    day = gameday.run(plan, runner, clock=clock)
    assert statuses(day) == [("step-1", "ran"), ("step-2", "ran")]
    assert day.exit == Exit.FAILED and day.reason == "step-1 (kill one) exit 2: the room guard refused"


@pytest.mark.parametrize("code", [Exit.ABORTED, Exit.REVERT_INCOMPLETE])
def test_an_aborted_or_unreverted_experiment_ends_the_game_day_even_with_continue_on_failure(tmp_path, code):
    clock = Clock()
    plan = write_plan(tmp_path, [{"experiment": S1, "continue_on_failure": True}, {"experiment": S2}])
    day = gameday.run(plan, Runner(clock, {"s1-kill-one-replica": (code, "stop condition fired: zero-ready")}),
                      clock=clock)
    assert day.exit == code and statuses(day)[1] == ("step-2", "skipped")


# --- the window ---------------------------------------------------------------------------------
WEEKDAYS = {"days": ["mon", "tue", "wed", "thu", "fri"], "from": "10:00", "to": "16:00", "timezone": "Asia/Shanghai"}


def test_a_run_that_starts_outside_the_window_starts_nothing(tmp_path):
    clock = Clock(datetime(2025, 6, 7, 11, 0, tzinfo=SHANGHAI))  # a Saturday
    plan = write_plan(tmp_path, [{"experiment": S1}, {"pause": 5}], window=WEEKDAYS)
    runner = Runner(clock)
    day = gameday.run(plan, runner, clock=clock)
    assert runner.calls == [] and day.exit == Exit.ABORTED
    closed = ("outside the window (mon-fri 10:00-16:00 Asia/Shanghai): it is Sat 2025-06-07 11:00 Asia/Shanghai; "
              "it opens next Mon 2025-06-09 10:00 Asia/Shanghai")
    assert [(o.status, o.reason) for o in day.steps] == [(Status.SKIPPED, closed), (Status.SKIPPED, f"step-1 skipped: {closed}")]
    assert day.reason == f"step-1 skipped: {closed}"


def test_the_window_closing_mid_plan_skips_the_rest(tmp_path):
    clock = Clock(datetime(2025, 6, 2, 15, 58, tzinfo=SHANGHAI))
    plan = write_plan(tmp_path, [{"experiment": S1}, {"pause": 5}, {"experiment": S2}], window=WEEKDAYS)
    runner = Runner(clock, takes=150)  # ends at 16:00:30: the experiment that started is not cut short
    day = gameday.run(plan, runner, clock=clock)
    assert statuses(day) == [("step-1", "ran"), ("step-2", "skipped"), ("step-3", "skipped")]
    assert day.steps[1].reason.startswith("outside the window (mon-fri 10:00-16:00 Asia/Shanghai): it is Mon "
                                          "2025-06-02 16:00 Asia/Shanghai; it opens next Tue 2025-06-03 10:00")
    assert day.exit == Exit.ABORTED and len(runner.calls) == 1


def test_not_after_is_checked_before_each_step(tmp_path):
    clock = Clock()
    plan = write_plan(tmp_path, [{"pause": 30}, {"pause": 30}],
                      window={"not_after": (MONDAY_11 + timedelta(seconds=20)).isoformat()})
    day = gameday.run(plan, Runner(clock), clock=clock)
    assert statuses(day) == [("step-1", "paused"), ("step-2", "skipped")]
    assert day.steps[1].reason.endswith("it does not open again")


# --- gates at the terminal ----------------------------------------------------------------------
@pytest.mark.parametrize("typed, status, reason", [
    ("y\n", "approved", "approved by {user} at the terminal"),
    ("YES\n", "approved", "approved by {user} at the terminal"),
    ("n\n", "aborted", "refused by {user} at the terminal (answered 'n')"),
    ("\n", "aborted", "refused by {user} at the terminal (answered '')"),
    ("", "aborted", "refused by nobody: the terminal's input ended"),
])
def test_a_terminal_gate_approves_on_y_and_refuses_on_anything_else(tmp_path, monkeypatch, typed, status, reason):
    monkeypatch.setenv("USER", "ada")
    monkeypatch.setenv("LOGNAME", "ada")
    clock = Clock()
    plan = write_plan(tmp_path, [{"approve": "the dashboard is green", "timeout": 60}, {"experiment": S1}])
    watcher = Watcher()
    day = gameday.run(plan, Runner(clock), read_line=Terminal(clock, [None, None, typed]), clock=clock,
                      observer=watcher)
    assert (str(day.steps[0].status), day.steps[0].reason) == (status, reason.format(user="ada"))
    assert ("say", "step-1 waits for approval: the dashboard is green (answer y or n here; 60 s)") in watcher.seen
    assert clock.now() - MONDAY_11 >= timedelta(seconds=2 * SLICE_SECONDS)
    if status == "approved":
        assert day.exit == Exit.PASSED and day.steps[0].by == "ada at the terminal"
    else:
        assert day.exit == Exit.ABORTED and statuses(day)[1] == ("step-2", "skipped")


def test_a_terminal_gate_unanswered_in_its_timeout_aborts(tmp_path):
    clock = Clock()
    plan = write_plan(tmp_path, [{"approve": "go", "timeout": 12}, {"experiment": S1}])
    runner = Runner(clock)
    day = gameday.run(plan, runner, read_line=Terminal(clock), clock=clock)
    assert (day.steps[0].status, day.steps[0].reason) == (Status.ABORTED, "no answer within 12 s")
    assert day.exit == Exit.ABORTED and runner.calls == []
    assert clock.now() == MONDAY_11 + timedelta(seconds=12)


# --- gates on a ConfigMap -----------------------------------------------------------------------
def configmap_plan(tmp_path, **top):
    return write_plan(tmp_path, [{"experiment": S1}, {"approve": "on-call says go", "timeout": 600, "via": "configmap",
                                                      "configmap": GATES}, {"experiment": S2}], **top)


def test_a_configmap_gate_waits_for_its_own_id_and_says_who(tmp_path):
    clock = Clock()
    plan = configmap_plan(tmp_path)
    maps = ConfigMaps(clock, "gameday-gates")
    maps.change(100, "gameday-gates", {gates.APPROVED: "step-1"})  # another gate's id: not this one
    maps.change(200, "gameday-gates", {gates.APPROVED: "step-2", gates.APPROVED_BY: "grace"})
    day = gameday.run(plan, Runner(clock), kube=maps, clock=clock)
    gate = day.steps[1]
    assert (gate.status, gate.reason) == (Status.APPROVED, "approved by grace via configmap kilocard-system/gameday-gates")
    assert gate.ended_at == MONDAY_11 + timedelta(seconds=200) and day.exit == Exit.PASSED
    assert maps.patches == [
        ("gameday-gates", {"metadata": {"annotations": {gates.WAITING: "step-2", gates.APPROVED: None}}}),
        ("gameday-gates", {"metadata": {"annotations": {gates.WAITING: None}}}),
    ]


def test_an_approval_left_from_before_the_gate_opened_approves_nothing(tmp_path):
    clock = Clock()
    maps = ConfigMaps(clock, "gameday-gates")
    maps.maps["gameday-gates"]["metadata"]["annotations"][gates.APPROVED] = "step-2"  # last week's
    day = gameday.run(configmap_plan(tmp_path), Runner(clock), kube=maps, clock=clock)
    assert (day.steps[1].status, day.steps[1].reason) == (Status.ABORTED, "no answer within 600 s")
    assert day.exit == Exit.ABORTED


def test_a_watch_that_ends_early_is_resumed(tmp_path):
    clock = Clock()
    maps = ConfigMaps(clock, "gameday-gates")
    maps.watch_errors = [KubeError("watch: 410 too old", status=410), KubeError("watch: connection reset")]
    maps.change(80, "gameday-gates", {gates.APPROVED: "step-2"})
    day = gameday.run(configmap_plan(tmp_path), Runner(clock), kube=maps, clock=clock)
    assert day.steps[1].status == Status.APPROVED
    assert day.steps[1].by == "someone (no kilocard.io/approved-by) via configmap kilocard-system/gameday-gates"


def test_a_gate_whose_configmap_is_missing_or_forbidden_aborts(tmp_path):
    clock = Clock()
    day = gameday.run(configmap_plan(tmp_path), Runner(clock), kube=ConfigMaps(clock), clock=clock)
    assert day.steps[1].status == Status.ABORTED
    assert day.steps[1].reason == ("cannot open the gate on configmap kilocard-system/gameday-gates: "
                                   "patch configmap kilocard-system/gameday-gates: 404 not found")
    maps = ConfigMaps(clock, "gameday-gates")
    maps.watch_errors = [KubeError("watch configmap: 403 forbidden", status=403)]
    day = gameday.run(configmap_plan(tmp_path), Runner(clock), kube=maps, clock=clock)
    assert day.steps[1].reason == ("cannot read the gate's configmap kilocard-system/gameday-gates: "
                                   "watch configmap: 403 forbidden")


def test_configmap_gates_need_a_cluster(tmp_path):
    with pytest.raises(SpecError, match="its gates or control are ConfigMaps .*a cluster is needed"):
        gameday.run(configmap_plan(tmp_path), Runner(Clock()))


# --- abort-all ----------------------------------------------------------------------------------
def test_the_switch_thrown_during_a_pause_aborts_it_and_the_rest(tmp_path):
    clock = Clock()
    plan = write_plan(tmp_path, [{"experiment": S1}, {"pause": 600}, {"experiment": S2}], control=CONTROL)
    maps = ConfigMaps(clock, "gameday-control")
    maps.change(60 + 42, "gameday-control", {gates.ABORT: "true"})  # 42 s into the pause
    runner = Runner(clock)
    day = gameday.run(plan, runner, kube=maps, clock=clock)
    thrown = 'abort-all: configmap kilocard-system/gameday-control has kilocard.io/abort: "true"'
    assert [(o.status, o.reason) for o in day.steps] == [
        (Status.RAN, "steady state met before and after the method"), (Status.ABORTED, thrown),
        (Status.SKIPPED, f"step-2 aborted: {thrown}")]
    assert day.steps[1].ended_at == MONDAY_11 + timedelta(seconds=102)  # the watch saw it at once
    assert day.exit == Exit.ABORTED and len(runner.calls) == 1 and clock.slept == []


def test_the_switch_is_checked_while_a_gate_waits(tmp_path):
    clock = Clock()
    maps = ConfigMaps(clock, "gameday-gates", "gameday-control")
    maps.change(60 + 33, "gameday-control", {gates.ABORT: "true"})
    day = gameday.run(configmap_plan(tmp_path, control=CONTROL), Runner(clock), kube=maps, clock=clock)
    assert day.steps[1].status == Status.ABORTED and day.steps[1].reason.startswith("abort-all: ")
    assert day.steps[1].ended_at - MONDAY_11 <= timedelta(seconds=60 + 33 + SLICE_SECONDS)


def test_a_switch_thrown_or_unreadable_before_the_start_starts_nothing(tmp_path):
    clock = Clock()
    plan = write_plan(tmp_path, [{"experiment": S1}], control=CONTROL)
    maps = ConfigMaps(clock, "gameday-control")
    maps.maps["gameday-control"]["metadata"]["annotations"][gates.ABORT] = "true"
    runner = Runner(clock)
    assert gameday.run(plan, runner, kube=maps, clock=clock).exit == Exit.ABORTED and runner.calls == []
    day = gameday.run(plan, runner, kube=ConfigMaps(clock), clock=clock)
    assert day.steps[0].reason == ("the control configmap kilocard-system/gameday-control cannot be read (get "
                                   "configmap kilocard-system/gameday-control: 404 not found): a game day that cannot "
                                   "be stopped from the cluster does not go on")
    assert runner.calls == []


# --- signals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_pause_stops_the_game_day(tmp_path, signum):
    clock = Clock()
    plan = write_plan(tmp_path, [{"pause": 30}, {"experiment": S1}])
    sleep = clock.sleep

    def signalled_sleep(seconds):
        sleep(seconds)
        os.kill(os.getpid(), signum)

    clock.sleep = signalled_sleep
    before = signal.getsignal(signum)
    runner = Runner(clock)
    day = gameday.run(plan, runner, clock=clock)
    name = signal.Signals(signum).name
    assert [(o.status, o.reason) for o in day.steps] == [
        (Status.ABORTED, f"stopped by {name}"), (Status.SKIPPED, f"step-1 aborted: stopped by {name}")]
    assert day.exit == Exit.ABORTED and runner.calls == []
    assert signal.getsignal(signum) is before


def test_a_signal_the_experiments_runner_catches_still_stops_the_game_day(tmp_path):
    """chaoslib catches Ctrl-C and ends its run 'interrupted'; a second Ctrl-C (during its revert)
    must not interrupt anything."""
    clock = Clock()
    plan = write_plan(tmp_path, [{"experiment": S1, "continue_on_failure": True}, {"experiment": S2}])
    raised = []

    def ctrl_c_twice():
        try:
            os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt:
            raised.append("first")
        os.kill(os.getpid(), signal.SIGINT)  # only counted

    runner = Runner(clock, {"s1-kill-one-replica": (Exit.PASSED, "met")}, during=ctrl_c_twice)
    day = gameday.run(plan, runner, clock=clock)
    assert raised == ["first"]
    assert statuses(day) == [("step-1", "ran"), ("step-2", "skipped")]
    assert day.reason == "stopped by SIGINT during step-1" and day.exit == Exit.ABORTED


def test_a_signal_between_steps_is_counted_and_stops_the_next(tmp_path):
    clock = Clock()
    plan = write_plan(tmp_path, [{"experiment": S1}, {"experiment": S2}])

    class Signalling(Watcher):
        def ended(self, outcome):
            super().ended(outcome)
            os.kill(os.getpid(), signal.SIGTERM)  # while the game day keeps its books: nothing is interrupted

    day = gameday.run(plan, Runner(clock), clock=clock, observer=Signalling())
    assert [(o.status, o.reason) for o in day.steps][1] == (Status.SKIPPED, "stopped by SIGTERM")
    assert day.exit == Exit.ABORTED and day.reason == "step-2 skipped: stopped by SIGTERM"


# --- the record ---------------------------------------------------------------------------------
def test_journals_are_kept_and_the_game_days_record_is_json(tmp_path):
    clock = Clock()
    plan = write_plan(tmp_path, [{"experiment": S1, "name": "kill one", "note": "watch TTFT"}, {"pause": 5},
                                 {"approve": "go", "timeout": 30}], window=WEEKDAYS)
    day = gameday.run(plan, Runner(clock), read_line=Terminal(clock, ["y\n"]), clock=clock,
                      journals=tmp_path / "reports")
    kept = day.steps[0].journal
    assert kept == tmp_path / "reports" / "step-1-s1-kill-one-replica-run-1.json"
    assert json.loads(kept.read_text()) == {"kilocard": {"run_id": "run-1", "exit_code": 0}}
    record = json.loads(json.dumps(day.to_json()))
    assert record["exit_code"] == 0 and record["verdict"] == "passed" and record["plan_sha256"] == plan.sha256
    assert record["window"]["describe"] == "mon-fri 10:00-16:00 Asia/Shanghai"
    assert record["steps"][0] == {
        "id": "step-1", "kind": "experiment", "name": "kill one", "describe": f"experiment {S1}", "note": "watch TTFT",
        "status": "ran", "reason": "steady state met before and after the method",
        "started_at": "2025-06-02T11:00:00+08:00", "ended_at": "2025-06-02T11:01:00+08:00", "experiment": S1,
        "vars": [], "run_id": "run-1", "exit_code": 0, "journal": str(kept)}
    assert record["steps"][2]["by"].endswith(" at the terminal")
    written = store.write(tmp_path / "reports", day.file_name, day.to_json())
    assert written.name == "gameday-plan-20250602T030000Z.json"
    assert json.loads(written.read_text()) == record


def test_the_summary_configmap_is_created_then_replaced(tmp_path):
    clock = Clock()
    day = gameday.run(write_plan(tmp_path, [{"pause": 1}]), Runner(clock), clock=clock)
    maps = ConfigMaps(clock, "gameday-weekly-summary")
    store.publish(maps, "kilocard-system", "gameday-weekly-summary", day.to_json())
    namespace, body = maps.created[0]
    assert namespace == "kilocard-system" and body["metadata"]["name"] == "gameday-weekly-summary"
    assert json.loads(body["data"]["gameday.json"])["exit_code"] == 0
    store.publish(maps, "kilocard-system", "gameday-weekly-summary", day.to_json())
    assert maps.patches == [("gameday-weekly-summary", {"data": body["data"]})]


def test_the_view_draws_rows_and_an_end_screen(tmp_path):
    clock = Clock()
    plan = write_plan(tmp_path, [{"experiment": S1}, {"approve": "go", "timeout": 10}])
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    day = gameday.run(plan, Runner(clock, {"s1-kill-one-replica": (Exit.FAILED, "probe 'p' failed: slow")},
                                   ), read_line=Terminal(clock), clock=clock, observer=view.Rows(console, lambda: 0.0))
    console.print(view.summary(day))
    text = out.getvalue()
    assert "step-1  experiment started" in text and "failed (exit 1)" in text and "probe 'p' failed: slow" in text
    assert "kilocard gameday: test game day" in text and "skipped" in text


# --- the two Kube calls, over a fake typed API ---------------------------------------------------
class Reply:
    def __init__(self, chunks=(), data=b""):
        self.chunks, self.data, self.released = list(chunks), data, False

    def stream(self, amt=None, decode_content=False):
        yield from self.chunks

    def release_conn(self):
        self.released = True


class CoreV1:
    def __init__(self, reply):
        self.reply, self.calls = reply, []

    def read_namespaced_config_map(self, name, namespace, **kwargs):
        self.calls.append(("read", name, namespace, kwargs))
        return self.reply

    def list_namespaced_config_map(self, namespace, **kwargs):
        self.calls.append(("list", namespace, kwargs))
        return self.reply


def kube_with(reply):
    from kubernetes import client

    from chaos.kube import Kube

    kube = Kube(client.ApiClient(client.Configuration()))
    kube.core = CoreV1(reply)
    return kube


def test_kube_reads_a_configmap_as_plain_json_on_the_bulk_connection():
    kube = kube_with(Reply())
    asked = []
    kube._get = lambda path, params: asked.append((path, params)) or {"metadata": {"name": "g", "resourceVersion": "7"}}
    assert kube.read_config_map("kilocard-system", "g") == {"metadata": {"name": "g", "resourceVersion": "7"}}
    assert asked == [("/api/v1/namespaces/kilocard-system/configmaps/g", {})] and kube.core.calls == []


def test_kube_watches_one_configmap_by_name_and_reports_an_expired_watch():
    added = json.dumps({"type": "MODIFIED", "object": {"metadata": {"name": "g", "resourceVersion": "8"}}})
    gone = json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                                   "message": "too old resource version: 7 (9)"}})
    reply = Reply([added[:20].encode(), (added[20:] + "\n\n" + gone[:5]).encode(), (gone[5:] + "\n").encode()])
    kube = kube_with(reply)
    asked = []
    kube._raw_lister = lambda path: lambda **kwargs: asked.append((path, kwargs)) or reply  # a plain GET, never typed
    events = kube.watch_config_map("kilocard-system", "g", "7", 5)
    assert next(events) == ("MODIFIED", {"metadata": {"name": "g", "resourceVersion": "8"}})
    with pytest.raises(KubeError) as err:
        next(events)
    assert err.value.status == 410 and str(err.value) == ("watch configmap kilocard-system/g: 410 too old resource "
                                                          "version: 7 (9)")
    assert reply.released
    (path, kwargs), = asked
    assert path == "/api/v1/namespaces/kilocard-system/configmaps" and kwargs == {
        "field_selector": "metadata.name=g", "resource_version": "7", "watch": True, "timeout_seconds": 5,
        "_request_timeout": 35} and kube.core.calls == []


def test_the_game_days_own_page_shows_every_step_its_gate_and_each_verdict_linked(tmp_path, monkeypatch):
    """The page a facilitator shares after the day: steps in order, the pause, who approved the
    gate and when, each experiment's verdict (an expected failure said so) with its report, what
    was skipped and why; `kilocard report` of the game day's journal writes the same page."""
    from chaos import cli, report

    monkeypatch.setenv("USER", "ada")
    monkeypatch.setenv("LOGNAME", "ada")
    golden = Path(__file__).parent / "journals"
    clock = Clock()
    plan = write_plan(tmp_path, [{"experiment": S8}, {"pause": 30, "name": "let the fleet settle"},
                                 {"approve": "the dashboard is green", "timeout": 60},
                                 {"experiment": str(EXPERIMENTS / "s7-kill-every-replica.yaml")},
                                 {"experiment": str(EXPERIMENTS / "s3-ecc-one-tp-member.yaml")}])
    days = {"s8-fragile-placement": "s8", "s7-kill-every-replica": "s7"}  # s3 fails: the rest is skipped

    def run_one(path, _variables):
        clock.advance(60)
        if path.stem not in days:
            return Result(path, "run-failed", Exit.FAILED, "probe 'slo' failed: over 500 ms",
                          {"kilocard": {"run_id": "run-failed", "exit_code": 1}})
        data = json.loads((golden / f"{days[path.stem]}.json").read_text())
        k = data["kilocard"]
        return Result(path, k["run_id"], Exit(k["exit_code"]), k["reason"], data)

    journals = tmp_path / "journals"
    day = gameday.run(plan, run_one, read_line=Terminal(clock, [None, "y"]), clock=clock, journals=journals)
    runs = [report.parse(json.loads(Path(s.journal).read_text()), s.journal) for s in day.steps
            if s.journal and json.loads(Path(s.journal).read_text()).get("experiment")]
    page = report.write_gameday(day.to_json(), runs, tmp_path / "reports", "gameday-test", None).read_text()
    steps = page.split("<h2>Steps</h2>", 1)[1]
    for said in ("exit 0: passed</span> as expected (failed): probe &#x27;replicas-kept-apart&#x27;",
                 "expected exit 1", '<a href="../run-20261201-144703-659e8d/index.html">',
                 "<b>let the fleet settle</b><br>pause 30 s", "approved by ada at the terminal, at 2025-06-02T11:01:35+08:00",
                 "expected exit 3", "exit 1: failed</span> probe &#x27;slo&#x27; failed: over 500 ms"):
        assert said in steps, (said, steps[steps.find("approve"):][:300])
    assert steps.index("replicas-kept-apart") < steps.index("pause 30 s") < steps.index("approved by ada")
    assert (tmp_path / "reports/run-20261201-144703-659e8d/index.html").is_file()  # the link goes somewhere
    assert "<h1>Game day: test game day</h1>" in page and "exit 1: failed" in page.split("<h2>Steps</h2>")[0]
    # From the journals alone, elsewhere: the same page, the step journals found beside the day's.
    written = store.write(journals, day.file_name, day.to_json())
    out = tmp_path / "again"
    monkeypatch.chdir(tmp_path.parent)
    assert cli.main(["report", str(written), "--out", str(out)]) == 0
    again = (out / written.stem / "index.html").read_text()
    assert again.split("<h2>Steps</h2>", 1)[1].split("</table>")[0] == steps.split("</table>")[0]
