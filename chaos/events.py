"""The in-process seam between what a run does and who watches it (chaos.timeline): `publish`
hands a plain mapping to every subscriber, from any thread; with nobody subscribed it does
nothing. A subscriber that raises is logged (debug) and skipped: a view's bug never reaches the
run. Standard library only, so the ledger, the agent's reaper and the probes pay nothing for it.

Topics:
    fault  chaos.ledger, each transition it wrote: the Record's fields (run_id, fault_id, kind,
           target, state: recorded, applied, failed or reverted; error, applied_at, ...), `at` now
    slo    probes.slo.recovered_within, each live sample: indicator (its name), query, worst
           ((series, value) or None), error (the query failed), threshold, left (seconds to the
           deadline), phase (blind, holding: under the threshold, breached, unknown: no answer), at
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

Event = Mapping[str, Any]
Subscriber = Callable[[Event], None]

_log = logging.getLogger(__name__)
_subscribers: tuple[Subscriber, ...] = ()  # replaced, never changed in place: publish reads it without a lock
_subscribing = threading.Lock()


def publish(event: Event) -> None:
    for subscriber in _subscribers:
        try:
            subscriber(event)
        except Exception:  # noqa: BLE001 - whatever a subscriber does wrong stays out of the run
            _log.debug("subscriber %r failed on %r", subscriber, event, exc_info=True)


def subscribe(subscriber: Subscriber) -> Callable[[], None]:
    """Hear every event from now on; returns the unsubscribe."""
    global _subscribers
    with _subscribing:
        _subscribers = (*_subscribers, subscriber)

    def unsubscribe() -> None:
        global _subscribers
        with _subscribing:
            _subscribers = tuple(s for s in _subscribers if s is not subscriber)

    return unsubscribe
