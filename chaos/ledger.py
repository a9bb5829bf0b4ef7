"""The write-ahead fault ledger: a fault is written down BEFORE it is applied, and closed after it
is reverted, in two places:

- on disk: `<dir>/<run_id>.jsonl`, one JSON line per transition, fsync'd before we go on;
- in the cluster: ConfigMap `kilocard-system/kilocard-run-<run_id>` (labels `kilocard.io/ledger`,
  `kilocard.io/run-id`), one key per fault holding its latest record, so `kilocard recover` works
  from another machine with nothing but a kubeconfig.

A record: {run_id, fault_id, kind, target, state, undo, expires_at, at, applied_at, landed}. States: recorded ->
applied -> reverted (or failed: the apply raised; it is still reverted, since it may have half-
happened). `undo` is what the fault's revert needs and nothing else.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos import events
from chaos.agent.protocol import iso
from chaos.errors import KubeError, NotFound, SpecError
from chaos.kube import Kube
from chaos.vocabulary import LEDGER_LABEL, RUN_LABEL, SYSTEM_NAMESPACE, state_path

NAMESPACE = SYSTEM_NAMESPACE
OPEN_STATES = ("recorded", "applied", "failed")
STATE_ORDER = {"recorded": 0, "applied": 1, "failed": 2, "reverted": 3}
_RUN_ID = re.compile(r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$")


def default_dir() -> Path:
    return state_path("KILOCARD_LEDGER", "ledger")


def new_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S-", time.gmtime()) + os.urandom(3).hex()


def check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise SpecError(f"--run-id: expected lower-case letters, digits and '-' (at most 42), got {run_id!r}")
    return run_id


def parse_iso(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


@dataclass
class Record:
    run_id: str
    fault_id: str
    kind: str
    target: dict[str, Any]
    expires_at: str
    state: str = "recorded"
    undo: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    at: str = ""
    applied_at: float = 0.0  # epoch seconds when its apply started: the fault's time (0: not applied)
    applied_until: float = 0.0  # when its apply returned: every change it made is older
    landed: dict[str, Any] = field(default_factory=dict)  # chaos.landed: {status, evidence, seconds}

    @property
    def open(self) -> bool:
        return self.state in OPEN_STATES

    def expired(self, now: float | None = None) -> bool:
        return parse_iso(self.expires_at) <= (time.time() if now is None else now)

    def fields(self) -> dict[str, Any]:
        """Its fields, the mappings among them shared, not copied: a transition replaces a record's
        target, undo or landed, never changes them in place (asdict's deep copy cost more than the
        DELETE of a killed pod)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def to_json(self) -> str:
        return json.dumps(self.fields(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Record:
        data = json.loads(text)
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


class Ledger:
    """One run's ledger. `kube` may be None (dry use, tests of pure logic): then disk only."""

    def __init__(self, run_id: str, kube: Kube | None, directory: Path | None = None,
                 on_disk: bool = True) -> None:
        self.run_id = check_run_id(run_id)
        self.kube = kube
        self.dir = directory or default_dir()
        self.path = self.dir / f"{run_id}.jsonl"
        self.on_disk = on_disk  # an in-cluster reaper keeps no local file
        self._cluster_ready = False

    @property
    def config_map(self) -> str:
        return f"kilocard-run-{self.run_id}"

    def write(self, records: Iterable[Record], in_cluster: bool = True) -> None:
        """Persist transitions: disk first (fsync), then the cluster, in one call per batch.
        Faults with nothing to revert (a killed pod) need no in-cluster marker."""
        records = list(records)
        if not records:
            return
        now = iso(time.time())
        for r in records:
            r.at = now
        if self.on_disk:
            self.dir.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as out:
                out.write("".join(r.to_json() + "\n" for r in records))
                out.flush()
                os.fsync(out.fileno())
        if self.kube is not None and in_cluster:
            self._write_cluster(records)
        for r in records:
            events.publish({"topic": "fault", **r.fields(), "at": time.time()})

    def _write_cluster(self, records: list[Record]) -> None:
        data = {r.fault_id: r.to_json() for r in records}
        latest = max(parse_iso(r.expires_at) for r in records)
        if not self._cluster_ready:
            self.kube.ensure_namespace(NAMESPACE)
            try:
                self.kube.create_config_map(NAMESPACE, {
                    "metadata": {"name": self.config_map, "labels": {LEDGER_LABEL: "true", RUN_LABEL: self.run_id},
                                 "annotations": {"kilocard.io/expires-at": iso(latest)}},
                    "data": data,
                })
                self._cluster_ready = True
                return
            except KubeError as exc:
                if exc.status != 409:
                    raise
                self._cluster_ready = True
        try:
            self.kube.patch_config_map(NAMESPACE, self.config_map, {"data": data})
        except NotFound:  # closed since (every fault reverted, here or by another process); a fault again
            self._cluster_ready = False
            self._write_cluster(records)

    def close_if_done(self) -> None:
        """Remove the in-cluster marker once every fault of the run is closed."""
        still_open = read_disk(self.path) if self.on_disk else read_cluster(self.kube, self.run_id) if self.kube else []
        if self.kube is not None and not [r for r in still_open if r.open]:
            try:
                self.kube.delete_config_map(NAMESPACE, self.config_map)
            except NotFound:
                pass
            self._cluster_ready = False  # a fault that comes back (a flapping one) writes it anew


def read_disk(path: Path) -> list[Record]:
    """Latest record per fault from a ledger file (a torn last line is ignored)."""
    latest: dict[str, Record] = {}
    if not path.is_file():
        return []
    for line in path.read_text().splitlines():
        try:
            r = Record.from_json(line)
        except (ValueError, TypeError):
            continue
        latest[r.fault_id] = r
    return list(latest.values())


def transitions(path: Path) -> dict[str, list[dict[str, str]]]:
    """Every state each fault went through, in order, with when it was written (the ledger file)."""
    found: dict[str, list[dict[str, str]]] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                r = Record.from_json(line)
            except (ValueError, TypeError):
                continue
            states = found.setdefault(r.fault_id, [])
            step = {"state": r.state, "at": r.at, **({"error": r.error} if r.error else {})}
            if states and {**states[-1], "at": r.at} == step:
                continue  # written again as it was (its read-back added): not a transition
            states.append(step)
    return found


def read_cluster(kube: Kube, run_id: str | None = None) -> list[Record]:
    selector = f"{LEDGER_LABEL}=true" + (f",{RUN_LABEL}={run_id}" if run_id else "")
    try:
        maps = kube.list_config_maps(NAMESPACE, selector)
    except NotFound:
        return []
    records = []
    for cm in maps:
        for text in (cm.get("data") or {}).values():
            try:
                records.append(Record.from_json(text))
            except (ValueError, TypeError):
                continue
    return records


def records(kube: Kube | None, directory: Path | None, run_id: str | None = None) -> list[Record]:
    """The latest record of every fault, from the cluster markers and the local files (None:
    markers only); the newer record of a fault wins."""
    found: dict[tuple[str, str], Record] = {}
    if directory is None:
        paths = []
    else:
        paths = [directory / f"{run_id}.jsonl"] if run_id else sorted(directory.glob("*.jsonl"))
    candidates = [r for p in paths for r in read_disk(p)]
    if kube is not None:
        candidates += read_cluster(kube, run_id)
    for r in candidates:
        key = (r.run_id, r.fault_id)
        if key not in found or (r.at, STATE_ORDER[r.state]) >= (found[key].at, STATE_ORDER[found[key].state]):
            found[key] = r
    return sorted(found.values(), key=lambda r: (r.run_id, r.fault_id))


def open_records(kube: Kube | None, directory: Path | None, run_id: str | None = None) -> list[Record]:
    """The faults still open (see `records`)."""
    return [r for r in records(kube, directory, run_id) if r.open]

