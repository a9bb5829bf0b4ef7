"""An incident's symptoms, judged against a replay: did it reproduce, and does the fix hold?

`kilocard record` writes the symptoms an incident showed beside its faults (chaos.record): the
alerts that fired other than the faults' own (an SLO burn), and the replicas that were deleted
and replaced. Offsets count from the incident's first fault; in the replay, from the replay's
first fault (time zero). Pod names change between runs: an alert is matched by its name and its
recorded labels less the pod's identity (`IDENTITY_LABELS`), a deleted replica by its owner (the
pod name less its last segment: the ReplicaSet, or the LWS group).

    reproduced   every symptom seen again, each within `tolerance` s of its recorded offset
    fixed        no alert symptom fires again (or, with a budget in `fixed`, each resolves within
                 it), and with a replica budget, each replaced replica started within it

    pure:    reproduced, fixed (over Firing and Replacement lists)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from probes.verdict import Contract, Verdict, failed, passed, unknown

REPRODUCED, FIXED = "reproduced", "fixed"
EXPECT = (REPRODUCED, FIXED)
DEFAULT_TOLERANCE = 15.0
# Labels that name one pod or scrape, not the symptom: a replica rebuilt since has another name.
IDENTITY_LABELS = ("pod", "pod_name", "instance", "container", "endpoint", "uid", "alertstate")

CONTRACTS = (
    Contract(
        "incident_symptoms", "probe",
        asserts="expect reproduced: every recorded symptom is seen in the replay, each within `tolerance` s of its "
                "recorded offset: an alert (its name and stable labels, on any replica) fires after time zero, a "
                "replica of the recorded owner is deleted and its replacement started (one owner's recorded "
                "deletions, earliest first, each matched to the earliest replay deletion of that owner within the "
                "tolerance not matched yet). expect fixed: no alert symptom fires "
                "after time zero, or each that does resolves within its `fixed` budget; with a replica budget, "
                "each replacement starts within it of its deletion",
        time_zero="the replay's first fault (the run's ledger), as the recorded offsets count from the incident's",
        interval="[time zero, the probe's call]: the replay's faults and its `observe` seconds; a symptom whose "
                 "recorded offset plus the tolerance (or whose fix budget) reaches past the end cannot be judged",
        missing="an alert already firing before time zero is not reproduced by the replay and cannot show a fix: "
                "unknown; no Events or ALERTS series for a symptom whose window has passed: not seen (failed for "
                "reproduced, ok for fixed); a window not yet passed: unknown. Replayed as fixed, a timeline whose "
                "faults, resolved before it starts, touch no replica of a model the alerts name is refused "
                "(exit 2, nothing applied): a fault that lands on nothing shows no symptom and would pass",
        exceptions="Prometheus or the apiserver not answering: unknown; a 4xx, a bug, an unknown expectation: error",
        outcomes=(("ok", "reproduced (every symptom within tolerance), or fixed (none came back or each within "
                   "its budget)"),
                  ("failed", "not reproduced (the first symptom not seen, or seen off its offset), or not fixed "
                   "(the first symptom that came back, named)"),
                  ("unknown", "a symptom could not be judged in the interval, and none failed")),
        judge=("probes.incident.reproduced", "probes.incident.fixed", "probes.incident._alert_seen",
               "probes.incident._replica_seen", "probes.incident._alert_fixed", "probes.incident._replica_fixed",
               "probes.incident._decide")),
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


def _number(value: Any, positive: bool = False) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and (value > 0 if positive else value >= 0)


def problems(symptoms: Any, fix: Any, where: str) -> list[str]:
    """What is wrong with a `symptoms` block and a `fixed` block, each entry and field named."""
    if not isinstance(symptoms, dict):
        return [f"{where}: symptoms: expected a mapping with tolerance, alerts and replicas, got {symptoms!r}"]
    found = [f"{where}: symptoms.{k}: unknown field; expected alerts, replicas or tolerance"
             for k in sorted(set(symptoms) - {"tolerance", "alerts", "replicas"})]
    if not _number(symptoms.get("tolerance", DEFAULT_TOLERANCE)):
        found.append(f"{where}: symptoms.tolerance: expected seconds (0 or more), got {symptoms['tolerance']!r}")
    fields = {"alerts": ({"alert": str, "labels": dict, "firing_at": float}, {"resolved_at", "pod"}),
              "replicas": ({"owner": str, "pod": str, "deleted": float}, {"started"})}
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
            for key in optional - {"pod"}:
                if entry.get(key) is not None and not _number(entry[key]):
                    found.append(f"{at}.{key}: expected seconds (0 or more) or null, got {entry[key]!r}")
    return found + _fix_problems(fix, symptoms, where)


def _fix_problems(fix: Any, symptoms: dict[str, Any], where: str) -> list[str]:
    if fix is None:
        return []
    if not isinstance(fix, dict):
        return [f"{where}: fixed: expected a mapping with alerts and/or replicas, got {fix!r}"]
    found = [f"{where}: fixed.{k}: unknown field; expected alerts or replicas" for k in sorted(set(fix) - {
        "alerts", "replicas"})]
    names = {a.get("alert") for a in symptoms.get("alerts") or [] if isinstance(a, dict)}
    alerts = fix.get("alerts") or {}
    if not isinstance(alerts, dict):
        return [*found, f"{where}: fixed.alerts: expected alert name -> {{resolved_within: s}}, got {alerts!r}"]
    for name, budget in alerts.items():
        if name not in names:
            found.append(f"{where}: fixed.alerts.{name}: no such symptom; expected one of "
                         f"{', '.join(sorted(str(n) for n in names)) or 'none (the timeline records no alert)'}")
        elif not isinstance(budget, dict) or set(budget) != {"resolved_within"} or not _number(
                budget["resolved_within"], positive=True):
            found.append(f"{where}: fixed.alerts.{name}: expected {{resolved_within: seconds above 0}}, got {budget!r}")
    replicas = fix.get("replicas")
    if replicas is not None and (not isinstance(replicas, dict) or set(replicas) != {"started_within"}
                                 or not _number(replicas["started_within"], positive=True)):
        found.append(f"{where}: fixed.replicas: expected {{started_within: seconds above 0}}, got {replicas!r}")
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


def _at(value: float | None) -> str:
    return "-" if value is None else f"+{value:.1f} s" if value >= 0 else f"{value:.1f} s"


def _matches(symptom: dict[str, Any], f: Firing) -> bool:
    want = stable(symptom.get("labels") or {})
    return f.name == symptom["alert"] and all(f.labels.get(k) == v for k, v in want.items())


def _alert_seen(symptom: dict[str, Any], firings: list[Firing], tolerance: float, until: float) -> Row:
    recorded = float(symptom["firing_at"])
    name, said = _name(symptom), f"fired {_at(recorded)}"
    mine = sorted((f for f in firings if _matches(symptom, f)), key=lambda f: f.firing_at)
    after = [f for f in mine if f.firing_at >= 0]
    within = [f for f in after if abs(f.firing_at - recorded) <= tolerance]
    if within:
        return Row(name, said, f"fired {_at(within[0].firing_at)}", "ok",
                   f"within {tolerance:g} s of {_at(recorded)}")
    if mine and mine[0].firing_at < 0:
        return Row(name, said, f"firing since {_at(mine[0].firing_at)}", "unknown",
                   f"{name} was already firing before the replay's first fault")
    if until < recorded + tolerance:
        return Row(name, said, f"not yet, watched to {_at(until)}", "unknown",
                   f"{name}: the replay ended at {_at(until)}, before {_at(recorded + tolerance)}")
    if after:
        return Row(name, said, f"fired {_at(after[0].firing_at)}", "failed",
                   f"{name} fired {_at(after[0].firing_at)}, not within {tolerance:g} s of {_at(recorded)}")
    return Row(name, said, "did not fire", "failed",
               f"{name} did not fire within {tolerance:g} s of {_at(recorded)} (watched to {_at(until)})")


def _replica_seen(symptom: dict[str, Any], replaced: list[Replacement], taken: set[int], tolerance: float,
                  until: float) -> Row:
    deleted, started = float(symptom["deleted"]), symptom.get("started")
    name = _name(symptom)
    said = f"deleted {_at(deleted)}, started {_at(started)}"
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
    seen = f"{r.pod} deleted {_at(r.deleted)}, started {_at(r.started)}"
    if started is None:
        return Row(name, said, seen, "ok", f"deleted within {tolerance:g} s of {_at(deleted)}")
    if r.started is not None and abs(r.started - float(started)) <= tolerance:
        return Row(name, said, seen, "ok", f"deleted and started within {tolerance:g} s of the recorded offsets")
    if r.started is None and until < float(started) + tolerance:
        return Row(name, said, seen, "unknown",
                   f"{name}: its replacement had not started when the replay ended at {_at(until)}")
    if r.started is None:
        return Row(name, said, seen, "failed", f"{name}'s replacement had not started by {_at(until)}, recorded "
                                               f"{_at(float(started))} (tolerance {tolerance:g} s)")
    return Row(name, said, seen, "failed", f"{name}'s replacement started {_at(r.started)}, not within "
                                           f"{tolerance:g} s of {_at(float(started))}")


def reproduced(symptoms: dict[str, Any], firings: list[Firing], replaced: list[Replacement],
               until: float) -> Verdict:
    """Every symptom seen again within the tolerance of its recorded offset (see the contract)."""
    tolerance = float(symptoms.get("tolerance", DEFAULT_TOLERANCE))
    taken: set[int] = set()
    rows = [_alert_seen(s, firings, tolerance, until) for s in symptoms.get("alerts") or []]
    # One owner's deletions are matched in order: each recorded one, earliest first, to the earliest
    # replay deletion of that owner within the tolerance not matched yet.
    ordered = sorted(symptoms.get("replicas") or [], key=lambda s: float(s["deleted"]))
    rows += [_replica_seen(s, replaced, taken, tolerance, until) for s in ordered]
    return _decide(REPRODUCED, rows)


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


def _replica_fixed(symptom: dict[str, Any], replaced: list[Replacement], budget: Any, until: float) -> Row:
    name = _name(symptom)
    said = f"deleted {_at(float(symptom['deleted']))}, started {_at(symptom.get('started'))}"
    mine = sorted((r for r in replaced if r.owner == symptom["owner"]), key=lambda r: r.deleted)
    if budget is None:
        return Row(name, said, f"{len(mine)} replaced", "not judged", "no replica budget in `fixed`")
    if not mine:
        return Row(name, said, "none deleted", "ok", "no replica lost")
    budget = float(budget)
    took = [((r.started if r.started is not None else until) - r.deleted, r) for r in mine]
    for spent, r in took:
        if spent > budget:
            return Row(name, said, f"{r.pod} deleted {_at(r.deleted)}, started {_at(r.started)}", "failed",
                       f"{name} {r.pod} took {spent:.1f} s to start again, over the fix's {budget:g} s")
    for spent, r in took:
        if r.started is None:
            return Row(name, said, f"{r.pod} deleted {_at(r.deleted)}, not started", "unknown",
                       f"{name} {r.pod} not started when the replay ended, {spent:.1f} s of the fix's {budget:g} s")
    return Row(name, said, f"{len(mine)} replaced", "ok", f"each started within the fix's {budget:g} s")


def fixed(symptoms: dict[str, Any], fix: dict[str, Any], firings: list[Firing], replaced: list[Replacement],
          until: float) -> Verdict:
    """No symptom came back, or each within its budget in `fix` (see the contract)."""
    budgets = fix.get("alerts") or {}
    rows = [_alert_fixed(s, firings, budgets, until) for s in symptoms.get("alerts") or []]
    rows += [_replica_fixed(s, replaced, (fix.get("replicas") or {}).get("started_within"), until)
             for s in symptoms.get("replicas") or []]
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
