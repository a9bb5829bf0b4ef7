"""An incident's symptoms, judged against a replay: did it reproduce, and does the fix hold?

`kilocard record` writes the symptoms an incident showed beside its faults (chaos.record): the
alerts that fired other than the faults' own (an SLO burn), and the replicas that were deleted
and replaced. Offsets count from the incident's first fault; in the replay, from the replay's
first fault (time zero). Pod names change between runs: an alert is matched by its name and its
recorded labels less the pod's identity (`IDENTITY_LABELS`), a deleted replica by its owner (the
pod name less its last segment: the ReplicaSet, or the LWS group).

    reproduced   every symptom seen again, each within `tolerance` s of its recorded offset
    fixed        no alert symptom fires again (or, with a budget in `fixed`, each resolves within
                 it), and with a replica budget, each replaced replica started (or Ready) within it

A replaced replica's phases (its replacement scheduled, started, Ready) are each judged where the
record has them: the Events tell the first two, the replacement's Ready condition the last. A
model's SLO breach (`slo`: its indicator over a threshold on its worst replica) is judged from the
indicator's series, episode by episode (a run of samples over it): reproduced when one starts
within the tolerance of the recorded breach; fixed when none does, or each ends within its budget.

    pure:    reproduced, fixed (over Firing, Replacement and Reading lists), slo_states, episodes
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from probes.verdict import Contract, Verdict, failed, passed, unknown

REPRODUCED, FIXED = "reproduced", "fixed"
EXPECT = (REPRODUCED, FIXED)
DEFAULT_TOLERANCE = 15.0
# Labels that name one pod or scrape, not the symptom: a replica rebuilt since has another name.
IDENTITY_LABELS = ("pod", "pod_name", "instance", "container", "endpoint", "uid", "alertstate")
# A replacement's phases after its predecessor's deletion, in the order they come.
PHASES = ("scheduled", "started", "ready")
_DONE = {"scheduled": "been scheduled", "started": "started", "ready": "become Ready"}  # "had not ..."
_DO = {"scheduled": "be scheduled", "started": "start", "ready": "become Ready"}  # "took 30 s to ... again"
_SAID = {"scheduled": "scheduled", "started": "started", "ready": "Ready"}  # "Ready +42.0 s"
# A fix's replica budgets: from the deletion to the replacement's start, or to its Ready.
REPLICA_BUDGETS = {"started_within": "started", "ready_within": "ready"}
SLO_INDICATORS = ("ttft_p95", "itl_p95", "error_ratio")  # probes.slo's, judged on the worst replica
OVER, UNDER, UNSEEN = "over", "under", "unseen"

CONTRACTS = (
    Contract(
        "incident_symptoms", "probe",
        asserts="expect reproduced: every recorded symptom is seen in the replay, each within `tolerance` s of its "
                "recorded offset: an alert (its name and stable labels, on any replica) fires after time zero, a "
                "replica of the recorded owner is deleted and its replacement scheduled, started and Ready, each "
                "phase the record has within the tolerance of its own offset (one owner's recorded "
                "deletions, earliest first, each matched to the earliest replay deletion of that owner within the "
                "tolerance not matched yet), a model's SLO breach (see below) begins after time zero. expect "
                "fixed: no alert symptom fires "
                "after time zero, or each that does resolves within its `fixed` budget; with a replica budget "
                "(started_within, ready_within), each replacement starts (is Ready) within it of its deletion; no "
                "SLO breach starts after time zero, or each ends (a sample under the threshold) within the "
                "model's `fixed.slo` budget",
        time_zero="the replay's first fault (the run's ledger), as the recorded offsets count from the incident's",
        interval="[time zero, the probe's call]: the replay's faults and its `observe` seconds; a symptom whose "
                 "recorded offset plus the tolerance (or whose fix budget) reaches past the end cannot be judged",
        missing="an alert already firing before time zero is not reproduced by the replay and cannot show a fix: "
                "unknown; no Events or ALERTS series for a symptom whose window has passed: not seen (failed for "
                "reproduced, ok for fixed); a window not yet passed: unknown. Replayed as fixed, a timeline whose "
                "faults, resolved before it starts, touch no replica of a model the alerts or SLO breaches name "
                "is refused (exit 2, nothing applied): a fault that lands on nothing shows no symptom and would "
                "pass. An SLO sample is over when any replica's value is over the threshold, else unseen when the "
                "query failed, no replica had a value, or a replica with a value at time zero (the last sample at or "
                "before it with values) has none while its pod was not deleted by then (a silent replica is not "
                "health), else under. A breach runs from a sample over the threshold to the next one under it "
                "(unseen samples do not end it); one begun before time zero is not the replay's, and the last "
                "sample before time zero that is not unseen being over makes the symptom unknown (reproduced: "
                "unless a breach of the replay's own begins within the tolerance). Reproduced "
                "with no breach starting within the tolerance: unknown while the window has not passed or where "
                "its samples are unseen or absent, else failed; fixed: unknown when a sample from time zero to the "
                "end outside every breach is unseen (a breach may have come back unseen), or there is none, "
                "unless a breach already failed the fix",
        exceptions="Prometheus or the apiserver not answering: unknown; a 4xx, a bug, an unknown expectation: error",
        outcomes=(("ok", "reproduced (every symptom within tolerance), or fixed (none came back or each within "
                   "its budget)"),
                  ("failed", "not reproduced (the first symptom not seen, or seen off its offset), or not fixed "
                   "(the first symptom that came back, named)"),
                  ("unknown", "a symptom could not be judged in the interval, and none failed")),
        judge=("probes.incident.reproduced", "probes.incident.fixed", "probes.incident._alert_seen",
               "probes.incident._replica_seen", "probes.incident._alert_fixed", "probes.incident._replica_fixed",
               "probes.incident._onset", "probes.incident._slo_seen", "probes.incident._slo_fixed",
               "probes.incident.slo_states", "probes.incident.episodes", "probes.incident._decide")),
)


@dataclass(frozen=True)
class Firing:
    """An alert as it fired: seconds after time zero (negative: it was firing before)."""

    name: str
    labels: dict[str, str]
    firing_at: float
    resolved_at: float | None  # None: still firing when the range ended


@dataclass(frozen=True)
class Replacement:
    """A replica deleted and its replacement's start, seconds after time zero."""

    owner: str
    pod: str
    deleted: float
    started: float | None
    scheduled: float | None = None
    ready: float | None = None

    def phase(self, name: str) -> float | None:
        return {"scheduled": self.scheduled, "started": self.started, "ready": self.ready}[name]

    @classmethod
    def of(cls, row: dict[str, Any]) -> Replacement:
        """From a recovery row (chaos.record.recovery_from_events, a journal's recovery)."""
        return cls(owner(row["pod"]), row["pod"], row["deleted"], row.get("started"), row.get("scheduled"),
                   row.get("ready"))


