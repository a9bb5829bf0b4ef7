"""A game day on the terminal: a row as each step starts and ends, the lines a gate says, and the
end screen. Rows rather than a live area: each experiment draws its own live timeline
(chaos.timeline), and rich runs one live display at a time."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from chaos.gameday.day import GameDay, Outcome, Status
from chaos.gameday.plan import Step
from chaos.timeline import COLOUR, Reasoned

_STYLE = {Status.RAN: "", Status.PAUSED: "", Status.APPROVED: "green", Status.SKIPPED: "dim", Status.ABORTED: "magenta"}


def _style(outcome: Outcome) -> str:
    if outcome.status == Status.RAN and outcome.exit is not None:
        return COLOUR[outcome.exit]
    return _STYLE[outcome.status]


def _status(outcome: Outcome) -> str:
    if outcome.status == Status.RAN and outcome.exit is not None:
        return f"{outcome.exit.name.lower()} (exit {int(outcome.exit)})"
    return str(outcome.status)


class Rows:
    """The chaos.gameday.day.Observer for a person: times from its construction."""

    def __init__(self, console: Console | None = None, clock: Callable[[], float] = time.time) -> None:
        self.console = console or Console(highlight=False)
        self.clock = clock
        self.t0 = clock()

    def _row(self, step: str, what: str, detail: str, style: str = "") -> None:
        minutes, seconds = divmod(int(max(self.clock() - self.t0, 0)), 60)
        self.console.print(Text.assemble((f"{minutes:03d}:{seconds:02d}", "dim"), "  ", (f"{step:<8}", "bold"),
                                         (f"{what:<22}", style), " ", detail), soft_wrap=True)

    def started(self, step: Step) -> None:
        self._row(step.id, f"{step.kind} started", step.label + (f"  [{step.note}]" if step.note else ""))

    def ended(self, outcome: Outcome) -> None:
        self._row(outcome.step.id, _status(outcome), outcome.reason, _style(outcome))

    def say(self, text: str) -> None:
        self._row("", "", text, "yellow")


def summary(day: GameDay) -> RenderableType:
    """One screen: the verdict, then each step with its status, reason and journal."""
    table = Reasoned("step", "what", "status")
    for outcome in day.steps:
        table.add_row(outcome.step.id, Text(outcome.step.label), Text(_status(outcome), style=_style(outcome)),
                      reason=outcome.reason + (f"\njournal {outcome.journal}" if outcome.journal else ""))
    took = (day.ended_at - day.started_at).total_seconds()
    verdict = Text.assemble((day.exit.name.lower(), f"bold {COLOUR[day.exit]}"), f" (exit {int(day.exit)}) in "
                            f"{took:.0f} s: ", day.reason)
    return Panel(Group(verdict, table), title=Text(f"kilocard gameday: {day.plan.title}"), title_align="left",
                 border_style=COLOUR[day.exit])
