"""Time zero: when a budgeted verdict's clock starts (docs/verdicts.md).

    1. the run's faults, from its ledger (the first or the last applied, as each probe says);
    2. else the end of the last action that ran before the probe, whoever's action it was: a
       Chaos Toolkit action of any driver (chaostoolkit-kubernetes' terminate_pods, a process,
       an HTTP call) is timed like kilocard's own;
    3. else the probe's explicit `since` (epoch seconds).

The actions are told here as they end: by the strict runner (an event handler, chaos.run), or,
under plain `chaos run`, by this module declared as a control:

    controls: [{name: time-zero, provider: {type: python, module: chaos.timezero}}]

After another driver's action, the run's follower catches up with what the action changed (one
fresh LIST), so a probe never judges the moment before it as the moment after.
"""

from __future__ import annotations

import threading
import time
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


def last(run_id: str) -> Action | None:
    """The action of the run that ended last, if any has."""
    with _lock:
        return max(_acted.get(run_id, []), key=lambda a: a.ended, default=None)


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
