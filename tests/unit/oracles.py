"""Reference verdicts, written from docs/verdicts.md and nothing else: small, slow and plain, each
evaluating its contract sample by sample (or moment by moment on a dense grid). They share no code
with probes/ or chaos/ beyond the data types they read; tests/unit/test_verdict_oracles.py requires
the production verdicts to agree with them on generated timelines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


# --- slo_recovered_within ----------------------------------------------------------------------------
@dataclass(frozen=True)
class SloCase:
    samples: list[Any]  # probes.slo.Sample
    fault_at: float
    threshold: float
    deadline: float
    hold: float
    blind: float
    scrape: float
    expect_impact: bool
    replicas: bool
    expected: frozenset[str] = frozenset()  # replicas Ready at time zero: a series expected, seen or not


def sample_states(case: SloCase) -> list[tuple[float, str, bool]]:
    """(time, healthy|breach|unknown, over the threshold) of each sample up to the deadline, by the
    contract's 'missing, NaN or vanished data'."""
    due = case.fault_at + case.deadline
    out = []
    ever: set[str] = set(case.expected) if case.replicas else set()
    for s in sorted((s for s in case.samples if s.at <= due), key=lambda s: s.at):
        if s.error:
            out.append((s.at, "unknown", False))
            continue
        if case.replicas:
            ever.update(s.values)
            ever.update(s.expected)  # settled by now: must show a series, seen before or not
        over = any(v > case.threshold for v in s.values.values())
        if over:
            out.append((s.at, "breach", True))
            continue
        gone_missing = [name for name in ever if name not in s.values]
        not_ready = [n for n in gone_missing if s.pods is not None and n in s.pods and not s.pods[n]]
        ready_or_unknown = [n for n in gone_missing if s.pods is None or s.pods.get(n) is True]
        everything_down = s.pods is not None and True not in s.pods.values()
        if not_ready:
            out.append((s.at, "breach", False))
        elif not s.values:
            out.append((s.at, "breach" if (s.impact or everything_down) else "unknown", False))
        elif ready_or_unknown:
            out.append((s.at, "breach" if s.impact else "unknown", False))
        else:
            out.append((s.at, "healthy", False))
    return out


def slo_recovered(case: SloCase) -> tuple[bool, str, float | None]:
    """(ok, outcome, recovered_after) at the deadline."""
    everything = sample_states(case)
    states = [x for x in everything if x[0] >= case.fault_at]
    values_seen = any(s.values for s in case.samples if case.fault_at <= s.at <= case.fault_at + case.deadline
                      and not s.error)
    counts_from = case.fault_at + (case.scrape if case.expect_impact else 0.0)
    breaches = [at for at, state, _ in states if state == "breach" and at >= counts_from]
    over_before = [at for at, _, over in everything if over and case.fault_at - case.scrape <= at < case.fault_at]
    if case.expect_impact and over_before:
        until = breaches[0] if breaches else float("inf")
        if not any(state == "healthy" and over_before[-1] < at < until for at, state, _ in everything):
            return False, "unknown", None
    if not values_seen and not breaches:
        return False, "unknown", None
    last = states[-1][0] if states else None
    recovery = None
    for at, _, _ in states:  # the earliest R the contract allows, tried one by one
        if at < case.fault_at + case.blind or last is None or last - at < case.hold:
            continue
        if all(state == "healthy" for t, state, _ in states if t >= at):
            recovery = at
            break
    unseen = [at for at, state, _ in states if state == "unknown" and at >= counts_from
              and (recovery is None or at < recovery)]
    after = None if recovery is None else round(recovery - case.fault_at, 3)
    if case.expect_impact and not breaches:
        return False, ("unknown" if unseen else "no_impact"), after
    if recovery is not None and breaches:
        return True, "recovered", after
    if recovery is not None:
        return (False, "unknown", after) if unseen else (True, "held", after)
    if not breaches:
        return False, "unknown", None
    return False, "not_recovered", None


