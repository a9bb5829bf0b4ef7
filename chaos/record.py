"""Record an incident's timeline (chaos.replay's file) from what the cluster kept of it: the
Prometheus range of firing alerts (the ALERTS series) and Kubernetes Events.

Faults come from alerts and node events through a mapping (`ALERT_FAULTS`, `EVENT_FAULTS`;
`--mapping FILE` adds or replaces entries): an alert's labels fill its fault's template, and
its firing interval is the fault's window, moved earlier by the rule's `for:` (`lead`), since
the fault began before the alert could fire. The recovery the incident showed comes from pod
events (deleted, replacement created, scheduled, started), and every alert that is not a fault
(an SLO burn) is kept as it fired and resolved. Offsets count from the first fault.

    pure:    faults_from_alerts, faults_from_events, recovery_from_events, timeline
    fetch:   alert_series (one range query), events (one LIST per namespace)
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chaos.errors import SpecError
from chaos.vocabulary import epoch

if TYPE_CHECKING:
    from chaos.kube import Kube

# What a recorded fault is replayed as. `{label}` is filled from the alert's (or event's) labels;
# `a|b` takes the first label present (dcgm-exporter renamed Hostname to hostname). `lead` is the
# seconds between the fault and its alert firing: the rule's `for:` (the testbed's rules have none;
# kube-prometheus's KubeNodeNotReady waits 15 m: a mapping file says so), or the controller's grace.
ALERT_FAULTS: dict[str, dict[str, Any]] = {
    "GpuDoubleBitEccErrors": {"lead": 0, "fault": {
        "kind": "gpu-ecc", "nodes": ["{Hostname|hostname|node}"], "card": "{gpu}", "params": {"type": "dbe",
                                                                                              "speed": 0.5}}},
    "GpuCriticalXid": {"lead": 0, "fault": {
        "kind": "gpu-xid", "nodes": ["{Hostname|hostname|node}"], "card": "{gpu}", "xid": "{err_code}"}},
    "NpuChipUnhealthy": {"lead": 0, "fault": {"kind": "npu-fault", "nodes": ["{node}"], "card": "{id}"}},
    "KubeNodeNotReady": {"lead": 40, "fault": {"kind": "node-kubelet-stop", "nodes": ["{node}"]}},
}
EVENT_FAULTS: dict[str, dict[str, Any]] = {
    # The node lifecycle controller's event when a node's kubelet stops reporting; it ends at NodeReady.
    "NodeNotReady": {"lead": 40, "ends": "NodeReady", "fault": {"kind": "node-kubelet-stop", "nodes": ["{node}"]}},
}
DELETED = ("Killing", "Evicted", "TaintManagerEviction", "Drained")
TTL_MARGIN = 300.0
_FIELD = re.compile(r"\{([^{}]+)\}")


@dataclass(frozen=True)
class Sighting:
    """A fault seen in the record: what its template was filled with, and when (epoch seconds)."""

    name: str  # the alert or event reason
    fault: dict[str, Any]
    start: float
    end: float | None


def fill(template: Any, labels: dict[str, str], where: str) -> Any:
    """The template with `{label}` (or `{a|b}`: the first present) replaced; a string that is
    only one field and reads as a number becomes one (a card index)."""
    if isinstance(template, dict):
        return {k: fill(v, labels, where) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, labels, where) for v in template]
    if not isinstance(template, str):
        return template

    def one(match: re.Match[str]) -> str:
        for name in match.group(1).split("|"):
            if labels.get(name):
                return str(labels[name])
        raise SpecError(f"{where}: no label {match.group(1)!r} to fill the fault with (labels: "
                        f"{', '.join(sorted(labels)) or 'none'})")

    text = _FIELD.sub(one, template)
    whole = _FIELD.fullmatch(template) is not None
    return int(text) if whole and text.isdigit() else text


def intervals(values: list[tuple[float, float]], step: float) -> list[tuple[float, float]]:
    """Contiguous runs of samples (gaps over two steps split them): when a series was present."""
    runs: list[tuple[float, float]] = []
    for t, _ in sorted(values):
        if runs and t - runs[-1][1] <= 2 * step:
            runs[-1] = (runs[-1][0], t)
        else:
            runs.append((t, t))
    return runs


def faults_from_alerts(series: list[dict[str, Any]], step: float, until: float,
                       mapping: dict[str, dict[str, Any]]) -> tuple[list[Sighting], list[dict[str, Any]]]:
    """(faults, other alerts) from ALERTS{alertstate="firing"} series of a range query. An alert
    still firing at the end of the range has no end."""
    found, others = [], []
    for s in series:
        labels = {k: v for k, v in s["metric"].items() if k not in ("__name__", "alertstate")}
        name = labels.get("alertname", "?")
        for start, last in intervals([(float(t), float(v)) for t, v in s.get("values") or []], step):
            end = None if last + 2 * step >= until else last + step
            entry = mapping.get(name)
            if entry is None:
                others.append({"name": name, "labels": labels, "firing_at": start, "resolved_at": end})
                continue
            lead = float(entry.get("lead", 0))
            found.append(Sighting(name, fill(entry["fault"], labels, f"alert {name}"), start - lead, end))
    return found, others


def _when(event: dict[str, Any]) -> float | None:
    for key in ("eventTime", "lastTimestamp", "firstTimestamp"):
        found = epoch(event.get(key)) if isinstance(event.get(key), str) else None
        if found:
            return found
    return epoch((event.get("metadata") or {}).get("creationTimestamp"))


def faults_from_events(events: list[dict[str, Any]], mapping: dict[str, dict[str, Any]]) -> list[Sighting]:
    """Node events that are faults (NodeNotReady, until the next NodeReady of that node)."""
    found = []
    ordered = sorted((e for e in events if _when(e) is not None), key=_when)
    for i, e in enumerate(ordered):
        entry = mapping.get(e.get("reason", ""))
        involved = e.get("involvedObject") or {}
        if entry is None or involved.get("kind") != "Node":
            continue
        node = involved.get("name", "")
        end = next((_when(x) for x in ordered[i + 1:] if x.get("reason") == entry.get("ends")
                    and (x.get("involvedObject") or {}).get("name") == node), None)
        found.append(Sighting(e["reason"], fill(entry["fault"], {"node": node}, f"event {e['reason']}"),
                              _when(e) - float(entry.get("lead", 0)), end))  # type: ignore[operator]
    return found


def recovery_from_events(events: list[dict[str, Any]], t0: float) -> list[dict[str, Any]]:
    """Per deleted pod: when it was deleted, its replacement (the next pod its controller
    created), when that was created, scheduled and started; seconds after `t0`."""
    deleted: list[tuple[float, str, str]] = []  # (at, namespace/pod, owner prefix)
    created: dict[str, list[tuple[float, str]]] = {}  # owner -> [(at, namespace/pod)]
    phases: dict[str, dict[str, Any]] = {}
    for e in sorted((e for e in events if _when(e) is not None), key=_when):
        at, involved = _when(e), e.get("involvedObject") or {}
        ns, name, reason = involved.get("namespace", ""), involved.get("name", ""), e.get("reason", "")
        if involved.get("kind") == "Pod" and reason in DELETED:
            deleted.append((at, f"{ns}/{name}", name.rsplit("-", 1)[0]))  # type: ignore[arg-type]
        elif reason == "SuccessfulCreate" and "Created pod: " in (e.get("message") or ""):
            pod = e["message"].split("Created pod: ", 1)[1].strip()
            created.setdefault(name, []).append((at, f"{ns}/{pod}"))  # type: ignore[arg-type]
            phases.setdefault(f"{ns}/{pod}", {})["created"] = at
        elif involved.get("kind") == "Pod" and reason in ("Scheduled", "Started"):
            entry = phases.setdefault(f"{ns}/{name}", {})
            entry.setdefault(reason.lower(), at)
            if reason == "Scheduled" and " to " in (e.get("message") or ""):
                entry["node"] = e["message"].rsplit(" to ", 1)[1].strip()
    rows = []
    taken: set[str] = set()
    for at, pod, owner in sorted(set(deleted)):
        if any(r["pod"] == pod.split("/", 1)[1] for r in rows):
            continue
        candidates = [(t, p) for t, p in created.get(owner, []) if t >= at - 1 and p not in taken]
        row: dict[str, Any] = {"pod": pod.split("/", 1)[1], "deleted": round(at - t0, 3)}
        if candidates:
            _, new = min(candidates)
            taken.add(new)
            row["replacement"] = new.split("/", 1)[1]
            for phase in ("created", "scheduled", "started"):
                if phases.get(new, {}).get(phase) is not None:
                    row[phase] = round(phases[new][phase] - t0, 3)
            row["node"] = phases.get(new, {}).get("node")
        rows.append(row)
    return rows


def timeline(title: str, sightings: list[Sighting], events: list[dict[str, Any]],
             other_alerts: list[dict[str, Any]], source: dict[str, Any],
             configuration: dict[str, Any] | None = None) -> dict[str, Any]:
    """The timeline file's data: faults at offsets from the first, what the incident recorded."""
    if not sightings:
        raise SpecError("no fault found in the range: no alert or event the mapping knows (see --mapping)")
    t0 = min(s.start for s in sightings)
    last = max(s.end or s.start for s in sightings)
    faults = []
    for s in sorted(sightings, key=lambda s: s.start):
        hold = None if s.end is None else round(max(s.end - s.start, 1.0), 3)
        ttl = round((hold or (last - s.start)) + TTL_MARGIN)
        faults.append({"at": round(s.start - t0, 3), **({"for": hold} if hold else {}),
                       "fault": {**s.fault, "ttl_seconds": ttl}, "note": f"recorded as {s.name}"})
    recorded = {"started_at": t0, "recovery": recovery_from_events(events, t0),
                "alerts": [{**a, "firing_at": round(a["firing_at"] - t0, 3),
                            "resolved_at": None if a["resolved_at"] is None else round(a["resolved_at"] - t0, 3)}
                           for a in other_alerts]}
    return {"title": title, "source": source, **({"configuration": configuration} if configuration else {}),
            "faults": faults, "observe": 60, "recorded": recorded}


def alert_series(prom: Any, start: float, end: float, step: float) -> list[dict[str, Any]]:
    """Every firing alert's series over the range: one range query."""
    return list(prom.custom_query_range('ALERTS{alertstate="firing"}',
                                        start_time=dt.datetime.fromtimestamp(start, dt.UTC),
                                        end_time=dt.datetime.fromtimestamp(end, dt.UTC), step=f"{step:g}s"))


def events(kube: Kube, namespaces: list[str | None], start: float, end: float) -> list[dict[str, Any]]:
    """Core Events in the range: the nodes' (they live in `default`) and each namespace's."""
    found = []
    for ns in dict.fromkeys(["default", *namespaces]):
        for e in kube.list_objects("v1", "Event", ns):
            at = _when(e)
            if at is not None and start - 1 <= at <= end + 1:
                found.append(e)
    return found
