"""Time zero: when a budgeted verdict's clock starts (docs/verdicts.md).

The run's disruptions are its faults, from its ledger (each applied at a known time, on a known
target), and every action of another driver that ended before the probe (chaostoolkit-kubernetes'
terminate_pods, a process, an HTTP call: kilocard cannot tell what it touched, so each counts, from
its end: what it did is in place, and caught up with, by then). A budget from the run's first
disruption starts at the earliest of them; one from its last, at the latest; with none, at the
probe's explicit `since` (epoch seconds). So a budget never starts after a disruption it times: a
kilocard fault applied 20 s after another driver's kill does not restart the kill's recovery
clock, and the reason names what the clock started from.

The actions are told here as they end: by the strict runner (an event handler, chaos.run), or,
under plain `chaos run`, by this module declared as a control:

    controls: [{name: time-zero, provider: {type: python, module: chaos.timezero}}]

After another driver's action, the run's follower catches up with what the action changed (one
fresh LIST), so a probe never judges the moment before it as the moment after.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chaoslib.run import RunEventHandler

from chaos.actions import run_id_of
from probes import snapshot

KILOCARD_ACTIONS = "chaos.actions"


@dataclass(frozen=True)
class Action:
    name: str
    module: str  # the provider's module, or its type (process, http)
    started: float
    ended: float


_acted: dict[str, list[Action]] = {}
_lock = threading.Lock()


def acted(run_id: str, name: str, module: str, started: float, ended: float) -> None:
    """An action of the run has ended."""
    with _lock:
        _acted.setdefault(run_id, []).append(Action(name, module, started, ended))
    if module != KILOCARD_ACTIONS:  # kilocard's own writes are waited for already (chaos.written)
        for source in snapshot.live_sources():
            source.catch_up(ended)


def others(run_id: str) -> list[Action]:
    """The run's actions of other drivers that have ended (kilocard's own are in its ledger)."""
    with _lock:
        return [a for a in _acted.get(run_id, []) if a.module != KILOCARD_ACTIONS]


def choose(faults: Sequence[tuple[float, str]], actions: Sequence[Action], first: bool,
           since: float | None) -> tuple[float, str] | None:
    """(time zero, what it is) from the run's faults ((applied at, what), from its ledger) and its
    other drivers' actions: the earliest disruption (`first`) or the latest; else `since`; None
    when there is nothing to time from."""
    which = "first" if first else "last"
    found = [*((at, f"the run's {which} fault ({what})") for at, what in faults),
             *((a.ended, f"the end of action {a.name!r} ({a.module})") for a in actions)]
    if not found:
        return None if since is None else (float(since), "since")
    at, what = min(found) if first else max(found)
    mixed = bool(faults) and bool(actions)  # both drivers: say which of all it is
    return at, what + (f", the run's {which} disruption" if mixed else "")


def _ended(run_id: str, activity: dict[str, Any], run: Any) -> None:
    """chaoslib's word that an activity ended (its run entry): an action is told to `acted`."""
    if activity.get("type") != "action":
        return
    provider = activity.get("provider") or {}
    ended = time.time()
    took = float(run.get("duration") or 0.0) if isinstance(run, dict) else 0.0
    acted(run_id, str(activity.get("name", "?")), str(provider.get("module") or provider.get("type") or "?"),
          ended - took, ended)


class Clock(RunEventHandler):  # type: ignore[misc]
    """The strict runner's ear on chaoslib: each action's end, for the run `run_id`."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def activity_completed(self, activity: dict[str, Any], run: Any) -> None:
        _ended(self.run_id, activity, run)


# --- as a Chaos Toolkit control (plain `chaos run`) -----------------------------------------------
def after_activity_control(context: dict[str, Any], state: Any = None, configuration: dict[str, Any] | None = None,
                           **_arguments: Any) -> None:
    _ended(run_id_of(configuration), context, state)