# --- tp groups, and the first moment within a budget ---------------------------------------------------
def group_problems(pods: list[Any], model: str, cards_per_node: int) -> list[str] | None:
    """None when the model has no group; else what keeps any group from being whole and Ready."""
    groups: dict[str, list[Any]] = {}
    for p in pods:
        if p.model == model and not p.deleting:
            groups.setdefault(p.group, []).append(p)
    if not groups:
        return None
    problems = []
    for key, members in groups.items():
        size = int(members[0].labels.get("kilocard.io/group-size", len(members)))
        tp = int(members[0].labels.get("kilocard.io/tp-size", sum(m.cards for m in members) or 1))
        if len(members) < size:
            problems.append(f"{key} incomplete")
        if any(m.node is None for m in members):
            problems.append(f"{key} unscheduled")
        if not all(m.ready for m in members):
            problems.append(f"{key} not Ready")
        if tp <= cards_per_node and len({m.node for m in members if m.node}) > 1:
            problems.append(f"{key} split")
    return problems


def whole(snapshot: Any, model: str) -> bool:
    cards = max((n.cards_capacity for n in snapshot.nodes), default=0)
    found = group_problems(list(snapshot.pods), model, cards)
    return found is not None and not found


def recovered(snapshot: Any, model: str, faulted: set[str], desired: int | None) -> bool:
    live = [p for p in snapshot.pods if p.model == model and not p.deleting]
    return (whole(snapshot, model) and (desired is None or len(live) >= desired)
            and not any(p.node in faulted for p in live))


def first_moment(moments: list[Any], holds: Any, zero: float, budget: float, step: float) -> tuple[str, float | None]:
    """On a grid of `step` from time zero to the deadline: the state at each point is the last
    moment at or before it (a moment before zero stands at zero); 'ok' at the first point it holds,
    'unknown' if no moment is at or before the deadline, else 'failed'."""
    if not any(m.at <= zero + budget for m in moments):
        return "unknown", None
    t = zero
    while t <= zero + budget + 1e-9:
        standing = [m for m in moments if m.at <= t + 1e-9]
        if standing and holds(standing[-1].snapshot):
            return "ok", round(t - zero, 3)
        t += step
    return "failed", None


# --- no_hung_groups -----------------------------------------------------------------------------------
def hung_outcome(snapshot: Any, figures: Any, model: str, window: float) -> str:
    groups: dict[str, list[Any]] = {}
    for p in snapshot.pods:
        if p.model == model and not p.deleting:
            groups.setdefault(p.group, []).append(p)
    judged = {}
    for key, members in groups.items():
        size = int(members[0].labels.get("kilocard.io/group-size", len(members)))
        settled = all(p.ready_since is None or figures.at - p.ready_since >= window for p in members)
        if len(members) == size and all(p.ready for p in members) and settled:
            judged[key] = members
    leads = {key: min(members, key=lambda p: p.rank) for key, members in groups.items()}
    series = {key: figures.replicas.get((lead.namespace, lead.name)) for key, lead in leads.items()}
    if all(v is None for v in series.values()):
        return "unknown"
    if not judged:
        return "unknown"
    demand = any(v is not None and v.finished > 0 for v in series.values()) or (figures.demand or 0) > 0
    for key in judged:
        p = series[key]
        if p is None:
            return "hung"
        if p.finished <= 0:
            gauges = (p.running, p.waiting, p.waiting_change)
            holding = demand if all(g is None for g in gauges) else any((g or 0) > 0 for g in gauges)
            if holding:
                return "hung"
    return "progressing" if demand else "unknown"


# --- devices_tainted_within ---------------------------------------------------------------------------
def taint_outcome(taints: list[Any], faults: list[Any], budget: float, now: float) -> str:
    if not faults:
        return "unknown"
    states = []
    for f in faults:
        mine = [t for t in taints if t.node == f.node and t.device == f"gpu-{f.card}"
                and t.effect in ("NoSchedule", "NoExecute")]
        own = [t.added for t in mine if t.added is not None and t.added > f.applied_at - 1.0]
        if own:
            states.append("late" if max(0.0, min(own) - f.applied_at) > budget else "tainted")
        elif mine:
            states.append("stale")
        elif f.reverted:
            states.append("reverted")
        else:
            states.append("pending" if now - f.applied_at <= budget else "untainted")
    if {"late", "untainted"} & set(states):
        return "not_tainted"
    if {"stale", "reverted"} & set(states):
        return "unknown"
    if "pending" in states:
        return "pending"
    return "tainted"