@dataclass(frozen=True)
class Reading:
    """A model's indicator at one moment, seconds after time zero: each replica's value (the
    pod's name -> value; one series for a per-model indicator), or None where the query failed."""

    at: float
    values: dict[str, float] | None


def slo_key(symptom: dict[str, Any]) -> str:
    """Which series an SLO symptom reads: namespace/model:indicator."""
    return f"{symptom.get('namespace') or ''}/{symptom['model']}:{symptom['indicator']}"


@dataclass(frozen=True)
class Row:
    """One symptom's line in the verdict's table."""

    symptom: str
    recorded: str
    observed: str
    judgement: str  # ok | failed | unknown | not judged
    why: str

    def to_json(self) -> dict[str, str]:
        return {"symptom": self.symptom, "recorded": self.recorded, "observed": self.observed,
                "judgement": self.judgement, "why": self.why}


def _duration(text: str) -> bool:
    from probes.slo import SloError, seconds  # the indicators' own reading of a window

    try:
        return seconds(text) > 0
    except SloError:
        return False


def _number(value: Any, positive: bool = False) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and (value > 0 if positive else value >= 0)


def problems(symptoms: Any, fix: Any, where: str) -> list[str]:
    """What is wrong with a `symptoms` block and a `fixed` block, each entry and field named."""
    if not isinstance(symptoms, dict):
        return [f"{where}: symptoms: expected a mapping with tolerance, alerts and replicas, got {symptoms!r}"]
    found = [f"{where}: symptoms.{k}: unknown field; expected alerts, replicas, slo or tolerance"
             for k in sorted(set(symptoms) - {"tolerance", "alerts", "replicas", "slo"})]
    if not _number(symptoms.get("tolerance", DEFAULT_TOLERANCE)):
        found.append(f"{where}: symptoms.tolerance: expected seconds (0 or more), got {symptoms['tolerance']!r}")
    fields = {"alerts": ({"alert": str, "labels": dict, "firing_at": float}, {"resolved_at", "pod"}),
              "replicas": ({"owner": str, "pod": str, "deleted": float}, set(PHASES)),
              "slo": ({"model": str, "indicator": str, "threshold": float, "breached_at": float},
                      {"recovered_at", "namespace", "window"})}
    for section, (required, optional) in fields.items():
        entries = symptoms.get(section) or []
        if not isinstance(entries, list):
            found.append(f"{where}: symptoms.{section}: expected a list, got {entries!r}")
            continue
        for i, entry in enumerate(entries):
            at = f"{where}: symptoms.{section}[{i}]"
            if not isinstance(entry, dict):
                found.append(f"{at}: expected a mapping, got {entry!r}")
                continue
            found += [f"{at}.{k}: unknown field; expected one of {', '.join(sorted({*required, *optional}))}"
                      for k in sorted(set(entry) - set(required) - optional)]
            for key, kind in required.items():
                ok = _number(entry.get(key)) if kind is float else isinstance(entry.get(key), kind) and entry[key]
                if not ok:
                    what = "seconds (0 or more)" if kind is float else "a mapping" if kind is dict else "a name"
                    found.append(f"{at}.{key}: required, {what}; got {entry.get(key)!r}")
            for key in optional - {"pod", "namespace", "window"}:
                if entry.get(key) is not None and not _number(entry[key]):
                    found.append(f"{at}.{key}: expected seconds (0 or more) or null, got {entry[key]!r}")
            for key in optional & {"namespace", "window"}:
                if key in entry and not (isinstance(entry[key], str) and entry[key]):
                    found.append(f"{at}.{key}: expected a name, got {entry[key]!r}")
            if section == "slo" and isinstance(entry.get("window"), str) and not _duration(entry["window"]):
                found.append(f"{at}.window: expected a Prometheus duration above 0 (e.g. 30s, 1m), got "
                             f"{entry['window']!r}")
            if section == "slo" and entry.get("indicator") not in SLO_INDICATORS:
                found.append(f"{at}.indicator: expected one of {', '.join(SLO_INDICATORS)}, got "
                             f"{entry.get('indicator')!r}")
    return found + _fix_problems(fix, symptoms, where)


