"""Fault windows where operators look during a game day: each fault of a run as a Grafana annotation
region, through Grafana's HTTP API (`POST /api/annotations` when the ledger says the fault is
applied, `PATCH /api/annotations/<id>` with its end when it says reverted or failed), tagged
`kilocard`, `run:<id>`, `kind:<kind>` and `experiment:<title>`, so a dashboard's annotation query
by tag (deploy/grafana/kilocard-dashboard.json) draws every window over the SLO panels.

It calls Grafana from its own thread (chaos.announce): a slow or broken Grafana never slows or
fails the run; what it could not send is counted in the journal (`kilocard.grafana`). The token (a
Grafana service account's) comes from $KILOCARD_GRAFANA_TOKEN, never from the configuration, and
goes only over https beyond this machine.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

import requests

from chaos.announce import Announcer, describe
from chaos.errors import SpecError
from chaos.events import Event
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


class Annotator:
    """The run's faults as annotation regions in the Grafana at `url` (see the module's doc)."""

    def __init__(self, url: str, run_id: str, experiment: str, http: requests.Session | None = None) -> None:
        self.url, self.run_id, self.experiment = url, run_id, experiment
        self.http = http or requests.Session()
        self._ids: dict[str, int] = {}  # fault id -> its annotation
        self._announcer = Announcer(run_id, self._send, "grafana")

    def start(self) -> Annotator:
        self._announcer.start()
        return self

    def stop(self, timeout: float = 3 * TIMEOUT) -> dict[str, Any]:
        return {"url": self.url, **self._announcer.stop(timeout)}

    def _send(self, event: Event) -> int:
        fault, state = str(event["fault_id"]), event["state"]
        if state == "applied" and fault not in self._ids:
            body = {"time": _ms(event.get("applied_at") or event["at"]), "tags": self.tags(str(event["kind"])),
                    "text": f"{event['kind']} on {describe(event.get('target') or {})} (run {self.run_id})"}
            self._ids[fault] = int(self._call("POST", "/api/annotations", body)["id"])
            return 1
        if state in _ENDED and fault in self._ids:
            self._call("PATCH", f"/api/annotations/{self._ids.pop(fault)}", {"timeEnd": _ms(event["at"])})
            return 1
        return 0

    def _call(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.http.request(method, self.url.rstrip("/") + path, json=body, timeout=TIMEOUT)
        answer.raise_for_status()
        found: dict[str, Any] = answer.json()
        return found

    def tags(self, kind: str) -> list[str]:
        return [TAG, f"run:{self.run_id}", f"kind:{kind}", f"experiment:{self.experiment}"]


def _ms(seconds: float) -> int:
    return int(float(seconds) * 1000)