# --- stop conditions ----------------------------------------------------------------------------------
def stop_fires(kind: str, snapshot: Any, model: str, limit: float = 0.0, max_unready: int = 0,
               values: dict[str, float] | None = None, now: float = 0.0, window: float = 30.0) -> bool:
    if kind == "slo" and (not values or max(values.values()) > limit):
        return True
    if snapshot is None:
        return True
    pods = [p for p in snapshot.pods if p.model == model and not p.deleting]
    if kind == "unhealthy":
        return sum(1 for p in pods if not p.ready) > max_unready
    groups: dict[str, list[Any]] = {}
    for p in pods:
        groups.setdefault(p.group, []).append(p)
    if kind == "zero-ready":
        return not any(len(m) == int(m[0].labels.get("kilocard.io/group-size", len(m))) and all(p.ready for p in m)
                       for m in groups.values())
    # slo, under the limit: a lead of a group wholly Ready for twice the window with no series
    for members in groups.values():
        settled = all(p.ready and (p.ready_since is None or p.ready_since <= now - 2 * window) for p in members)
        if settled and min(members, key=lambda p: p.rank).name not in (values or {}):
            return True
    return False


# --- the run's verdict and its expectation ---------------------------------------------------------------
def run_verdict(journal: dict[str, Any]) -> tuple[int, str]:
    """(exit, basis) of a journal: the first thing that fails, in the contract's order."""
    def basis_of(entry: dict[str, Any]) -> str:
        if entry.get("status") == "failed" or entry.get("exception"):
            return "error"
        out = entry.get("output")
        ours = isinstance(out, dict) and out.get("verdict") in ("ok", "failed") and (
            "judgement" in out or ((entry.get("activity") or {}).get("provider") or {}).get("module")
            == "probes.chaostoolkit")
        return "unknown" if ours and "unknown" in (out.get("judgement"), out.get("outcome")) else "judged"

    if journal["status"] == "interrupted":
        fired = journal.get("kilocard_stop")
        return (3, "unknown" if fired.get("blind") else "judged") if fired else (3, "error")
    before = journal["steady_states"]["before"]
    if before is not None and before["steady_state_met"] is False:
        failing = [p for p in before["probes"] if not p["tolerance_met"]]
        return 1, basis_of(failing[0]) if failing else "error"
    for entry in journal["run"]:
        activity = entry["activity"]
        if entry.get("status") == "failed":
            return 1, "error"
        out = entry.get("output")
        ours = isinstance(out, dict) and out.get("verdict") in ("ok", "failed") and (
            "judgement" in out or (activity.get("provider") or {}).get("module") == "probes.chaostoolkit")
        tolerance = activity.get("tolerance")
        within = tolerance is None or (isinstance(out, dict) and str(out.get(tolerance["target"])) == "ok")
        if (ours and not out.get("ok")) or not within:
            return 1, basis_of(entry)
        if activity.get("timeout") and entry.get("duration") is not None and entry["duration"] > activity["timeout"]:
            return 1, "error"
    if journal["status"] != "completed":
        return 1, "error"
    if journal.get("deviated"):
        failing = [p for p in journal["steady_states"]["after"]["probes"] if not p["tolerance_met"]]
        return 1, basis_of(failing[0]) if failing else "error"
    return 0, "judged"


def expectation_met(expected_exit: int, prefix: str, code: int, reason: str, basis: str) -> bool:
    return code == expected_exit and reason.startswith(prefix) and basis == "judged"


def unseen(landed: list[dict[str, Any] | None], outputs: list[Any]) -> bool:
    """Does the run fail for want of anything showing its faults happened?"""
    unconfirmed = [x for x in landed if (x or {}).get("status") != "confirmed"]
    return bool(unconfirmed) and not any(isinstance(o, dict) and o.get("impact_seen") for o in outputs)


