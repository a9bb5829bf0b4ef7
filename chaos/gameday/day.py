"""Running a game day: its steps in order, each started only inside the window and while nobody
has said stop. Pure orchestration: an experiment is run by the injected `run_one` (the strict
runner, which reverts its own faults), time comes from the injected `clock`, a terminal answer
from `read_line`; the only cluster calls are the ConfigMap gates' and the abort-all switch's.

Before each step: the window (outside it, this step and the rest are skipped), the abort-all
switch, and Ctrl-C/SIGTERM. While a pause or a gate waits: the switch, between slices of at most
SLICE_SECONDS, and the signals. After an experiment, by its exit code:

    0            go on
    1, 2         failed (2: it refused to start, a guard or a selector): the rest is skipped unless
                 the step says continue_on_failure; the game day exits 1 either way
    3            aborted (a stop condition, a signal): the rest is skipped, the game day exits 3
    4            faults still in place: the rest is skipped, the game day exits 4 (kilocard recover)

A gate refused or unanswered in its timeout aborts the game day (3). The game day's exit is the
worst of its steps': 0 passed, 1 an experiment failed, 3 aborted, 4 revert incomplete; invalid
input (2) is refused by chaos.gameday.plan.load before anything starts.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import singledispatchmethod
from pathlib import Path
from typing import Any, Protocol

from chaos import __version__
from chaos.errors import Aborted, Exit, SpecError
from chaos.gameday import gates, store
from chaos.gameday.plan import ApproveStep, ExperimentStep, PauseStep, Plan, Step
from chaos.run import Result

SLICE_SECONDS = 5.0  # the longest a pause or a gate waits without looking at the abort-all switch
RunOne = Callable[[Path, list[str]], Result]  # (experiment file, --var strings) -> the strict runner's result


class Clock(Protocol):
    def now(self) -> datetime:
        """Now, with a time zone."""
        ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class Observer(Protocol):
    """Who watches a game day as it goes (chaos.gameday.view draws it)."""

    def started(self, step: Step) -> None: ...

    def ended(self, outcome: Outcome) -> None: ...

    def say(self, text: str) -> None:
        """A line for the facilitator: what a gate waits for and how to answer it."""
        ...


class Quiet:
    def started(self, step: Step) -> None:
        pass

    def ended(self, outcome: Outcome) -> None:
        pass

    def say(self, text: str) -> None:
        pass


class Status(StrEnum):
    RAN = "ran"  # an experiment; its exit says how it went
    PAUSED = "paused"
    APPROVED = "approved"
    SKIPPED = "skipped"  # never started
    ABORTED = "aborted"  # started, and stopped: a gate refused or unanswered, abort-all, a signal


@dataclass(frozen=True)
class Outcome:
    step: Step
    status: Status
    reason: str  # why, in a line
    started_at: datetime | None = None
    ended_at: datetime | None = None
    exit: Exit | None = None  # an experiment's
    run_id: str = ""
    journal: Path | None = None
    by: str = ""  # who answered a gate, and how

    def to_json(self) -> dict[str, Any]:
        step = self.step
        found: dict[str, Any] = {"id": step.id, "kind": step.kind, "name": step.name, "describe": step.describe(),
                                 "note": step.note, "status": str(self.status), "reason": self.reason,
                                 "started_at": _iso(self.started_at), "ended_at": _iso(self.ended_at)}
        if isinstance(step, ExperimentStep):
            found.update(experiment=str(step.path), vars=list(step.variables), run_id=self.run_id,
                         exit_code=None if self.exit is None else int(self.exit),
                         journal=None if self.journal is None else str(self.journal))
        if isinstance(step, ApproveStep):
            found["by"] = self.by
        return found


@dataclass(frozen=True)
class GameDay:
    plan: Plan
    started_at: datetime
    ended_at: datetime
    exit: Exit
    reason: str
    steps: tuple[Outcome, ...]

    @property
    def file_name(self) -> str:
        """Its journal's: gameday-<plan file's stem>-<start, UTC>.json."""
        return f"gameday-{self.plan.path.stem}-{self.started_at.astimezone(UTC):%Y%m%dT%H%M%SZ}.json"

    def to_json(self) -> dict[str, Any]:
        plan = self.plan
        return {"title": plan.title, "description": plan.description, "notes": plan.notes,
                "plan_file": str(plan.path), "plan_sha256": plan.sha256, "kilocard_version": __version__,
                "window": plan.window.to_json() if plan.window else None,
                "control": str(plan.control) if plan.control else None,
                "started_at": _iso(self.started_at), "ended_at": _iso(self.ended_at),
                "exit_code": int(self.exit), "verdict": self.exit.name.lower(), "reason": self.reason,
                "steps": [o.to_json() for o in self.steps]}


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat(timespec="seconds")


def run(plan: Plan, run_one: RunOne, *, kube: gates.ConfigMaps | None = None,
        read_line: gates.ReadLine = gates.stdin_line, clock: Clock | None = None, observer: Observer | None = None,
        journals: Path | None = None) -> GameDay:
    """Run a loaded plan (see the module's doc). `kube` answers the ConfigMap gates and the control;
    `journals`: a folder for each experiment's journal (the game day's own is `store.write`'s)."""
    if plan.config_maps and kube is None:
        raise SpecError(f"{plan.path}: its gates or control are ConfigMaps ({', '.join(map(str, plan.config_maps))})"
                        ": a cluster is needed")
    return _Day(plan, run_one, kube, read_line, clock or SystemClock(), observer or Quiet(), journals).run()


class _Day:
    def __init__(self, plan: Plan, run_one: RunOne, kube: gates.ConfigMaps | None, read_line: gates.ReadLine,
                 clock: Clock, observer: Observer, journals: Path | None) -> None:
        self.plan, self.run_one, self.kube, self.read_line = plan, run_one, kube, read_line
        self.clock, self.observer, self.journals = clock, observer, journals
        self.control = gates.Control(kube, plan.control) if kube is not None and plan.control else None
        self.signalled = ""  # the name of the signal that stopped the game day
        self._in_step = False  # a signal interrupts a step; between steps it is only counted

    def run(self) -> GameDay:
        started = self.clock.now()
        outcomes: list[Outcome] = []
        verdicts: list[tuple[Exit, str]] = []
        stopped = ""  # once set, why the rest is skipped
        with self._signals():
            for step in self.plan.steps:
                if stopped:
                    outcome = Outcome(step, Status.SKIPPED, stopped)
                else:
                    outcome = self._step(step)
                    code, reason, go_on = _consequence(outcome)
                    if self.signalled and go_on:  # a signal the experiment's runner caught and ended it on
                        code, reason, go_on = Exit.ABORTED, f"stopped by {self.signalled} during {step.id}", False
                    verdicts.append((code, reason))
                    stopped = "" if go_on else reason
                outcomes.append(outcome)
                self.observer.ended(outcome)
        worst = max((code for code, _ in verdicts), default=Exit.PASSED)
        reason = next((r for code, r in verdicts if code == worst and r), _passed(outcomes))
        return GameDay(self.plan, started, self.clock.now(), worst, reason, tuple(outcomes))

    def _step(self, step: Step) -> Outcome:
        started: datetime | None = None
        try:
            with self._interruptible():
                self._may_start()
                started = self.clock.now()
                self.observer.started(step)
                return self._take(step, started)
        except Aborted as exc:
            reason = str(exc)
        except KeyboardInterrupt:
            # From our own handler (a pause, a gate) or out of the experiment's runner, which has
            # reverted its faults on the way out.
            reason = f"stopped by {self.signalled}" if self.signalled else "interrupted"
        if started is None:
            return Outcome(step, Status.SKIPPED, reason)
        return Outcome(step, Status.ABORTED, reason, started, self.clock.now())

    def _may_start(self) -> None:
        if self.signalled:
            raise Aborted(f"stopped by {self.signalled}")
        closed = self.plan.window.closed(self.clock.now()) if self.plan.window else None
        if closed:
            raise Aborted(closed)
        self._check_switch()

    def _check_switch(self) -> None:
        said = self.control.aborted() if self.control else None
        if said:
            raise Aborted(said)

    @singledispatchmethod
    def _take(self, step: Step, started: datetime) -> Outcome:
        raise TypeError(f"no way to take a {type(step).__name__}")

    @_take.register
    def _experiment(self, step: ExperimentStep, started: datetime) -> Outcome:
        result = self.run_one(step.path, list(step.variables))
        kept = store.save_experiment(self.journals, step.id, result) if self.journals else None
        return Outcome(step, Status.RAN, result.reason, started, self.clock.now(), exit=result.exit,
                       run_id=result.run_id, journal=kept)

    @_take.register
    def _pause(self, step: PauseStep, started: datetime) -> Outcome:
        self._wait(started + timedelta(seconds=step.seconds), self._idle)
        return Outcome(step, Status.PAUSED, f"paused {step.seconds:g} s", started, self.clock.now())

    @_take.register
    def _approve(self, step: ApproveStep, started: datetime) -> Outcome:
        self.observer.say(f"{step.id} waits for approval: {step.what} ({gates.instructions(step)}; "
                          f"{step.timeout:g} s)")
        with self._gate(step) as listen:
            answer = self._wait(started + timedelta(seconds=step.timeout), listen)
        ended = self.clock.now()
        if answer is None:
            return Outcome(step, Status.ABORTED, f"no answer within {step.timeout:g} s", started, ended)
        if not answer.approved:
            return Outcome(step, Status.ABORTED, f"refused by {answer.by}", started, ended, by=answer.by)
        return Outcome(step, Status.APPROVED, f"approved by {answer.by}", started, ended, by=answer.by)

    def _gate(self, step: ApproveStep) -> AbstractContextManager[gates.Listen]:
        if step.via == "configmap":
            assert self.kube is not None  # run() refuses a plan with ConfigMap gates and no cluster
            return gates.config_map(self.kube, step)
        return gates.terminal(self.read_line)

    def _idle(self, seconds: float) -> None:
        """A pause's slice: watching the switch if there is one."""
        if self.control:
            self.control.wait(seconds)
        else:
            self.clock.sleep(seconds)

    def _wait(self, until: datetime, listen: Callable[[float], gates.Answer | None]) -> gates.Answer | None:
        """Listen in slices until `until`; the answer, or None when the time is up. Raises Aborted
        when the switch is thrown."""
        while (left := (until - self.clock.now()).total_seconds()) > 0:
            self._check_switch()
            answer = listen(min(left, SLICE_SECONDS))
            if answer is not None:
                return answer
        return None

    @contextmanager
    def _interruptible(self) -> Iterator[None]:
        self._in_step = True
        try:
            yield
        finally:
            self._in_step = False

    @contextmanager
    def _signals(self) -> Iterator[None]:
        """Ctrl-C and SIGTERM stop the game day. The first one interrupts the step in progress (as
        Ctrl-C does); later ones only count, so they never cut short the runner's revert."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def stop(signum: int, _frame: Any) -> None:
            first = not self.signalled
            self.signalled = self.signalled or signal.Signals(signum).name
            if first and self._in_step:
                raise KeyboardInterrupt

        previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


def _consequence(outcome: Outcome) -> tuple[Exit, str, bool]:
    """What a step's outcome means for the game day: (its exit, why, whether the rest goes on)."""
    step, code = outcome.step, outcome.exit
    if outcome.status in (Status.SKIPPED, Status.ABORTED):
        return Exit.ABORTED, f"{step.id} {outcome.status}: {outcome.reason}", False
    if outcome.status != Status.RAN or code is None or code == Exit.PASSED:
        return Exit.PASSED, "", True
    said = f"{step.id} ({step.label}) exit {int(code)}: {outcome.reason}"
    if code in (Exit.FAILED, Exit.INVALID):
        keep_going = isinstance(step, ExperimentStep) and step.continue_on_failure
        return Exit.FAILED, said, keep_going
    return code, said, False


def _passed(outcomes: list[Outcome]) -> str:
    ran = sum(o.status == Status.RAN for o in outcomes)
    return f"every step done: {ran} experiment(s) passed"