def _fix_problems(fix: Any, symptoms: dict[str, Any], where: str) -> list[str]:
    if fix is None:
        return []
    if not isinstance(fix, dict):
        return [f"{where}: fixed: expected a mapping with alerts, replicas and/or slo, got {fix!r}"]
    found = [f"{where}: fixed.{k}: unknown field; expected alerts, replicas or slo" for k in sorted(set(fix) - {
        "alerts", "replicas", "slo"})]
    # Each section: fix -> {the symptom's name: {its one budget: seconds}}, names its symptoms know.
    for section, field, key, none in (("alerts", "alert", "resolved_within", "alert"),
                                      ("slo", "model", "recovered_within", "SLO breach")):
        known = {e.get(field) for e in symptoms.get(section) or [] if isinstance(e, dict)}
        budgets = fix.get(section) or {}
        if not isinstance(budgets, dict):
            found.append(f"{where}: fixed.{section}: expected {field} name -> {{{key}: s}}, got {budgets!r}")
            continue
        for name, budget in budgets.items():
            if name not in known:
                found.append(f"{where}: fixed.{section}.{name}: no such symptom; expected one of "
                             f"{', '.join(sorted(str(n) for n in known)) or f'none (the timeline records no {none})'}")
            elif not isinstance(budget, dict) or set(budget) != {key} or not _number(budget[key], positive=True):
                found.append(f"{where}: fixed.{section}.{name}: expected {{{key}: seconds above 0}}, got {budget!r}")
    replicas = fix.get("replicas")
    if replicas is not None and (not isinstance(replicas, dict) or len(replicas) != 1
                                 or not set(replicas) <= set(REPLICA_BUDGETS)
                                 or not _number(next(iter(replicas.values())), positive=True)):
        found.append(f"{where}: fixed.replicas: expected {{started_within: seconds above 0}} or {{ready_within: "
                     f"seconds above 0}}, got {replicas!r}")
    return found