# --- placement_holds ----------------------------------------------------------------------------------
def placement_ok(snapshot: Any, model: str, key: str, max_skew: int, guaranteed: bool) -> bool:
    scheduled = [p for p in snapshot.pods if p.model == model and not p.deleting and p.node]
    if not scheduled:
        return False
    nodes = {n.name: n for n in snapshot.nodes}
    domain_of = {p.name: nodes[p.node].labels.get(key, f"<no {key}>") for p in scheduled if p.node in nodes}
    count: dict[str, int] = {}
    for d in domain_of.values():
        count[d] = count.get(d, 0) + 1
    required = any(key in p.required_anti_affinity for p in scheduled)
    declared = required or any(key in p.hard_spread for p in scheduled)
    if guaranteed and not declared:
        return False
    if required:
        return all(n <= 1 for n in count.values())
    selector = scheduled[0].node_selector
    usable = {n.labels.get(key) for n in snapshot.nodes if n.ready and not n.unschedulable and key in n.labels
              and all(n.labels.get(k) == v for k, v in selector.items())}
    per = [count.get(d, 0) for d in usable | set(count)]
    return max(per) - min(per) <= max_skew


# --- capacity_fits ------------------------------------------------------------------------------------
def capacity_ok(snapshot: Any, model: str, need_tokens: float, per_token: int, headroom: float, per_card: int,
                losing: tuple[str, ...], shared: float = 0.0, without: frozenset = frozenset()) -> bool:
    """`need_tokens`: the requests' own tokens in flight; `shared`: the prefix held once per serving
    replica; a replica's KV cache in tokens where its rank-lowest pod that says it says it, else its
    cards x `per_card` bytes."""
    pods = [p for p in snapshot.pods if p.model == model and not p.deleting]
    if not pods:
        return False
    supply, serving = 0.0, 0
    for group in {p.group for p in pods}:
        members = [p for p in pods if p.group == group]
        if all(p.ready and p.node not in losing and (p.namespace, p.name) not in without for p in members):
            serving += 1
            said = [p.kv_cache_tokens for p in sorted(members, key=lambda p: p.rank) if p.kv_cache_tokens]
            supply += said[0] * per_token if said else sum(p.cards for p in members) * per_card
    return supply >= (need_tokens + shared * serving) * per_token * (1 + headroom)


# --- remediated_within (quarantine) ---------------------------------------------------------------------
def quarantined_and_drained(snapshot: Any, node: str, models: tuple[str, ...], taint_keys: tuple[str, ...],
                            labels: tuple[str, ...]) -> bool:
    view = next((n for n in snapshot.nodes if n.name == node), None)
    if view is None or not view.unschedulable:
        return False
    if not (any(t.split("=")[0].split(":")[0] in taint_keys for t in view.taints)
            or any(label in view.labels for label in labels)):
        return False
    theirs = [p for p in snapshot.pods if p.model in models and not p.deleting]
    return not any(p.node == node for p in theirs) and all(p.ready for p in theirs)


# --- the guards ---------------------------------------------------------------------------------------
def guard_refusals(pods_taken: dict[tuple[str, str], Any], nodes: set[str], cards: int, snapshot: Any,
                   limits: Any, opted_in: set[str], room_ok: dict[tuple[str, str], bool], context: str | None) -> set[str]:
    """Which limits refuse the plan."""
    refused = set()
    if limits.contexts and context not in limits.contexts:
        refused.add("contexts")
    if len(pods_taken) > limits.max_pods:
        refused.add("max_pods")
    if len(nodes) > limits.max_nodes:
        refused.add("max_nodes")
    if cards > limits.max_cards:
        refused.add("max_cards")
    for namespace, model in {(p.namespace, p.model) for p in pods_taken.values() if p is not None}:
        left = 0
        mine = [p for p in snapshot.pods if p.model == model and p.namespace == namespace and not p.deleting]
        for group in {p.group for p in mine}:
            members = [p for p in mine if p.group == group]
            size = int(members[0].labels.get("kilocard.io/group-size", len(members)))
            if len(members) == size and all(p.ready and (p.namespace, p.name) not in pods_taken for p in members):
                left += 1
        if left < limits.min_ready:
            refused.add("min_ready")
        if limits.room and room_ok.get((namespace, model)) is False:
            refused.add("room")
    if limits.require_opt_in and {ns for ns, _ in pods_taken} - opted_in:
        refused.add("require_opt_in")
    return refused


