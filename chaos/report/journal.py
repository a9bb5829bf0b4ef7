"""A run's journal, read once into what a report shows: its verdict, its faults' windows, every
check (hypothesis probes and method probes) with its reason, the SLO series its verdicts judged,
the replicas' recovery phases and the placement before and after.

A journal is plain data that kilocard wrote (`chaos.run.execute`; its shape: chaos.judgement): a
file that is not JSON, or whose `kilocard` section lacks a verdict, is not ours, and says so
(SpecError, exit 2).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.errors import SpecError
from chaos.judgement import passes, replay_symptoms, why
from chaos.vocabulary import cluster_line, describe_target, epoch
from probes.verdict import BUDGET_SECONDS, RECOVERED_AFTER_SECONDS, budgeted

PHASES = ("deleted", "gone", "created", "scheduled", "pull_failed", "started", "ready")
# Each phase of a replica's recovery, and the phase it is timed from.
SPANS = (("gone", "deleted"), ("created", "deleted"), ("scheduled", "created"), ("started", "scheduled"),
         ("ready", "started"))
_NOT_OURS = ("not a kilocard journal: {why} (kilocard run writes journals with a 'kilocard' section; "
             "a plain `chaos run` journal has none)")

SYMPTOM_COLUMNS = ("symptom", "recorded", "observed", "judgement", "why")


@dataclass(frozen=True)
class Fault:
    kind: str
    target: str  # "gpu-070 card 3", "kilocard-fleet/llama-3-70b-...": what a person reads
    node: str | None
    applied_at: float | None  # epoch seconds
    ended_at: float | None  # reverted or expired (the ledger's 1 s resolution)
    state: str
    error: str = ""


@dataclass(frozen=True)
class Check:
    """One probe's result: a hypothesis check (before/after the method) or a method probe."""

    phase: str  # "before" | "method" | "after"
    name: str
    func: str
    ok: bool
    reason: str
    output: dict[str, Any] = field(hash=False, compare=False)
    seconds: float = 0.0
    start: float | None = None  # epoch seconds


@dataclass(frozen=True)
class Series:
    """An SLO verdict's own series (probes.slo): per replica or per model, from the fault on."""

    check: str
    indicator: str
    threshold: float
    budget: float  # seconds from the fault
    hold: float
    fault_at: float
    blind_until: float
    outcome: str
    worst: str | None
    breach_after: float | None
    recovered_after: float | None
    points: tuple[tuple[float, dict[str, float]], ...]  # (seconds after the fault, name -> value)


@dataclass(frozen=True)
class Run:
    path: Path
    run_id: str
    title: str
    experiment_file: str
    exit_code: int
    verdict: str
    reason: str
    expected: dict[str, Any] | None
    started: float | None
    duration: float | None
    faults: tuple[Fault, ...]
    checks: tuple[Check, ...]
    series: tuple[Series, ...]
    recovery: tuple[dict[str, Any], ...]
    placement: dict[str, Any]
    release: dict[str, Any]
    plan: dict[str, Any]
    raw: dict[str, Any] = field(hash=False, compare=False, repr=False)

    @property
    def scenario(self) -> str:
        """What runs of the same experiment share: its file's stem (s3-ecc-one-tp-member)."""
        return Path(self.experiment_file).stem or self.title

    @property
    def cluster(self) -> str:
        """The cluster the run ran against, in a line ("-" for a journal from before it was kept)."""
        target = self.raw.get("kilocard", {}).get("cluster")
        return cluster_line(target) if isinstance(target, dict) else "-"

    @property
    def key(self) -> str:
        return self.run_id or f"invalid-{self.scenario}"

    @property
    def first_fault(self) -> float | None:
        applied = [f.applied_at for f in self.faults if f.applied_at]
        return min(applied) if applied else None

    def argument(self, activity: str, name: str) -> Any:
        """An argument an activity was given, with the experiment's ${configuration} filled in as
        the run had it (--var included); None when it was not given."""
        return _argument(self.raw, activity, name)

    @property
    def replay(self) -> dict[str, Any] | None:
        """For a replay (chaos.replay): each fault's recorded and replayed offsets ("played"), what
        the incident recorded ("recorded": its recovery, its other alerts), what the replay was to
        show ("expect") and its symptoms' verdict (probes.incident's output, None if not judged)."""
        extension = next((e for e in (self.raw.get("experiment") or {}).get("extensions") or []
                          if isinstance(e, dict) and e.get("name") == "kilocard-replay"), None)
        if extension is None:
            return None
        played = next((r.get("output") for r in self.raw.get("run") or []
                       if (r.get("activity") or {}).get("name") == "replay-timeline"), None)
        return {"played": played if isinstance(played, list) else [], "recorded": extension.get("recorded") or {},
                "timeline": extension.get("timeline", ""), "expect": extension.get("expect", "reproduced"),
                "symptoms": replay_symptoms(self.raw.get("run") or [])}

    @property
    def symptom_rows(self) -> list[tuple[str, str, str, str, str]]:
        """A judged replay's symptoms as (symptom, recorded, observed, judgement, why); [] if none."""
        judged = (self.replay or {}).get("symptoms") or {}
        return [tuple(str(r.get(k, "")) for k in SYMPTOM_COLUMNS)  # type: ignore[misc]
                for r in judged.get("symptoms") or []]

    @property
    def when(self) -> float:
        return self.started or self.raw["kilocard"].get("finished_at") or 0.0