def owner(pod: str) -> str:
    """The pod's owner by name: its ReplicaSet (or LWS group, StatefulSet) less the pod's suffix."""
    return pod.rsplit("-", 1)[0]


def stable(labels: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in labels.items() if k not in IDENTITY_LABELS and k != "alertname"}


def _name(symptom: dict[str, Any]) -> str:
    if "alert" in symptom:
        labels = ",".join(f"{k}={v}" for k, v in sorted(stable(symptom.get("labels") or {}).items()))
        return f"alert {symptom['alert']}{{{labels}}}"
    return f"replica of {symptom['owner']}"


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _at(value: float | None) -> str:
    return "-" if value is None else f"+{value:.1f} s" if value >= 0 else f"{value:.1f} s"


def _matches(symptom: dict[str, Any], f: Firing) -> bool:
    want = stable(symptom.get("labels") or {})
    return f.name == symptom["alert"] and all(f.labels.get(k) == v for k, v in want.items())


def _alert_seen(symptom: dict[str, Any], firings: list[Firing], tolerance: float, until: float) -> Row:
    recorded = float(symptom["firing_at"])
    name, said = _name(symptom), f"fired {_at(recorded)}"
    mine = sorted((f for f in firings if _matches(symptom, f)), key=lambda f: f.firing_at)
    already = Row(name, said, f"firing since {_at(mine[0].firing_at)}", "unknown",
                  f"{name} was already firing before the replay's first fault") if mine and mine[0].firing_at < 0 \
        else None
    return _onset(name, said, "fired", [f.firing_at for f in mine if f.firing_at >= 0], recorded, tolerance, until,
                  already) or Row(name, said, "did not fire", "failed",
                                  f"{name} did not fire within {tolerance:g} s of {_at(recorded)} (watched to "
                                  f"{_at(until)})")


def _onset(name: str, said: str, verb: str, starts: list[float], recorded: float, tolerance: float, until: float,
           already: Row | None) -> Row | None:
    """A symptom that begins (an alert fires, a breach starts) against its recorded offset: seen
    within the tolerance, else `already` there at time zero, else not watched long enough, else
    seen off its offset; None: not seen at all."""
    within = [at for at in starts if abs(at - recorded) <= tolerance]
    if within:
        return Row(name, said, f"{verb} {_at(within[0])}", "ok", f"within {tolerance:g} s of {_at(recorded)}")
    if already is not None:
        return already
    if until < recorded + tolerance:
        return Row(name, said, f"not yet, watched to {_at(until)}", "unknown",
                   f"{name}: the replay ended at {_at(until)}, before {_at(recorded + tolerance)}")
    if starts:
        return Row(name, said, f"{verb} {_at(starts[0])}", "failed",
                   f"{name} {verb} {_at(starts[0])}, not within {tolerance:g} s of {_at(recorded)}")
    return None


