"""The apply-hold-revert loop that every runner shares (`kilocard fault` now; the experiment
runner, game days and replay after it). It knows no fault kinds.

    1. for each planned fault, while the desired phase is "injected": execute it (ledger first)
    2. hold while the desired phase is "injected" (a stop request or the duration ends it)
    3. always (finally): revert every record the ledger still has open for this run, so what is
       reverted is what was written down, not what this process happens to remember

`desired_phase` is the one decision, a pure function of the clock, so the runner, a game day
and a replay agree on when a fault should be in place.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from chaos import ledger, revert
from chaos.errors import KilocardError
from chaos.faults import Context
from chaos.plan import Plan, Planned, execute_one

Phase = Literal["injected", "recovered"]


def desired_phase(now: float, held_since: float | None, duration: float, stopping: bool) -> Phase:
    """Where the faults should be: injected until `duration` seconds after they were all in place
    (`held_since`; None while still applying), recovered once stopping or the time is up."""
    if stopping:
        return "recovered"
    if held_since is None:
        return "injected"
    return "injected" if now < held_since + duration else "recovered"


@dataclass
class Outcome:
    plan: Plan
    held_since: float | None = None
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
    return f"{record.run_id} {record.kind} {json.dumps(record.target)}: {record.state}{error}{landed}"


def run(ctx: Context, book: ledger.Ledger, plan: Plan, duration: float,
        clock: Callable[[], float] = time.time) -> Outcome:
    """Apply the plan, hold it for `duration` seconds (or until `ctx.stop` is set), revert from the
    ledger. A stop before every fault is applied skips the rest (`skipped`)."""
    outcome, stop = Outcome(plan), ctx.stop
    try:
        for i, fault in enumerate(plan.faults):
            if desired_phase(clock(), None, duration, stop.is_set()) == "recovered":
                outcome.skipped = plan.faults[i:]
                return outcome
            execute_one(ctx, book, fault)
            for record in fault.records:
                ctx.say(line(record))
            if fault.unlanded:  # holding a fault that is not there tests nothing
                raise KilocardError(f"{fault.where}: {fault.problems()}")
        outcome.held_since = clock()
        if desired_phase(clock(), outcome.held_since, duration, stop.is_set()) == "injected" and duration > 0:
            ctx.say(f"{plan.run_id}: holding for {duration:g} s (Ctrl-C reverts now)")
        while desired_phase(clock(), outcome.held_since, duration, stop.is_set()) == "injected":
            # In slices: a SIGTERM the kernel hands to another thread only sets `stop` once this
            # thread runs Python again (a blocked wait is not interrupted), so wake every second.
            stop.wait(min(1.0, max(0.0, outcome.held_since + duration - clock())))
    except KilocardError as exc:
        outcome.error = exc  # reverted below all the same; the caller reports it
    finally:
        still_open = ledger.open_records(ctx.kube, book.dir if book.on_disk else None, plan.run_id)
        outcome.left = revert.revert(ctx, book, still_open)
    return outcome