# --- incident_symptoms ---------------------------------------------------------------------------------
_IDENTITY = {"pod", "pod_name", "instance", "container", "endpoint", "uid", "alertstate", "alertname"}


def _same_alert(symptom: dict[str, Any], firing: Any) -> bool:
    wanted = {k: str(v) for k, v in (symptom.get("labels") or {}).items() if k not in _IDENTITY}
    return firing.name == symptom["alert"] and all(firing.labels.get(k) == v for k, v in wanted.items())


def _worst(outcomes: list[str]) -> str:
    judged = [o for o in outcomes if o != "not judged"]
    if not judged:
        return "unknown"
    return "failed" if "failed" in judged else "unknown" if "unknown" in judged else "ok"


def incident_reproduced(symptoms: dict[str, Any], firings: list[Any], replaced: list[Any], until: float) -> str:
    """ok | failed | unknown, by the contract of incident_symptoms with expect reproduced."""
    return _worst(incident_rows(symptoms, firings, replaced, until))


def incident_rows(symptoms: dict[str, Any], firings: list[Any], replaced: list[Any], until: float) -> list[str]:
    """Each symptom's judgement with expect reproduced: the alerts as given, then the replicas by deletion."""
    tol = float(symptoms.get("tolerance", 15.0))
    outcomes = []
    for s in symptoms.get("alerts") or []:
        at = float(s["firing_at"])
        ours = [f for f in firings if _same_alert(s, f)]
        if any(f.firing_at >= 0 and at - tol <= f.firing_at <= at + tol for f in ours):
            outcomes.append("ok")
        elif any(f.firing_at < 0 for f in ours) or until < at + tol:
            outcomes.append("unknown")  # firing before the replay, or its window not passed yet
        else:
            outcomes.append("failed")
    used: set[int] = set()
    for s in sorted(symptoms.get("replicas") or [], key=lambda s: float(s["deleted"])):
        at = float(s["deleted"])
        pick = None
        for i in sorted(range(len(replaced)), key=lambda i: (replaced[i].deleted, i)):
            r = replaced[i]
            if i not in used and r.owner == s["owner"] and at - tol <= r.deleted <= at + tol:
                pick = i
                break
        if pick is None:
            outcomes.append("unknown" if until < at + tol else "failed")
            continue
        used.add(pick)
        phases = ["ok"]  # deleted on time; then each phase the record has
        for phase in ("scheduled", "started", "ready"):
            if s.get(phase) is None:
                continue
            seen = getattr(replaced[pick], phase)
            if seen is not None and abs(seen - float(s[phase])) <= tol:
                phases.append("ok")
            elif seen is None and until < float(s[phase]) + tol:
                phases.append("unknown")
            else:
                phases.append("failed")
        outcomes.append(_worst(phases))
    return outcomes


def incident_fixed(symptoms: dict[str, Any], fix: dict[str, Any], firings: list[Any], replaced: list[Any],
                   until: float) -> str:
    """ok | failed | unknown, by the contract of incident_symptoms with expect fixed."""
    outcomes = []
    for s in symptoms.get("alerts") or []:
        ours = [f for f in firings if _same_alert(s, f)]
        budget = ((fix.get("alerts") or {}).get(s["alert"]) or {}).get("resolved_within")
        if any(f.firing_at < 0 for f in ours):
            outcomes.append("unknown")
        elif not ours:
            outcomes.append("ok")
        elif budget is None:
            outcomes.append("failed")
        else:
            spans = [((f.resolved_at if f.resolved_at is not None else until) - f.firing_at, f.resolved_at is None)
                     for f in ours]
            outcomes.append("failed" if any(d > budget for d, _ in spans) else
                            "unknown" if any(open_ for _, open_ in spans) else "ok")
    budgets = fix.get("replicas") or {}
    phase = "ready" if "ready_within" in budgets else "started"
    budget = budgets.get(f"{phase}_within")
    for s in symptoms.get("replicas") or []:
        ours = [r for r in replaced if r.owner == s["owner"]]
        if budget is None:
            outcomes.append("not judged")
            continue
        spans = [((getattr(r, phase) if getattr(r, phase) is not None else until) - r.deleted,
                  getattr(r, phase) is None) for r in ours]
        outcomes.append("failed" if any(d > budget for d, _ in spans) else
                        "unknown" if any(open_ for _, open_ in spans) else "ok")
    return _worst(outcomes)


