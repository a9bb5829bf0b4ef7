"""Fault windows where operators look during a game day: each fault of a run as a Grafana
annotation region, through Grafana's HTTP API (`POST /api/annotations` when the ledger says the
fault is applied, `PATCH /api/annotations/<id>` with its end when it says reverted or failed),
tagged `kilocard`, `run:<id>`, `kind:<kind>` and `experiment:<title>`, so a dashboard's annotation
query by tag (deploy/grafana/kilocard-dashboard.json) draws every window over the SLO panels.

It listens on chaos.events (the ledger's transitions) and calls Grafana from its own thread: a slow
or broken Grafana never slows or fails the run; what it could not send is counted in the journal
(`kilocard.grafana`). The token (a Grafana service account's) comes from $KILOCARD_GRAFANA_TOKEN,
never from the configuration, and goes only over https beyond this machine.
"""

from __future__ import annotations

import os
import queue
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import requests

from chaos.errors import SpecError
from chaos.events import Event, subscribe
from chaos.vocabulary import loopback

TOKEN_ENV = "KILOCARD_GRAFANA_TOKEN"
TAG = "kilocard"
TIMEOUT = 10.0  # seconds per call; a Grafana slower than this loses that annotation, not the run's time
_ENDED = ("reverted", "failed")


def session(url: str, token: str | None = None) -> requests.Session:
    """A session for Grafana at `url`: its token as the bearer, refused in cleartext beyond loopback."""
    token = (token if token is not None else os.environ.get(TOKEN_ENV, "")).strip()
    where = urllib.parse.urlsplit(url)
    if where.scheme not in ("http", "https") or not where.hostname:
        raise SpecError(f"the Grafana URL {url!r}: expected http(s)://host[:port]")
    if token and where.scheme != "https" and not loopback(where.hostname):
        raise SpecError(f"refusing to send the Grafana token in cleartext to {url}: use https://")
    found = requests.Session()
    if token:
        found.headers["Authorization"] = f"Bearer {token}"
    return found


@dataclass
class Annotator:
    """The run's faults as annotation regions in the Grafana at `url` (see the module's doc)."""

    url: str
    run_id: str
    experiment: str
    http: requests.Session = field(default_factory=requests.Session)
    sent: int = 0
    failed: list[str] = field(default_factory=list)
    _ids: dict[str, int] = field(default_factory=dict)  # fault id -> its annotation
    _queue: queue.Queue[Event | None] = field(default_factory=queue.Queue)
    _thread: threading.Thread | None = None
    _unsubscribe: Any = None

    def start(self) -> Annotator:
        self._thread = threading.Thread(target=self._send_all, name="kilocard-grafana", daemon=True)
        self._thread.start()
        self._unsubscribe = subscribe(self._heard)
        return self

    def stop(self, timeout: float = 3 * TIMEOUT) -> dict[str, Any]:
        """Stop listening, send what is queued (within `timeout`), and say what was sent."""
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self.failed.append(f"{self._queue.qsize()} call(s) not sent within {timeout:g} s")
        return {"url": self.url, "sent": self.sent, "failed": list(self.failed)}

    def _heard(self, event: Event) -> None:
        if event.get("topic") == "fault" and event.get("run_id") == self.run_id:
            self._queue.put(event)

    def _send_all(self) -> None:
        while (event := self._queue.get()) is not None:
            try:
                self._send(event)
            except requests.RequestException as exc:
                self.failed.append(f"{event.get('kind')} {event.get('state')}: {exc}")

    def _send(self, event: Event) -> None:
        fault, state = str(event["fault_id"]), event["state"]
        if state == "applied" and fault not in self._ids:
            body = {"time": _ms(event.get("applied_at") or event["at"]), "tags": self.tags(str(event["kind"])),
                    "text": f"{event['kind']} on {describe(event.get('target') or {})} (run {self.run_id})"}
            made = self._call("POST", "/api/annotations", body)
            self._ids[fault] = int(made["id"])
        elif state in _ENDED and fault in self._ids:
            self._call("PATCH", f"/api/annotations/{self._ids.pop(fault)}", {"timeEnd": _ms(event["at"])})

    def _call(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.http.request(method, self.url.rstrip("/") + path, json=body, timeout=TIMEOUT)
        answer.raise_for_status()
        self.sent += 1
        found: dict[str, Any] = answer.json()
        return found

    def tags(self, kind: str) -> list[str]:
        return [TAG, f"run:{self.run_id}", f"kind:{kind}", f"experiment:{self.experiment}"]


def describe(target: dict[str, Any]) -> str:
    """A fault's target in a few words: namespace/name, a node, its cards."""
    name = target.get("name") or target.get("node") or target.get("model") or "?"
    where = f"{target['namespace']}/{name}" if target.get("namespace") else str(name)
    cards = target.get("cards") or ([target["card"]] if target.get("card") is not None else [])
    return where + (f" cards {','.join(map(str, cards))}" if cards else "")


def _ms(seconds: float) -> int:
    return int(float(seconds) * 1000)