def _replica_seen(symptom: dict[str, Any], replaced: list[Replacement], taken: set[int], tolerance: float,
                  until: float) -> Row:
    deleted = float(symptom["deleted"])
    name = _name(symptom)
    recorded = [(p, float(symptom[p])) for p in PHASES if symptom.get(p) is not None]
    said = ", ".join([f"deleted {_at(deleted)}", *(f"{_SAID[p]} {_at(at)}" for p, at in recorded)])
    # By deletion, then place in the list: (deleted, i) is unique, so the replacements are never compared.
    mine = sorted((r.deleted, i, r) for i, r in enumerate(replaced) if r.owner == symptom["owner"] and i not in taken)
    close = [m for m in mine if abs(m[0] - deleted) <= tolerance]
    if not close:
        if until < deleted + tolerance:
            return Row(name, said, f"not yet, watched to {_at(until)}", "unknown",
                       f"{name}: the replay ended at {_at(until)}, before {_at(deleted + tolerance)}")
        if mine:
            r = min(mine, key=lambda m: (abs(m[0] - deleted), m[1]))[2]
            return Row(name, said, f"deleted {_at(r.deleted)}", "failed",
                       f"{name} deleted {_at(r.deleted)}, not within {tolerance:g} s of {_at(deleted)}")
        return Row(name, said, "not deleted", "failed",
                   f"no {name} was deleted within {tolerance:g} s of {_at(deleted)} (watched to {_at(until)})")
    _, i, r = close[0]
    taken.add(i)
    seen = ", ".join([f"{r.pod} deleted {_at(r.deleted)}", *(f"{_SAID[p]} {_at(r.phase(p))}" for p, _ in recorded)])
    verdicts = [_phase(name, p, at, r.phase(p), tolerance, until) for p, at in recorded]
    bad = next((v for v in verdicts if v[0] == "failed"), None) or next(
        (v for v in verdicts if v[0] == "unknown"), None)
    if bad is not None:
        return Row(name, said, seen, *bad)
    if not recorded:
        return Row(name, said, seen, "ok", f"deleted within {tolerance:g} s of {_at(deleted)}")
    *first, last = ["deleted", *(_SAID[p] for p, _ in recorded)]
    return Row(name, said, seen, "ok", f"{', '.join(first)} and {last} within {tolerance:g} s of the recorded offsets")


def _phase(name: str, phase: str, recorded: float, seen: float | None, tolerance: float,
           until: float) -> tuple[str, str]:
    """One phase of a replacement against its recorded offset: (judgement, why)."""
    if seen is not None and abs(seen - recorded) <= tolerance:
        return "ok", ""
    if seen is None and until < recorded + tolerance:
        return "unknown", f"{name}: its replacement had not {_DONE[phase]} when the replay ended at {_at(until)}"
    if seen is None:
        return "failed", (f"{name}'s replacement had not {_DONE[phase]} by {_at(until)}, recorded {_at(recorded)} "
                          f"(tolerance {tolerance:g} s)")
    return "failed", f"{name}'s replacement {_SAID[phase]} {_at(seen)}, not within {tolerance:g} s of {_at(recorded)}"


def reproduced(symptoms: dict[str, Any], firings: list[Firing], replaced: list[Replacement],
               until: float, readings: dict[str, list[Reading]] | None = None) -> Verdict:
    """Every symptom seen again within the tolerance of its recorded offset (see the contract).
    `readings`: each SLO symptom's series (by `slo_key`) from before time zero to `until`."""
    tolerance = float(symptoms.get("tolerance", DEFAULT_TOLERANCE))
    taken: set[int] = set()
    rows = [_alert_seen(s, firings, tolerance, until) for s in symptoms.get("alerts") or []]
    # One owner's deletions are matched in order: each recorded one, earliest first, to the earliest
    # replay deletion of that owner within the tolerance not matched yet.
    ordered = sorted(symptoms.get("replicas") or [], key=lambda s: float(s["deleted"]))
    rows += [_replica_seen(s, replaced, taken, tolerance, until) for s in ordered]
    rows += [_slo_seen(s, slo_states(s, (readings or {}).get(slo_key(s), []), replaced), tolerance, until)
             for s in symptoms.get("slo") or []]
    return _decide(REPRODUCED, rows)