def _slo_sample_states(symptom: dict[str, Any], readings: list[Any], deleted: dict[str, float]) -> list[tuple]:
    """(at, over|under|unseen) of each reading, by the contract's words."""
    ordered = sorted(readings, key=lambda r: r.at)
    with_values = [r for r in ordered if r.at <= 0 and r.values]
    serving = set(with_values[-1].values) if with_values else set()
    out = []
    for r in ordered:
        values = r.values or {}
        silent = [n for n in serving if n not in values and not (n in deleted and deleted[n] <= r.at)]
        if any(v > float(symptom["threshold"]) for v in values.values()):
            out.append((r.at, "over"))
        elif not values or silent:
            out.append((r.at, "unseen"))
        else:
            out.append((r.at, "under"))
    return out


def _slo_breaches(states: list[tuple], until: float) -> tuple[bool, list[tuple[float, float | None]]]:
    """(already there at time zero, the replay's breaches as (start, end or None))."""
    before = [state for at, state in states if at < 0 and state != "unseen"]
    already = bool(before) and before[-1] == "over"
    breaches, current = [], None
    for at, state in [x for x in states if x[0] <= until]:
        if current is None and state == "over":
            current = [at, None]
        elif current is not None and state == "under":
            current[1] = at
            breaches.append(tuple(current))
            current = None
    if current is not None:
        breaches.append(tuple(current))
    return already, [b for b in breaches if b[0] >= 0]


def incident_slo(symptom: dict[str, Any], readings: list[Any], deleted: dict[str, float], tol: float, until: float,
                 expect: str, budget: float | None) -> str:
    """ok | failed | unknown of one SLO symptom, by the contract of incident_symptoms."""
    states = _slo_sample_states(symptom, readings, deleted)
    already, breaches = _slo_breaches(states, until)
    at = float(symptom["breached_at"])
    if expect == "reproduced":
        if any(abs(start - at) <= tol for start, _ in breaches):
            return "ok"  # the replay's own breach: one there at time zero had ended before it
        if already or until < at + tol:
            return "unknown"
        window = [state for t, state in states if max(0.0, at - tol) <= t <= at + tol]
        if not window or "unseen" in window:
            return "unknown"  # a breach seen later may have begun unseen within the tolerance
        return "failed"
    if already:
        return "unknown"
    outside = [state for t, state in states if 0 <= t <= until
               and not any(start <= t < (end if end is not None else float("inf")) for start, end in breaches)]
    if not breaches:
        return "unknown" if not outside or "unseen" in outside else "ok"
    if budget is None:
        return "failed"
    spans = [((end if end is not None else until) - start, end is None) for start, end in breaches]
    if any(d > budget for d, _ in spans):
        return "failed"
    return "unknown" if any(still for _, still in spans) or "unseen" in outside else "ok"


