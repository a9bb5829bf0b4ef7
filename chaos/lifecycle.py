"""The apply-hold-revert loop every runner shares: `kilocard fault` (`run`), a replay's timeline
(chaos.replay.play) and, through `revert.recover`, the experiment runner's revert. It knows no
fault kinds.

    1. a schedule of windows: each fault applied `at` seconds from the start (planned when its
       time comes) and reverted at `until` (None: left to the end)
    2. `next_step`, a pure function of the clock and what is done, says what comes next: apply,
       revert, wait, or end (the last window over and `observe` seconds watched after it, or a stop)
    3. always (finally, in `run`): revert every record the ledger still has open for this run, so
       what is reverted is what was written down, not what this process happens to remember

`next_step` is the one decision, so `kilocard fault`, a replay and a game day agree on when a
fault should be in place.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal

from chaos import ledger, revert
from chaos.errors import KilocardError
from chaos.faults import Context
from chaos.plan import Plan, Planned, execute_one
from chaos.vocabulary import describe_target


@dataclass(frozen=True)
class Window:
    """One fault's time in a schedule, in seconds from its start."""

    at: float
    until: float | None  # reverted then (at once if its apply returns later); None: at the end
    planned: Callable[[], Planned]  # its plan, made when its time comes (the cluster moves on)


@dataclass(frozen=True)
class Step:
    what: Literal["apply", "revert", "wait", "end"]
    window: int = -1  # which window is applied or reverted
    seconds: float = 0.0  # how long to wait


def next_step(now: float, windows: Sequence[Window], applied: Collection[int], reverted: Collection[int],
              last_applied: float, observe: float, stopping: bool) -> Step:
    """What to do `now` (seconds from the start): end at once on a stop; revert a window whose
    time is up (the earliest first); apply the next window due (by `at`, then by position); else
    wait for whichever comes first. The schedule ends `observe` seconds after the last window's
    end or the last apply's return (`last_applied`), whichever is later."""
    if stopping:
        return Step("end")
    due = [i for i in applied if i not in reverted and (until := windows[i].until) is not None and until <= now]
    if due:
        return Step("revert", min(due, key=lambda i: (windows[i].until, i)))
    pending = [i for i in range(len(windows)) if i not in applied]
    if pending:
        first = min(pending, key=lambda i: (windows[i].at, i))
        if windows[first].at <= now:
            return Step("apply", first)
        wake = windows[first].at
    else:
        wake = max([last_applied, *(w.at if w.until is None else w.until for w in windows)]) + observe
        if now >= wake:
            return Step("end")
    untils = [u for i in applied if i not in reverted and (u := windows[i].until) is not None]
    return Step("wait", seconds=min([wake, *untils]) - now)


@dataclass
class Schedule:
    """What a drive has done: the faults applied (by window), which were reverted, and when."""

    started: float  # the clock's reading at the start: offsets count from here
    step_at: float = 0.0  # seconds from the start when the current step began
    applied: dict[int, Planned] = field(default_factory=dict)
    reverted: set[int] = field(default_factory=set)
    last_applied: float = 0.0


Applied = Callable[[int, Planned, Schedule], None]  # (window, its fault as executed, the schedule)
Reverted = Callable[[int, list[ledger.Record], Schedule], None]  # (window, its records left open, the schedule)


def drive(ctx: Context, book: ledger.Ledger, windows: Sequence[Window], observe: float, applied: Applied,
          reverted: Reverted | None = None, clock: Callable[[], float] = time.time) -> Schedule:
    """Play `windows` as `next_step` says, until it ends (a stop ends it early: what is left
    unapplied is never applied). `applied` and `reverted` hear each step and may raise to end it."""
    done = Schedule(clock())
    while True:
        done.step_at = clock() - done.started
        step = next_step(done.step_at, windows, done.applied, done.reverted, done.last_applied, observe,
                         ctx.stop.is_set())
        if step.what == "end":
            return done
        if step.what == "apply":
            fault = done.applied[step.window] = execute_one(ctx, book, windows[step.window].planned())
            done.last_applied = clock() - done.started
            applied(step.window, fault, done)
        elif step.what == "revert":
            done.reverted.add(step.window)
            left = revert.revert(ctx, book, done.applied[step.window].records)
            if reverted is not None:
                reverted(step.window, left, done)
        else:
            # In slices: a SIGTERM the kernel hands to another thread only sets `stop` once this
            # thread runs Python again (a blocked wait is not interrupted), so wake every second.
            ctx.stop.wait(min(1.0, max(0.0, step.seconds)))


@dataclass
class Outcome:
    plan: Plan
    left: list[ledger.Record] = field(default_factory=list)  # still open after the revert
    skipped: list[Planned] = field(default_factory=list)  # never applied: a stop came first
    error: KilocardError | None = None  # what ended the run early (a ledger write that failed)

    @property
    def failed(self) -> list[ledger.Record]:
        return [r for f in self.plan.faults for r in f.failed]


def line(record: ledger.Record) -> str:
    error = f" ({record.error})" if record.error else ""
    seen = record.landed
    landed = f"; landed: {seen['status']} ({seen['evidence']})" if seen else ""
    return f"{record.run_id} {record.kind} {describe_target(record.target)}: {record.state}{error}{landed}"


def run(ctx: Context, book: ledger.Ledger, plan: Plan, duration: float,
        clock: Callable[[], float] = time.time) -> Outcome:
    """`kilocard fault`: apply the plan's faults in order, hold them for `duration` seconds once
    all are in place (or until `ctx.stop` is set), revert from the ledger. A stop before every
    fault is applied skips the rest (`skipped`)."""
    outcome = Outcome(plan)
    windows = [Window(0.0, None, _given(fault)) for fault in plan.faults]  # planned already: all checked first

    def applied(i: int, fault: Planned, _done: Schedule) -> None:
        for record in fault.records:
            ctx.say(line(record))
        if fault.unlanded:  # holding a fault that is not there tests nothing
            raise KilocardError(f"{fault.where}: {fault.problems()}")
        if i == len(windows) - 1 and duration > 0 and not ctx.stop.is_set():
            ctx.say(f"{plan.run_id}: holding for {duration:g} s (Ctrl-C reverts now)")

    done = None
    try:
        done = drive(ctx, book, windows, duration, applied, clock=clock)
    except KilocardError as exc:
        outcome.error = exc  # reverted below all the same; the caller reports it
    finally:
        _reverted, outcome.left = revert.recover(ctx, book.dir if book.on_disk else None, plan.run_id)
    if done is not None:
        outcome.skipped = [f for i, f in enumerate(plan.faults) if i not in done.applied]
    return outcome


def _given(fault: Planned) -> Callable[[], Planned]:
    return lambda: fault