def slo_states(symptom: dict[str, Any], readings: list[Reading],
               replaced: list[Replacement]) -> list[tuple[float, str]]:
    """Each reading as (at, over|under|unseen) by the contract: over when a replica is over the
    threshold; unseen when the query failed, no replica had a value, or a replica that had one at
    time zero (the last reading with values before it) has none while its pod lives."""
    threshold = float(symptom["threshold"])
    ordered = sorted(readings, key=lambda r: r.at)
    before = [r for r in ordered if r.at <= 0 and r.values]
    at_zero = set(before[-1].values or {}) if before else set()
    deleted = {r.pod: r.deleted for r in replaced}
    out = []
    for r in ordered:
        values = r.values or {}
        if any(v > threshold for v in values.values()):
            out.append((r.at, OVER))
        elif not values or any(name not in values and not (name in deleted and deleted[name] <= r.at)
                               for name in at_zero):
            out.append((r.at, UNSEEN))
        else:
            out.append((r.at, UNDER))
    return out


def episodes(states: list[tuple[float, str]], until: float) -> list[tuple[float, float | None]]:
    """The breaches after time zero, (start, end): a run of samples over the threshold starting
    at or after it, ended by the first sample under it (None: not by `until`; silence is no end)."""
    found: list[tuple[float, float | None]] = []
    start: float | None = None
    for at, state in states:
        if at > until:
            break
        if state == OVER and start is None:
            start = at
        elif state == UNDER and start is not None:
            if start >= 0:  # one begun before time zero is not the replay's (see already_over)
                found.append((start, at))
            start = None
    if start is not None and start >= 0:
        found.append((start, None))
    return found


def already_over(states: list[tuple[float, str]]) -> bool:
    """Breached at time zero: the last sample before it that was seen was over."""
    seen = [state for at, state in states if at < 0 and state != UNSEEN]
    return bool(seen) and seen[-1] == OVER


def _slo_name(symptom: dict[str, Any]) -> str:
    where = f"{symptom['namespace']}/" if symptom.get("namespace") else ""
    return f"SLO {symptom['indicator']} of {where}{symptom['model']} over {float(symptom['threshold']):g}"


def _unseen(states: list[tuple[float, str]], start: float, end: float) -> list[float]:
    return [at for at, state in states if state == UNSEEN and start <= at <= end]


def _slo_seen(symptom: dict[str, Any], states: list[tuple[float, str]], tolerance: float, until: float) -> Row:
    recorded = float(symptom["breached_at"])
    name, said = _slo_name(symptom), f"breached {_at(recorded)}"
    lo, hi = max(0.0, recorded - tolerance), recorded + tolerance
    gaps = _unseen(states, lo, hi)
    hidden = None
    if until >= hi and (gaps or not any(lo <= at <= hi for at, _ in states)):
        where = f"from {_at(gaps[0])} to {_at(gaps[-1])}" if gaps else "at all"
        hidden = Row(name, said, f"not seen {where}", "unknown",
                     f"{name}: not seen {where}, where the breach was due (a silent replica is not health)")
    already = Row(name, said, "over before the replay", "unknown",
                  f"{name} was already breached before the replay's first fault") if already_over(states) else None
    # Unseen where the breach was due, one seen later may have begun unseen within the tolerance.
    return _onset(name, said, "breached", [start for start, _ in episodes(states, until)], recorded, tolerance, until,
                  already or hidden) or Row(name, said, "not breached", "failed",
                                            f"{name} was not breached within {tolerance:g} s of {_at(recorded)} "
                                            f"(watched to {_at(until)})")