# --- straggler_named_within (docs/verdicts.md) -------------------------------------------------------
def straggler_outcome(samples: list[Any], zero: float, ratio: float, hold: float, budget: float, blind: float,
                      peers: int) -> tuple[str, str | None, float | None]:
    """(outcome, replica named, seconds after time zero it was named), read from the contract: at
    each judged sample, the replica whose value over the median of the others' is largest; a
    sample is unseen when its query failed, a Ready replica has no value, or fewer than `peers`
    others have one. Named at the first judged sample j for which some earlier judged sample i
    has at_j - at_i >= hold and every sample from i to j is seen with the same replica slowest
    at >= ratio. Already: the named replica was so at the last sample before time zero."""
    def slow(s: Any) -> tuple[str, float] | None:
        if s.error or (s.ready is not None and not set(s.ready) <= set(s.values)) or len(s.values) < peers + 1:
            return None
        ranked = sorted(s.values.items(), key=lambda kv: (-kv[1], kv[0]))
        name, value = ranked[0]
        rest = sorted(v for _, v in ranked[1:])
        mid = len(rest) // 2
        median = rest[mid] if len(rest) % 2 else (rest[mid - 1] + rest[mid]) / 2
        return name, (value / median if median > 0 else float("inf"))

    judged = sorted((s for s in samples if zero + blind <= s.at <= zero + budget), key=lambda s: s.at)
    if not judged:
        return "unknown", None, None
    marks = [slow(s) for s in judged]
    for j in range(len(judged)):
        for i in range(j + 1):
            run = marks[i:j + 1]
            if judged[j].at - judged[i].at < hold or any(m is None or m[1] < ratio for m in run):
                continue
            if len({m[0] for m in run if m is not None}) != 1:
                continue
            name = marks[j][0]
            before = [s for s in samples if s.at < zero]
            last = slow(max(before, key=lambda s: s.at)) if before else None
            if last is not None and last[0] == name and last[1] >= ratio:
                return "already", name, judged[j].at - zero
            return "named", name, judged[j].at - zero
    return ("unknown" if any(m is None for m in marks) else "not_named"), None, None


# --- image_pulls_failed ----------------------------------------------------------------------------
def pulls_outcome(moments: list[tuple[float, list[Any]]]) -> tuple[str, list[str]]:
    """(outcome, the replacements it names), read from the contract moment by moment: a
    replacement is a uid absent from the first moment; it failed its pull when, at some moment
    before any at which it is Ready, a container waited in ErrImagePull or ImagePullBackOff."""
    if not moments:
        return "unknown", []
    first = [p.uid for p in moments[0][1]]
    timelines: dict[str, list[Any]] = {}
    for _at, pods in moments:
        for p in pods:
            if p.uid not in first:
                timelines.setdefault(p.uid, []).append(p)
    pulled, failed_first = [], []
    for seen in timelines.values():
        ready = [i for i, p in enumerate(seen) if p.ready]
        waits = [i for i, p in enumerate(seen) if p.waiting in ("ErrImagePull", "ImagePullBackOff")]
        if ready and not any(i <= ready[0] for i in waits):
            pulled.append(seen[0].name)
        elif waits and (not ready or waits[0] <= ready[0]):
            failed_first.append(seen[0].name)
    if pulled:
        return "pulled", sorted(pulled)
    if not failed_first:
        return "none", []
    return "failed_pulls", sorted(failed_first)


# --- kv_cache_within -------------------------------------------------------------------------------
def kv_outcome(samples: list[Any], zero: float, duration: float, max_preemptions: float, max_usage: float,
               min_usage: float) -> tuple[str, str | None]:
    """(outcome, the replica named), read from the contract: a replica's preemptions are the sum of
    its counter's rises between consecutive samples up to the interval's end, the first of those
    after time zero counted from its value at or before time zero (0 if it has none), and a fall
    counted as its new value; usage is judged at every sample in the interval; a sample is unseen
    when its query failed or a replica that must show a series has no value in either."""
    end = zero + duration
    ordered = sorted((s for s in samples if s.at <= end), key=lambda s: s.at)
    judged = [s for s in ordered if s.at >= zero]
    if not judged:
        return "unknown", None
    totals: dict[str, float] = {}
    for replica in sorted({r for s in ordered for r in s.preemptions}):
        values = [(s.at, s.preemptions[replica]) for s in ordered if replica in s.preemptions]
        total, previous = 0.0, 0.0
        for at, value in values:
            if at > zero:
                total += value - previous if value >= previous else value
            previous = value
        totals[replica] = total
    over = [r for r, t in totals.items() if t > max_preemptions]
    if over:
        return "preempted", max(sorted(over), key=lambda r: totals[r])
    peaks = {r: max(s.usage[r] for s in judged if r in s.usage) for s in judged for r in s.usage}
    hot = [r for r, v in peaks.items() if v > max_usage]
    if hot:
        return "over_usage", max(sorted(hot), key=lambda r: peaks[r])
    if any(s.error or (s.ready is not None and any(r not in s.preemptions or r not in s.usage for r in s.ready))
           for s in judged):
        return "unknown", None
    if max(peaks.values(), default=0.0) < min_usage:
        return "idle", None
    return "within", max(sorted(peaks), key=lambda r: peaks[r]) if peaks else None


