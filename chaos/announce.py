"""A run's fault transitions told where operators look (Grafana's annotations: chaos.grafana; the
targets' Kubernetes Events: chaos.fault_events), each teller on its own thread: it hears the
ledger's transitions on chaos.events, so the run never waits on it, and a slow or failing
destination loses only its own calls, counted for the journal."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from chaos.errors import KilocardError
from chaos.events import Event, subscribe


class Announcer:
    """Hands each `fault` transition of run `run_id` to `tell` (which returns the calls it made),
    in order, on a thread of its own: each fault's state once, though the ledger writes a record
    again in the same state (a refreshed expiry, the evidence that it landed)."""

    def __init__(self, run_id: str, tell: Callable[[Event], int], name: str) -> None:
        self.run_id, self.tell, self.name = run_id, tell, name
        self.sent = 0
        self.failed: list[str] = []
        self._queue: queue.Queue[Event | None] = queue.Queue()
        self._thread = threading.Thread(target=self._tell_all, name=f"kilocard-{name}", daemon=True)
        self._unsubscribe: Callable[[], None] | None = None
        self._heard_before: set[tuple[str, str]] = set()
        self._hearing = threading.Lock()  # the ledger publishes from whichever thread wrote

    def start(self) -> Announcer:
        self._thread.start()
        self._unsubscribe = subscribe(self._heard)
        return self

    def stop(self, timeout: float = 30.0) -> dict[str, Any]:
        """Stop listening, tell what is queued (within `timeout`), and say what was sent."""
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._queue.put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            left = self._queue.qsize() - 1  # less the stop sentinel
            self.failed.append(f"still sending after {timeout:g} s, {left} more transition(s) not told")
        return {"sent": self.sent, "failed": list(self.failed)}

    def _heard(self, event: Event) -> None:
        if event.get("topic") != "fault" or event.get("run_id") != self.run_id:
            return
        transition = (str(event.get("fault_id")), str(event.get("state")))
        with self._hearing:
            if transition in self._heard_before:
                return
            self._heard_before.add(transition)
        self._queue.put(event)

    def _tell_all(self) -> None:
        while (event := self._queue.get()) is not None:
            try:
                self.sent += self.tell(event)
            except (KilocardError, OSError, ValueError) as exc:  # requests' errors are OSErrors
                self.failed.append(f"{event.get('kind')} {event.get('state')}: {exc}")


def describe(target: dict[str, Any]) -> str:
    """A fault's target in a few words: namespace/name, a node, its cards."""
    name = target.get("name") or target.get("node") or target.get("model") or "?"
    where = f"{target['namespace']}/{name}" if target.get("namespace") else str(name)
    cards = target.get("cards") or ([target["card"]] if target.get("card") is not None else [])
    return where + (f" cards {','.join(map(str, cards))}" if cards else "")