def _alert_fixed(symptom: dict[str, Any], firings: list[Firing], budgets: dict[str, Any], until: float) -> Row:
    name, recorded = _name(symptom), float(symptom["firing_at"])
    resolved = symptom.get("resolved_at")
    said = f"fired {_at(recorded)}" + (f", resolved {_at(float(resolved))}" if resolved is not None else "")
    budget = (budgets.get(symptom["alert"]) or {}).get("resolved_within")
    mine = [f for f in firings if _matches(symptom, f)]
    if any(f.firing_at < 0 for f in mine):
        return Row(name, said, "firing before the replay", "unknown",
                   f"{name} was already firing before the replay's first fault")
    if not mine:
        return Row(name, said, f"did not fire (watched to {_at(until)})", "ok", "did not come back")
    def lasted(f: Firing) -> float:
        return (f.resolved_at if f.resolved_at is not None else until) - f.firing_at

    worst = max(mine, key=lambda f: (lasted(f), -f.firing_at))
    seen = f"fired {_at(worst.firing_at)}, " + (f"still firing after {lasted(worst):.1f} s"
                                                 if worst.resolved_at is None
                                                 else f"resolved after {lasted(worst):.1f} s")
    if budget is None:
        return Row(name, said, seen, "failed", f"{name} came back: {seen}")
    budget = float(budget)
    if lasted(worst) > budget:
        return Row(name, said, seen, "failed", f"{name} came back and lasted {lasted(worst):.1f} s, over the "
                                               f"fix's {budget:g} s ({seen})")
    still = next((f for f in mine if f.resolved_at is None), None)
    if still is not None:
        return Row(name, said, seen, "unknown", f"{name} still firing when the replay ended, "
                                                f"{lasted(still):.1f} s of the fix's {budget:g} s")
    return Row(name, said, seen, "ok", f"resolved within the fix's {budget:g} s")


def _replica_fixed(symptom: dict[str, Any], replaced: list[Replacement], budgets: dict[str, Any],
                   until: float) -> Row:
    name = _name(symptom)
    said = ", ".join([f"deleted {_at(float(symptom['deleted']))}",
                      *(f"{_SAID[p]} {_at(float(symptom[p]))}" for p in PHASES if symptom.get(p) is not None)])
    mine = sorted((r for r in replaced if r.owner == symptom["owner"]), key=lambda r: r.deleted)
    if not budgets:
        return Row(name, said, f"{len(mine)} replaced", "not judged", "no replica budget in `fixed`")
    if not mine:
        return Row(name, said, "none deleted", "ok", "no replica lost")
    key, budget = next(iter(budgets.items()))
    phase, budget = REPLICA_BUDGETS[key], float(budget)
    took = [(_or(r.phase(phase), until) - r.deleted, r) for r in mine]
    for spent, r in took:
        if spent > budget:
            return Row(name, said, f"{r.pod} deleted {_at(r.deleted)}, {_SAID[phase]} {_at(r.phase(phase))}", "failed",
                       f"{name} {r.pod} took {spent:.1f} s to {_DO[phase]} again, over the fix's {budget:g} s")
    for spent, r in took:
        if r.phase(phase) is None:
            return Row(name, said, f"{r.pod} deleted {_at(r.deleted)}, not {_SAID[phase]}", "unknown",
                       f"{name} {r.pod} had not {_DONE[phase]} when the replay ended, {spent:.1f} s of the fix's "
                       f"{budget:g} s")
    return Row(name, said, f"{len(mine)} replaced", "ok", f"each {_SAID[phase]} within the fix's {budget:g} s")


