"""What a run is doing, live, and what it came to, on one screen.

Events come through chaos.events (its docstring lists the topics).

`Timeline` listens to both and, as a chaoslib RunEventHandler, to the run's activities. On a
terminal it prints a row per event (time since start, what, detail) above a live area: a spinner
over the activities running, with their elapsed time (and timeout), a pause after one with its
time left, and each SLO's worst value against its threshold with the time left in its budget. Not
on a terminal (CI logs) it prints the rows alone, an SLO line when its phase changes (and every
`slo_every` seconds); disabled, nothing. `summary(result)` is the end screen; `progress(...)` a
spinner for a long step.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chaoslib.run import RunEventHandler
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.padding import Padding
from rich.panel import Panel
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from chaos.errors import Exit
from chaos.events import Event, subscribe
from chaos.judgement import replay_symptoms, why
from chaos.run import Result
from chaos.vocabulary import cluster_line

_log = logging.getLogger(__name__)
COLOUR = {Exit.PASSED: "green", Exit.FAILED: "red", Exit.INVALID: "yellow", Exit.ABORTED: "magenta",
          Exit.REVERT_INCOMPLETE: "bold red"}
_FAULT_ROW = {"recorded": ("fault applying", "yellow"), "applied": ("fault applied", "bold red"),
              "failed": ("apply failed", "bold red"), "reverted": ("fault reverted", "green")}
_PHASE_STYLE = {"blind": "dim", "holding": "green", "breached": "red", "unknown": "yellow"}


@dataclass
class _Running:
    kind: str
    name: str
    since: float
    timeout: float | None


class Timeline(RunEventHandler):  # type: ignore[misc]
    """The live view of one run (see the module's doc). Times count from its construction.
    `start()`/`stop()` (or `with`) subscribe it and run the live area; pass it to chaoslib among
    the event handlers, and stop it after the ledger's revert, to show the reverts too."""

    def __init__(self, console: Console | None = None, enabled: bool = True,
                 clock: Callable[[], float] = time.time, slo_every: float = 10.0) -> None:
        self.console = console or Console(highlight=False)
        self.enabled = enabled
        self.clock = clock
        self.slo_every = slo_every
        self.t0 = clock()
        self._lock = threading.Lock()  # the state below; never held while printing (Live takes its own)
        self._running: dict[int, _Running] = {}
        self._pause: tuple[str, float] | None = None  # (after which activity, ends at)
        self._slo: dict[str, tuple[Event, float]] = {}  # indicator -> (last sample, its deadline on our clock)
        self._slo_shown: dict[str, tuple[str, float]] = {}  # indicator -> (phase, when) last printed
        self._faults: dict[str, str] = {}  # fault id -> the state last seen
        self._spinner = Spinner("dots")
        self._live: Live | None = None
        self._unsubscribe: Callable[[], None] | None = None

    def start(self) -> Timeline:
        if self.enabled and self._unsubscribe is None:
            self._unsubscribe = subscribe(self._event)
            if self.console.is_terminal:
                self._live = Live(console=self.console, get_renderable=self._view, refresh_per_second=4,
                                  transient=True)
                self._live.start()
        return self

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __enter__(self) -> Timeline:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # --- chaoslib's events ------------------------------------------------------------------------
    def started(self, experiment: dict[str, Any], journal: dict[str, Any]) -> None:
        self._row("run started", str(experiment.get("title", "")))

    def hypothesis_before_completed(self, experiment: dict[str, Any], state: dict[str, Any] | None,
                                    journal: dict[str, Any]) -> None:
        self._steady("before", state)

    def hypothesis_after_completed(self, experiment: dict[str, Any], state: dict[str, Any] | None,
                                   journal: dict[str, Any]) -> None:
        self._steady("after", state)

    def start_rollbacks(self, experiment: dict[str, Any]) -> None:
        self._row("rollbacks", "started")

    def interrupted(self, experiment: dict[str, Any], journal: dict[str, Any]) -> None:
        self._row("interrupted", "the run was stopped", "magenta")

    def finish(self, journal: dict[str, Any]) -> None:
        deviated = ", deviated" if journal.get("deviated") else ""
        self._row("run ended", f"{journal.get('status', '?')}{deviated}", "red" if deviated else "")

    def start_activity(self, activity: dict[str, Any]) -> None:
        kind, name = activity.get("type", "activity"), activity.get("name", "?")
        with self._lock:
            self._running[id(activity)] = _Running(kind, name, self.clock(), _seconds(activity.get("timeout")))
            self._pause = None
        self._row(f"{kind} started", name + (" (background)" if activity.get("background") else ""))

    def activity_completed(self, activity: dict[str, Any], run: dict[str, Any]) -> None:
        name = activity.get("name", "?")
        pause = _seconds((activity.get("pauses") or {}).get("after"))
        with self._lock:
            self._running.pop(id(activity), None)
            if pause:
                self._pause = (name, self.clock() + pause)
            if activity.get("type") == "probe":  # its SLO samples, if any, are over
                self._slo.clear()
                self._slo_shown.clear()
        self._row(*_outcome(activity, run))
        if pause:
            self._row("pause", f"{pause:g} s after {name}")

    # --- the seam's events ------------------------------------------------------------------------
    def _event(self, event: Event) -> None:
        if event.get("topic") == "fault":
            self._fault(event)
        elif event.get("topic") == "slo":
            self._sample(event)

    def _fault(self, event: Event) -> None:
        state, error = event.get("state", "?"), event.get("error") or ""
        with self._lock:
            before = self._faults.get(event.get("fault_id", ""))
            self._faults[event.get("fault_id", "")] = state
        what, style = _FAULT_ROW.get(state, (f"fault {state}", ""))
        if state == "reverted" and before == "recorded":  # one that leaves nothing to undo (a pod kill)
            what, style, error = "fault applied", "bold red", "nothing to revert"
        elif state == "applied" and error:
            what = "revert failed"
        detail = f"{event.get('kind', '?')} {_target(event.get('target'))}"
        self._row(what, detail + (f" ({error})" if error else ""), style)

    def _sample(self, event: Event) -> None:
        name, phase, now = str(event.get("indicator", "?")), str(event.get("phase", "?")), self.clock()
        with self._lock:
            self._slo[name] = (event, now + float(event.get("left", 0.0)))
            shown = self._slo_shown.get(name)
            show = shown is None or shown[0] != phase or (self._live is None and now - shown[1] >= self.slo_every)
            if show:
                self._slo_shown[name] = (phase, now)
        if show:
            self._row("slo", _slo_text(event, float(event.get("left", 0.0))), _PHASE_STYLE.get(phase, ""))

    # --- output -----------------------------------------------------------------------------------
    def _row(self, what: str, detail: str, style: str = "") -> None:
        if self.enabled:
            line = Text.assemble((_clock(self.clock() - self.t0), "dim"), "  ", (f"{what:<16}", style), " ", detail)
            self.console.print(line, soft_wrap=True)

    def _steady(self, when: str, state: dict[str, Any] | None) -> None:
        if state is not None and state.get("steady_state_met"):
            self._row(f"steady {when}", "met", "green")
        else:
            off = [(p.get("activity") or {}).get("name", "?") for p in (state or {}).get("probes") or []
                   if not p.get("tolerance_met")]
            self._row(f"steady {when}", "not met" + (f": {', '.join(off)}" if off else ""), "red")

    def _view(self) -> RenderableType:
        """The live area (Live's refresh thread)."""
        now = self.clock()
        with self._lock:
            running, pause, slos = list(self._running.values()), self._pause, list(self._slo.values())
        lines = [Text(f"{_clock(now - self.t0)} since start", style="dim")]
        for a in running:
            limit = f" of {a.timeout:g} s" if a.timeout else ""
            lines.append(Text(f"{a.kind} {a.name}: {now - a.since:.0f} s{limit}"))
        if pause is not None and pause[1] > now:
            lines.append(Text(f"pause after {pause[0]}: {math.ceil(pause[1] - now)} s left"))
        for event, due in slos:
            lines.append(Text(f"SLO {_slo_text(event, due - now)}", style=_PHASE_STYLE.get(event.get("phase"), "")))
        self._spinner.update(text=Group(*lines))
        return self._spinner


def _clock(seconds: float) -> str:
    minutes, tenths = divmod(round(max(seconds, 0.0) * 10), 600)
    return f"{minutes:02d}:{tenths / 10:04.1f}"


def _target(target: Any) -> str:
    return " ".join(f"{k}={v}" for k, v in (target or {}).items())


def _seconds(value: Any) -> float | None:
    """A positive number of seconds, else None (a pause may still be an unsubstituted ${var})."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value) if float(value) > 0 else None
    except ValueError:
        return None


def _slo_text(event: Event, left: float) -> str:
    worst, threshold = event.get("worst"), event.get("threshold", 0.0)
    if event.get("error"):
        value = f"query failed (threshold {threshold:g})"
    elif not worst:
        value = f"no series (threshold {threshold:g})"
    else:
        value = f"{worst[0]} {worst[1]:.3f} {'>' if worst[1] > threshold else '<='} {threshold:g}"
    return f"{event.get('indicator', '?')}: {value}, {event.get('phase', '?')}, {max(math.ceil(left), 0)} s left"


def _verdict(run: Mapping[str, Any]) -> str:
    output = run.get("output")
    if isinstance(output, dict) and output.get("verdict"):
        return str(output["verdict"])
    if "tolerance_met" in run:
        return "ok" if run["tolerance_met"] else "failed"
    return str(run.get("status", "errored"))  # it raised past chaoslib: the run aborts


def _outcome(activity: Mapping[str, Any], run: Mapping[str, Any]) -> tuple[str, str, str]:
    """(what, detail, style) of a finished activity."""
    kind, name = activity.get("type", "activity"), activity.get("name", "?")
    took = f" ({run['duration']:.1f} s)" if isinstance(run.get("duration"), int | float) else ""
    verdict, reason = _verdict(run), why(run)
    if kind == "probe" and not reason and run.get("output") is not None:
        reason = f"output {json.dumps(run['output'], default=str)[:80]}"
    style = "green" if verdict == "ok" else "red" if verdict == "failed" else ""
    return f"{kind} {verdict}", name + (f": {reason}" if reason else "") + took, style


# --- the end screen --------------------------------------------------------------------------------
WIDE = 100  # columns from which a table keeps its reason in a column of its own


class Reasoned:
    """A table whose last column is a reason, a line or a paragraph. Where there is room (WIDE
    columns) it is a column; on a narrower screen and in a CI log (80 columns, no terminal) each
    row's reason goes on its own lines under the row, the whole width long, rather than wrapped to
    a column 16 characters wide."""

    def __init__(self, *headers: str, title: str | None = None) -> None:
        self.headers, self.title = headers, title
        self.rows: list[tuple[tuple[Text | str, ...], Text]] = []

    def add_row(self, *cells: Text | str, reason: Text | str) -> None:
        self.rows.append((cells, reason if isinstance(reason, Text) else Text(reason)))

    def __rich_console__(self, console: Console, options: Any) -> Iterator[RenderableType]:
        if options.max_width >= WIDE:
            table = Table(*self.headers, "reason", box=box.SIMPLE, title=self.title, title_justify="left")
            for cells, reason in self.rows:
                table.add_row(*cells, reason)
            yield table
            return
        texts = [[c if isinstance(c, Text) else Text(c) for c in cells] for cells, _ in self.rows]
        widths = [max([len(h), *(len(row[i].plain) for row in texts)]) for i, h in enumerate(self.headers)]
        if self.title:
            yield Text(self.title, style="italic")
        yield Text("  ".join(h.ljust(w) for h, w in zip(self.headers, widths, strict=True)).rstrip(), style="bold")
        for row, (_cells, reason) in zip(texts, self.rows, strict=True):
            line = Text()
            for i, (cell, width) in enumerate(zip(row, widths, strict=True)):
                line.append_text(cell)
                if i < len(row) - 1:
                    line.append(" " * (width - len(cell.plain) + 2))
            yield line
            if reason.plain:
                yield Padding(reason, (0, 0, 0, 4))
def summary(result: Result) -> RenderableType:
    """One screen: the verdict and exit code, each probe (and failed activity) with its verdict and
    reason, the faults with when they were applied and reverted (seconds from the run's start), and
    the recovery phases when the journal has them."""
    journal, kilocard = result.journal, result.journal.get("kilocard") or {}
    parts: list[RenderableType] = [Text.assemble(
        (f"{result.exit.name.lower()}", f"bold {COLOUR[result.exit]}"), f" (exit {int(result.exit)}): ",
        result.reason)]
    if kilocard.get("cluster"):
        parts.append(Text(f"cluster: {cluster_line(kilocard['cluster'])}"))
    probes = Reasoned("stage", "activity", "verdict", title="probes")
    for stage, run in _activities(journal):
        activity = run.get("activity") or {}
        if activity.get("type") == "probe" or run.get("status") == "failed":
            verdict = _verdict(run)
            probes.add_row(stage, Text(activity.get("name", "?")),
                           Text(verdict, style="green" if verdict == "ok" else "red"), reason=why(run))
    if probes.rows:
        parts.append(probes)
    start = _epoch(journal.get("start"))
    faults = Table("fault", "target", "state", "applied", "reverted", box=box.SIMPLE, title="faults",
                   title_justify="left")
    for f in sorted(kilocard.get("faults") or [], key=lambda f: f.get("applied_at") or 0):
        reverted = _epoch(f.get("at")) if f.get("state") == "reverted" else None
        faults.add_row(Text(f.get("kind", "?")), Text(_target(f.get("target"))),
                       Text(f.get("state", "?") + (f": {f['error']}" if f.get("error") else "")),
                       _since(f.get("applied_at") or None, start), _since(reverted, start))
    if faults.rows:
        parts.append(faults)
    judged = replay_symptoms(journal.get("run") or [])
    if judged is not None:
        table = Table("symptom", "recorded", "observed", "judgement", box=box.SIMPLE,
                      title=f"incident: {judged['reason']}", title_justify="left")
        for row in judged.get("symptoms") or []:  # each row's why is in the journal and the report
            style = {"ok": "green", "failed": "red", "unknown": "yellow"}.get(row["judgement"], "dim")
            table.add_row(Text(row["symptom"]), Text(row["recorded"]), Text(row["observed"]),
                          Text(row["judgement"], style=style))
        parts.append(table)
    recovery = kilocard.get("recovery") or []
    if recovery:
        columns = list(dict.fromkeys(k for phase in recovery for k in phase))
        table = Table(*columns, box=box.SIMPLE, title="recovery (seconds after the fault)", title_justify="left")
        for phase in recovery:
            table.add_row(*(Text(_cell(phase.get(c))) for c in columns))
        parts.append(table)
    title = " ".join(p for p in ("kilocard run", result.run_id, result.path.name) if p)
    return Panel(Group(*parts), title=Text(title), title_align="left", border_style=COLOUR[result.exit])


def _activities(journal: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    states = journal.get("steady_states") or {}
    yield from (("before", p) for p in (states.get("before") or {}).get("probes") or [])
    yield from (("method", r) for r in journal.get("run") or [])
    yield from (("after", p) for p in (states.get("after") or {}).get("probes") or [])
    yield from (("rollback", r) for r in journal.get("rollbacks") or [])


def _epoch(text: Any) -> float | None:
    """An ISO time (chaoslib's, or the ledger's ...Z) in epoch seconds."""
    try:
        return datetime.fromisoformat(text).timestamp() if isinstance(text, str) else None
    except ValueError:
        return None


def _since(epoch: float | None, start: float | None) -> str:
    if epoch is None:
        return "-"
    return f"+{epoch - start:.1f} s" if start is not None else time.strftime("%H:%M:%SZ", time.gmtime(epoch))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


# --- a long step -----------------------------------------------------------------------------------
@contextmanager
def progress(description: str, console: Console | None = None) -> Iterator[Callable[[str], None]]:
    """A long step (starting the testbed, waiting for a recovery): a spinner with the elapsed time on
    a terminal, else a line as it starts; a line when it ends, with its time. Yields `update(text)`:
    what the step is at now (not on a terminal, a line each). Not inside a started Timeline: rich
    runs one live display at a time."""
    console = console or Console(highlight=False)
    started = time.monotonic()
    try:
        if console.is_terminal:
            with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                          transient=True) as bar:
                task = bar.add_task(description, total=None)
                yield lambda text: bar.update(task, description=f"{description}: {text}")
        else:
            console.print(f"{description} ...", soft_wrap=True, markup=False)
            yield lambda text: console.print(f"{description}: {text}", soft_wrap=True, markup=False)
    except BaseException:
        console.print(f"{description}: failed after {time.monotonic() - started:.1f} s", style="red", soft_wrap=True,
                      markup=False)
        raise
    console.print(f"{description}: done in {time.monotonic() - started:.1f} s", soft_wrap=True, markup=False)