# --- client_errors_within --------------------------------------------------------------------------
def client_errors_outcome(requests: list[Any], zero: float, budget: float, hold: float, max_window: float | None,
                          min_requests: int, in_flight: tuple[float, ...]) -> str:
    """The outcome, read from the contract: the requests sent in [zero, zero + budget + hold]; a
    failure sent after zero + budget fails it; then a window (first to last failure sent) over
    max_window; then a request in flight sent in the interval, or too few answered after the last
    failure (after zero, with none), is unknown."""
    end = zero + budget + hold
    sent = [r for r in requests if zero <= r.sent <= end]
    failures = [r.sent for r in sent if r.error]
    if any(t > zero + budget for t in failures):
        return "not_recovered"
    if failures and max_window is not None and max(failures) - min(failures) > max_window:
        return "window_too_long"
    if any(zero <= t <= end for t in in_flight):
        return "unknown"
    after = [r for r in sent if not failures or r.sent > max(failures)]
    if len(after) < min_requests:
        return "unknown"
    return "recovered" if failures else "clean"


# --- traffic_spread_within -------------------------------------------------------------------------
def spread_outcome(samples: list[Any], zero: float, budget: float, hold: float, window: float,
                   min_share: float) -> tuple[str, str | None]:
    """(outcome, the replica named), read from the contract: each sample in [zero, zero + budget +
    hold] against the latest sample at least `window` before it; an uneven one past the budget
    fails (the replica finishing fewest requests against an even share, by name among equals);
    else no sample past the budget, or an unseen one there, is unknown."""
    ordered = sorted(samples, key=lambda s: s.at)
    verdicts = []
    for s in ordered:
        if not zero <= s.at <= zero + budget + hold:
            continue
        starts = [b for b in ordered if b.at <= s.at - window]
        b = starts[-1] if starts else None
        if b is None or s.error or b.error or not s.finished or not b.finished:
            verdicts.append((s.at, "unseen", None))
            continue
        if s.ready is not None and b.ready is not None:
            judged = set(s.ready) & set(b.ready)
        else:
            judged = set(s.finished) & set(b.finished)
        if not judged or any(r not in s.finished or r not in b.finished for r in judged):
            verdicts.append((s.at, "unseen", None))
            continue
        done: dict[str, float] = {}
        between = [x for x in ordered if b.at <= x.at <= s.at and not x.error]
        for i, cur in enumerate(between[1:], start=1):
            for r, value in cur.finished.items():
                earlier = next((y.finished[r] for y in reversed(between[:i]) if r in y.finished), None)
                rise = value - earlier if earlier is not None and earlier <= value else value
                done[r] = done.get(r, 0.0) + rise
        total = sum(done.values())
        n = len(judged | {r for r, v in done.items() if v > 0})
        # a replica's share below min_share of an even one: done * n < min_share * total
        low = sorted((done[r] * n / total if total else 0.0, r) for r in judged)
        if total <= 0 or (low and low[0][0] < min_share):
            verdicts.append((s.at, "uneven", low[0][1] if total > 0 and low else None))
        else:
            verdicts.append((s.at, "even", None))
    past = [v for v in verdicts if v[0] > zero + budget]
    for _at, kind, replica in past:
        if kind == "uneven":
            return "not_spread", replica
    if not past or any(kind == "unseen" for _at, kind, _r in past):
        return "unknown", None
    return "spread", None


# --- the steady state before the method, while the fleet starts ----------------------------------
def still_starting(pods: list[Any], models: list[tuple[str | None, str]], now: float, young: float) -> set[str]:
    """The models (by name) a run waits for: one named whose live pods include one not Ready, or
    whose newest known Ready time is less than `young` s before `now`."""
    out = set()
    for namespace, model in models:
        mine = [p for p in pods if p.model == model and not p.deleting and namespace in (None, p.namespace)]
        if any(not p.ready for p in mine):
            out.add(model)
        elif any(p.ready_since is not None and now - p.ready_since < young for p in mine):
            out.add(model)
    return out