def _slo_fixed(symptom: dict[str, Any], states: list[tuple[float, str]], budget: float | None,
               until: float) -> Row:
    name, recorded = _slo_name(symptom), float(symptom["breached_at"])
    ended = symptom.get("recovered_at")
    said = f"breached {_at(recorded)}" + (f", under again {_at(float(ended))}" if ended is not None else "")
    if already_over(states):
        return Row(name, said, "over before the replay", "unknown",
                   f"{name} was already breached before the replay's first fault")
    found = episodes(states, until)
    # Unseen outside every breach (none, or after one ended): a breach may have come back unseen.
    gaps = [at for at in _unseen(states, 0.0, until) if not any(s <= at < _or(e, math.inf) for s, e in found)]
    where = f"from {_at(gaps[0])} to {_at(gaps[-1])}" if gaps else "at all"
    unseen = Row(name, said, f"not seen {where}", "unknown", f"{name}: not seen {where} (a silent replica is not "
                                                            "health)")
    if not found:
        if gaps or not any(0 <= at <= until for at, _ in states):
            return unseen
        return Row(name, said, f"not breached (watched to {_at(until)})", "ok", "did not come back")

    def lasted(e: tuple[float, float | None]) -> float:
        return _or(e[1], until) - e[0]

    worst = max(found, key=lambda e: (lasted(e), -e[0]))
    seen = f"breached {_at(worst[0])}, " + (f"not under again after {lasted(worst):.1f} s" if worst[1] is None
                                            else f"under again after {lasted(worst):.1f} s")
    if budget is None:
        return Row(name, said, seen, "failed", f"{name} came back: {seen}")
    if lasted(worst) > budget:
        return Row(name, said, seen, "failed", f"{name} came back and lasted {lasted(worst):.1f} s, over the "
                                               f"fix's {budget:g} s ({seen})")
    still = next((e for e in found if e[1] is None), None)
    if still is not None:
        return Row(name, said, seen, "unknown", f"{name} not under again when the replay ended, "
                                                f"{lasted(still):.1f} s of the fix's {budget:g} s")
    if gaps:
        return unseen
    return Row(name, said, seen, "ok", f"under again within the fix's {budget:g} s")


def fixed(symptoms: dict[str, Any], fix: dict[str, Any], firings: list[Firing], replaced: list[Replacement],
          until: float, readings: dict[str, list[Reading]] | None = None) -> Verdict:
    """No symptom came back, or each within its budget in `fix` (see the contract)."""
    budgets = fix.get("alerts") or {}
    rows = [_alert_fixed(s, firings, budgets, until) for s in symptoms.get("alerts") or []]
    rows += [_replica_fixed(s, replaced, fix.get("replicas") or {}, until)
             for s in symptoms.get("replicas") or []]
    slo_budgets = fix.get("slo") or {}
    for s in symptoms.get("slo") or []:
        budget = (slo_budgets.get(s["model"]) or {}).get("recovered_within")
        states = slo_states(s, (readings or {}).get(slo_key(s), []), replaced)
        rows.append(_slo_fixed(s, states, None if budget is None else float(budget), until))
    return _decide(FIXED, rows)


def _decide(expect: str, rows: list[Row]) -> Verdict:
    """The first failed row fails, else the first unknown one, else ok; nothing judged is unknown."""
    table = [r.to_json() for r in rows]
    judged = [r for r in rows if r.judgement != "not judged"]
    bad = next((r for r in judged if r.judgement == "failed"), None)
    if bad is not None:
        return failed(f"not {expect}: {bad.why}", expect=expect, symptoms=table)
    open_ = next((r for r in judged if r.judgement == "unknown"), None)
    if open_ is not None:
        return unknown(f"{expect}? {open_.why}", expect=expect, symptoms=table)
    if not judged:
        return unknown(f"{expect}? no symptom to judge", expect=expect, symptoms=table)
    return passed(f"{expect}: {len(judged)} of {len(judged)} symptom(s) "
                  + ("seen again within tolerance" if expect == REPRODUCED else "held by the fix"),
                  expect=expect, symptoms=table, impact_seen=expect == REPRODUCED)