def load(path: Path) -> Run:
    where = str(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"{where}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"{where}: " + _NOT_OURS.format(why=f"not JSON ({exc})")) from None
    return parse(data, path)


def parse(data: Any, path: Path) -> Run:
    """A journal's data as a Run; SpecError when it is not one of ours."""
    where = str(path)
    k = data.get("kilocard") if isinstance(data, dict) else None
    if not isinstance(k, dict):
        raise SpecError(f"{where}: " + _NOT_OURS.format(why="no 'kilocard' section"))
    missing = [f for f in ("exit_code", "verdict", "reason") if f not in k]
    if missing or not isinstance(k.get("exit_code"), int):
        raise SpecError(f"{where}: kilocard.{(missing or ['exit_code'])[0]}: " + _NOT_OURS.format(
            why="expected the run's exit code (an integer), verdict and reason"))
    checks = tuple(_checks(data))
    return Run(
        path=path, run_id=str(k.get("run_id") or ""), title=str((data.get("experiment") or {}).get("title") or
                                                             Path(str(k.get("experiment_file", "?"))).stem),
        experiment_file=str(k.get("experiment_file") or ""), exit_code=int(k["exit_code"]),
        verdict=str(k["verdict"]), reason=str(k["reason"]), expected=k.get("expected"),
        started=epoch(data.get("start")), duration=data.get("duration"),
        faults=tuple(_fault(f) for f in k.get("faults") or []), checks=checks,
        series=tuple(s for c in checks if (s := _series(c)) is not None),
        recovery=tuple(k.get("recovery") or []), placement=dict(k.get("placement") or {}),
        release=dict(k.get("release") or {}), plan=dict(k.get("plan") or {}), raw=data)


def _fault(f: dict[str, Any]) -> Fault:
    ended = [epoch(t.get("at")) for t in f.get("transitions") or [] if t.get("state") in ("reverted", "expired")]
    target = f.get("target") or {}
    return Fault(kind=str(f.get("kind", "?")), target=describe_target(target), node=target.get("node"),
                 applied_at=f.get("applied_at"), ended_at=ended[-1] if ended else None,
                 state=str(f.get("state", "?")), error=str(f.get("error") or ""))


def _argument(data: dict[str, Any], activity: str, name: str) -> Any:
    config = (data.get("experiment") or {}).get("configuration") or {}
    for _phase, entry in _entries(data):
        found = entry.get("activity") or {}
        arguments = (found.get("provider") or {}).get("arguments") or {}
        if found.get("name") == activity and name in arguments:
            value = arguments[name]
            whole = re.fullmatch(r"\$\{(\w+)\}", value) if isinstance(value, str) else None
            if whole and whole.group(1) in config:
                return config[whole.group(1)]
            if isinstance(value, str):
                return re.sub(r"\$\{(\w+)\}", lambda m: str(config.get(m.group(1), m.group(0))), value)
            return value
    return None


# Journals written before every budgeted probe said `budget_seconds` and `recovered_after_seconds`
# said them in each probe's own words: the recovery as `recovered_after` (`seconds` for an older
# remediated_within), the budget as the SLO's `deadline` or, elsewhere, only as the argument.
# Read as today's, a history keeps its scores.
_BUDGETED_BEFORE = ("slo_recovered_within", "tp_groups_recovered_within", "remediated_within")


def _as_today(func: str, output: dict[str, Any], budget: Callable[[], Any]) -> dict[str, Any]:
    """`budget()`: the probe's argument, looked up (a scan of the journal) only for an old journal."""
    if BUDGET_SECONDS in output or func not in _BUDGETED_BEFORE:
        return output
    after = next((output[k] for k in ("recovered_after", "seconds") if output.get(k) is not None), None)
    try:
        limit = float(output["deadline"] if func == "slo_recovered_within" else budget())
    except (KeyError, TypeError, ValueError):
        return output
    return {**output, **budgeted(limit, after)}


def _entries(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(phase, run entry) of the hypothesis probes before, the method's activities, the probes after."""
    states = data.get("steady_states") or {}
    return [*(("before", p) for p in (states.get("before") or {}).get("probes") or []),
            *(("method", e) for e in data.get("run") or []),
            *(("after", p) for p in (states.get("after") or {}).get("probes") or [])]


def _checks(data: dict[str, Any]) -> list[Check]:
    found = []
    for phase, e in _entries(data):
        activity = e.get("activity") or {}
        if activity.get("type") != "probe":
            continue
        name, func = str(activity.get("name", "?")), str((activity.get("provider") or {}).get("func", ""))
        output = e.get("output") if isinstance(e.get("output"), dict) else {}
        output = _as_today(func, output, lambda name=name: _argument(data, name, "budget"))
        if phase == "method":  # as the runner judges it: failed, or out of its tolerance
            ok = e.get("status") == "succeeded" and passes(e)
        else:
            ok = bool(e.get("tolerance_met"))
        reason = why(e) or ("" if ok else f"status {e.get('status')}")
        found.append(Check(phase, name, func, ok, reason, output, float(e.get("duration") or 0.0),
                           epoch(e.get("start"))))
    return found


def _series(check: Check) -> Series | None:
    o = check.output
    if not isinstance(o.get("series"), list) or "threshold" not in o or "fault_at" not in o:
        return None
    fault_at = float(o["fault_at"])
    points = tuple((float(p["at"]) - fault_at, {str(k): float(v) for k, v in (p.get("values") or {}).items()})
                   for p in o["series"] if isinstance(p, dict) and "at" in p)
    return Series(check=check.name, indicator=str(o.get("indicator", "")), threshold=float(o["threshold"]),
                  budget=float(o.get(BUDGET_SECONDS) or 0), hold=float(o.get("hold") or 0), fault_at=fault_at,
                  blind_until=float(o.get("blind_until") or 0), outcome=str(o.get("outcome", "")),
                  worst=o.get("worst"), breach_after=o.get("breach_after"),
                  recovered_after=o.get(RECOVERED_AFTER_SECONDS), points=points)
