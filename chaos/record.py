"""Record an incident's timeline (chaos.replay's file) from what the cluster kept of it: the
Prometheus range of firing alerts (the ALERTS series), Kubernetes Events, and where readable the
apiserver's audit log.

Faults come from alerts and node events through a mapping (`ALERT_FAULTS`, `EVENT_FAULTS`;
`--mapping FILE` adds or replaces entries): an alert's labels fill its fault's template, and
its firing interval is the fault's window, moved earlier by the rule's `for:` (`lead`), since
the fault began before the alert could fire. The recovery the incident showed comes from pod
events (deleted, replacement created, scheduled, started), and every alert that is not a fault
(an SLO burn) is kept as it fired and resolved. A pod deleted from outside (a plain DELETE or
eviction, by a person or a tool: the audit log, else the kubelet's Killing event) that no
remediation explains is a pod-kill fault. A past kilocard run (its journal: a game day's step,
a CI run) is a timeline too: its faults as its ledger applied and reverted them, its recovery as it
watched it. The symptoms a replay checks (probes.incident) are written beside the faults: the
alerts and the replicas replaced. Offsets count from the first fault.

    pure:    faults_from_alerts, faults_from_events, faults_from_deletions, faults_from_journal,
             from_journal, recovery_from_events, symptoms, timeline, audit_deletions, kubelet_deletions
    fetch:   alert_series (one range query), events (one LIST per namespace)
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chaos.errors import SpecError
from chaos.faults import kind_module
from chaos.vocabulary import MODEL_LABEL, RUN_LABEL, STATE_LABEL, epoch
from probes import slo, snapshot
from probes.incident import (
    DEFAULT_TOLERANCE,
    PHASES,
    Reading,
    Replacement,
    already_over,
    episodes,
    owner,
    slo_states,
    stable,
)

DEFAULT_SLO_WINDOW = "30s"  # the rate window of a recorded SLO's indicator, as slo_recovered_within's

if TYPE_CHECKING:
    from chaos.kube import Kube
    from chaos.serving import Identity

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
# A remediator's health conditions on the node, as NVIDIA NVSentinel's platform connector writes
# them: type = the check, status "True" while unhealthy (since lastTransitionTime), and per failure
# "ErrorCode:<code> GPU:<index> PCI:<bus> GPU_UUID:<uuid> <text> Recommended Action=<action>;"
# (its syslog monitor names no GPU index: such a failure is not a card fault, and says so).
CONDITION_FAULTS: dict[str, dict[str, Any]] = {
    "GpuMemWatch": {"lead": 0, "fault": {"kind": "gpu-ecc", "nodes": ["{node}"], "card": "{GPU}",
                                         "params": {"type": "dbe", "speed": 0.5}}},
    "SysLogsXIDError": {"lead": 0, "fault": {"kind": "gpu-xid", "nodes": ["{node}"], "card": "{GPU}",
                                             "xid": "{ErrorCode}"}},
    "SysLogsGPUFallenOff": {"lead": 0, "fault": {"kind": "gpu-xid", "nodes": ["{node}"], "card": "{GPU}", "xid": 79}},
}
# DRA device taints (a DeviceTaintRule's, or a driver's in its ResourceSlice) by key: the health
# a driver reports (NVIDIA's DRA driver taints a device with the XID it saw). A NoSchedule or
# NoExecute taint of another key is replayed as what it did: the card taken away (dra-card-isolate).
DEVICE_TAINT_FAULTS: dict[str, dict[str, Any]] = {
    "gpu.nvidia.com/xid": {"lead": 0, "fault": {"kind": "gpu-xid", "nodes": ["{node}"], "card": "{card}",
                                                 "xid": "{value}"}},
}
CORDON_TIMESTAMP = "k8saas.nvidia.com/cordon-timestamp"  # NVSentinel's, as 2006-01-02T15-04-05Z
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
    # The one event it is, where the source names it (a pod's deletion): sightings of two events
    # are two faults, even of one kind on one target (two pods of a model deleted 84 s apart).
    event: str = ""


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


# Who deletes pods as part of running the cluster, not as an incident's cause: the controllers and
# kubelets (a node's own evictions, a ReplicaSet scaling down, the garbage collector).
CONTROLLERS = ("system:kube-controller-manager", "system:serviceaccount:kube-system:", "system:node:")
EXPLAINED = ("Evicted", "TaintManagerEviction", "Drained")  # a remediator's or the taint manager's deletion


def audit_deletions(lines: Iterable[str], start: float, end: float) -> list[tuple[float, str, str]]:
    """(epoch, namespace/pod, who) of each pod DELETE or eviction the apiserver completed in the
    range, from its audit log (JSON lines, any level)."""
    found = []
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if not isinstance(e, dict):
            continue
        ref = e.get("objectRef") or {}
        delete = e.get("verb") == "delete" and not ref.get("subresource")
        evict = e.get("verb") == "create" and ref.get("subresource") == "eviction"
        code = (e.get("responseStatus") or {}).get("code", 0)
        if ref.get("resource") != "pods" or e.get("stage") != "ResponseComplete" or not (delete or evict) \
                or not 200 <= code < 300 or not ref.get("name"):
            continue
        at = epoch(e.get("stageTimestamp") or e.get("requestReceivedTimestamp"))
        if at is not None and start - 1 <= at <= end + 1:
            found.append((at, f"{ref.get('namespace', '')}/{ref['name']}", str((e.get("user") or {}).get("username"))))
    return found


def kubelet_deletions(events: list[dict[str, Any]]) -> list[tuple[float, str, str]]:
    """(epoch, namespace/pod, who) from the kubelet's Killing events: a DELETE's trace where no audit log is."""
    found = []
    for e in events:
        involved, at = e.get("involvedObject") or {}, _when(e)
        if e.get("reason") == "Killing" and involved.get("kind") == "Pod" and at is not None:
            found.append((at, f"{involved.get('namespace', '')}/{involved.get('name')}", "the kubelet's Killing event"))
    return found


Target = dict[str, str]  # a pod-kill's target: {"label_selector": ...} or {"model": ...}


def target_of(pod: dict[str, Any], found: dict[tuple[str, str], Identity]) -> Target | None:
    """What selects a deleted pod's siblings again in a replay, from `pod` (a sibling that is there
    now): kilocard's model label; else the model its serving stack says it serves (`found`: the
    identities of its namespace's pods, probes.snapshot.identities, so a pod that names none takes
    its group's or workload's); else its ReplicaSet's hash. None: nothing would find them again."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if labels.get(MODEL_LABEL):
        return {"label_selector": f"{MODEL_LABEL}={labels[MODEL_LABEL]}"}
    served = snapshot.model_of(pod, found)
    if served is not None:
        return {"model": served}
    if labels.get("pod-template-hash"):
        return {"label_selector": f"pod-template-hash={labels['pod-template-hash']}"}
    return None


def unexplained(deletions: list[tuple[float, str, str]], events: list[dict[str, Any]],
                targets: dict[str, Target | None], namespaces: Sequence[str] = ()) -> list[tuple[float, str, str]]:
    """The pod deletions nothing in the record explains, the first of each pod: in `namespaces`
    (all if none), not a controller's or a kubelet's own, not preceded by an eviction Event for that
    pod (a remediator's drain, the taint manager), and with siblings left to replay it on
    (`targets`: namespace/pod -> `target_of` a sibling). A pod
    the cluster was already tearing down with its workload has none: not the incident's."""
    explained = {f"{(e.get('involvedObject') or {}).get('namespace', '')}/{(e.get('involvedObject') or {}).get('name')}"
                 for e in events if e.get("reason") in EXPLAINED}
    found, seen = [], set()
    for at, pod, who in sorted(deletions):
        if who.startswith(CONTROLLERS) or pod in explained or pod in seen or not targets.get(pod) \
                or (namespaces and pod.split("/", 1)[0] not in namespaces):
            continue
        seen.add(pod)
        found.append((at, pod, who))
    return found


def faults_from_deletions(deletions: list[tuple[float, str, str]],
                          targets: dict[str, Target | None]) -> list[Sighting]:
    """The `unexplained` deletions as pod-kill faults, each on its replica's siblings."""
    return [Sighting(f"deleted by {who}", {"kind": "pod-kill", "namespace": pod.split("/", 1)[0],
                                           **(targets[pod] or {}), "count": 1}, at, None, event=f"deleted {pod}")
            for at, pod, who in deletions]


_ENTITY = re.compile(r"(ErrorCode|GPU|PCI|GPU_UUID):(\S+)")


def failures(message: str) -> list[dict[str, str]]:
    """Each failure a health condition's message lists, as labels (ErrorCode, GPU, PCI, GPU_UUID)."""
    return [dict(_ENTITY.findall(part)) for part in message.split(";") if _ENTITY.search(part)]


def faults_from_conditions(nodes: list[dict[str, Any]], mapping: dict[str, dict[str, Any]], start: float,
                           end: float) -> tuple[list[Sighting], list[str]]:
    """(faults, what could not be replayed) from the health conditions a remediator set on the
    nodes and that turned unhealthy in the range: one fault per failure the message lists."""
    found, skipped = [], []
    for node in nodes:
        name = node["metadata"]["name"]
        for c in (node.get("status") or {}).get("conditions") or []:
            entry, at = mapping.get(c.get("type", "")), epoch(c.get("lastTransitionTime"))
            if entry is None or c.get("status") != "True" or at is None or not start - 1 <= at <= end + 1:
                continue
            for labels in failures(c.get("message") or "") or [{}]:
                try:
                    fault = fill(entry["fault"], {**labels, "node": name}, f"node {name} condition {c['type']}")
                except SpecError as exc:
                    skipped.append(str(exc))
                    continue
                found.append(Sighting(f"node condition {c['type']}", fault, at - float(entry.get("lead", 0)), None))
    return found, skipped


def faults_from_device_taints(rules: list[dict[str, Any]], slices: list[dict[str, Any]],
                              mapping: dict[str, dict[str, Any]], start: float,
                              end: float) -> tuple[list[Sighting], list[str]]:
    """(faults, what could not be replayed) from DRA device taints added in the range: the
    DeviceTaintRules' (one device each, not kilocard's own) and those drivers publish in their
    ResourceSlices. A device is its slice's node and the index its name ends with (gpu-3)."""
    nodes = {(s["spec"].get("driver"), (s["spec"].get("pool") or {}).get("name")): s["spec"].get("nodeName")
             for s in slices}
    tainted = [(r["spec"].get("deviceSelector") or {}, r["spec"].get("taint") or {}) for r in rules
               if RUN_LABEL not in ((r.get("metadata") or {}).get("labels") or {})]
    tainted += [({"driver": s["spec"].get("driver"), "pool": (s["spec"].get("pool") or {}).get("name"),
                  "device": d.get("name")}, t) for s in slices for d in s["spec"].get("devices") or []
                for t in d.get("taints") or []]
    found, skipped = [], []
    for device, taint in tainted:
        at = epoch(taint.get("timeAdded"))
        if at is None or not start - 1 <= at <= end + 1 or taint.get("effect") == "None":
            continue  # outside the range, or informational
        where = f"device taint {taint.get('key')} on {device.get('driver')}/{device.get('pool')}/{device.get('device')}"
        card = re.search(r"(\d+)$", str(device.get("device") or ""))
        node = nodes.get((device.get("driver"), device.get("pool"))) or device.get("pool")
        if card is None or not node:
            skipped.append(f"{where}: no node and card index to replay it on")
            continue
        entry = mapping.get(str(taint.get("key")))
        if entry is None:  # the card taken away, as the taint did
            found.append(Sighting(where, {"kind": "dra-card-isolate", "nodes": [str(node)], "cards": [int(card[1])],
                                          "driver": str(device.get("driver")), "effect": taint.get("effect"),
                                          "device_name": re.sub(r"\d+$", "{card}", str(device["device"]))}, at, None))
            continue
        try:
            fault = fill(entry["fault"], {"node": str(node), "card": card[1], "value": str(taint.get("value") or "")},
                         where)
        except SpecError as exc:
            skipped.append(str(exc))
            continue
        found.append(Sighting(where, fault, at - float(entry.get("lead", 0)), None))
    return found, skipped


def merged(sightings: list[Sighting]) -> list[Sighting]:
    """One fault seen by several sources (an ECC alert and the remediator's condition for that
    card) is one fault: same fault, overlapping windows -> the earliest start, the latest end.
    Never two events a source tells apart (two pods' deletions): each keeps its own time."""
    out: list[Sighting] = []
    for s in sorted(sightings, key=lambda s: s.start):
        same = next((i for i, o in enumerate(out) if o.fault == s.fault and (o.end is None or s.start <= o.end)
                     and not (o.event and s.event and o.event != s.event)), None)
        if same is None:
            out.append(s)
            continue
        o = out[same]
        names = o.name if s.name in o.name.split(", ") else f"{o.name}, {s.name}"
        out[same] = Sighting(names, o.fault, o.start, None if o.end is None or s.end is None else max(o.end, s.end),
                             o.event or s.event)
    return out


def remediation(nodes: list[dict[str, Any]], start: float, end: float) -> list[dict[str, Any]]:
    """The nodes a remediator cordoned in the range (NVSentinel's cordon timestamp) and the state
    it holds each in now (its state label): (epoch cordoned, node, state), the remediation the
    incident showed."""
    found = []
    for node in nodes:
        labels = node["metadata"].get("labels") or {}
        try:
            at = dt.datetime.strptime(labels.get(CORDON_TIMESTAMP, ""), "%Y-%m-%dT%H-%M-%SZ").replace(tzinfo=dt.UTC)
        except ValueError:
            continue  # none (not a remediator's cordon), or not its format
        if STATE_LABEL in labels and start - 1 <= at.timestamp() <= end + 1:
            found.append({"node": node["metadata"]["name"], "cordoned": at.timestamp(), "state": labels[STATE_LABEL]})
    return found


def faults_from_journal(journal: dict[str, Any], where: str) -> list[Sighting]:
    """A past kilocard run's faults (its journal: the method's actions and the ledger's records),
    each at the moment it was applied until it was reverted. Nodes are pinned to the ones the run
    hit (a selector resolves elsewhere today); pods stay chosen by their selector (a replica has
    another name now). A record is the fault of the action of its kind that was running when it
    was applied (and listed it, if the action said what it applied)."""
    from chaoslib import substitute

    from chaos import actions

    state = journal.get("kilocard")
    experiment = journal.get("experiment")
    if not isinstance(state, dict) or not isinstance(experiment, dict):
        raise SpecError(f"{where}: not a kilocard run's journal (no 'kilocard' or 'experiment' section)")
    configuration = _plain_configuration(experiment)
    records = sorted((r for r in state.get("faults") or [] if r.get("applied_at")), key=lambda r: r["applied_at"])
    if not records:
        raise SpecError(f"{where}: the run applied no fault: nothing to replay")
    claimed: set[int] = set()
    found = []
    for run in [*(journal.get("run") or []), *(journal.get("rollbacks") or [])]:
        activity = run.get("activity") or {}
        provider = activity.get("provider") or {}
        func = getattr(actions, str(provider.get("func")), None) if provider.get("module") == actions.__name__ else None
        if func is None:
            continue
        arguments = substitute(dict(provider.get("arguments") or {}), configuration, {})
        faults = actions.faults_of(func, arguments)
        told = [o for o in run["output"] if isinstance(o, dict)] if isinstance(run.get("output"), list) else []
        start, end = epoch(run.get("start")), epoch(run.get("end"))
        for i, fault in enumerate(faults):
            listed = _listed(told, i)
            mine = [j for j, r in enumerate(records) if j not in claimed and r.get("kind") == fault.get("kind")
                    and start is not None and start - 1 <= r["applied_at"] <= (end or math.inf) + 1
                    and (not listed or r.get("target") in listed)]
            if not mine:
                continue
            claimed.update(mine)
            name = f"{where}: {activity.get('name', provider.get('func'))!r}"
            left = str(fault).find("${")
            if left >= 0:
                raise SpecError(f"{name}: the journal does not hold the value of {str(fault)[left:].split('}')[0]}}} "
                                "(its configuration reads it from the environment, or a secret)")
            hit = [records[j] for j in mine]
            found.append(Sighting(f"{state.get('run_id', 'the run')}'s action {activity.get('name')!r}",
                                  _pinned(fault, hit), hit[0]["applied_at"], _reverted(hit, journal)))
    unclaimed = [r for j, r in enumerate(records) if j not in claimed]
    if unclaimed:
        raise SpecError(f"{where}: {len(unclaimed)} applied fault(s) match no action of the journal's method, "
                        f"first {unclaimed[0].get('kind')} on {unclaimed[0].get('target')}")
    return found


def _plain_configuration(experiment: dict[str, Any]) -> dict[str, Any]:
    """The run's configuration as its journal holds it (declared values and --vars), plain values
    only: one read from the environment at run time is not in the journal, and kilocard's own
    keys (the kubeconfig, the ledger, the run id) name the run's machine, not the incident."""
    return {k: v for k, v in (experiment.get("configuration") or {}).items()
            if not isinstance(v, (dict, list)) and not k.startswith("kilocard_")}


def _listed(told: list[dict[str, Any]], i: int) -> list[Any]:
    """The targets an action's output says its fault `i` hit (the replay action's, per entry; the
    others', one record each), or [] when it said nothing (it failed)."""
    if i < len(told) and "targets" in told[i]:
        return list(told[i]["targets"])
    return [o["target"] for o in told if "target" in o]


def _pinned(fault: dict[str, Any], hit: list[dict[str, Any]]) -> dict[str, Any]:
    """The fault on the nodes the run hit (its node choice replaced), else as it was written."""
    if not any(k in fault for k in ("nodes", "node_selector", "nodes_of")):
        return dict(fault)
    chosen = {k: v for k, v in fault.items() if k not in ("nodes", "node_selector", "nodes_of", "count", "percent",
                                                          "seed")}
    return {**chosen, "nodes": sorted({str(r["target"]["node"]) for r in hit})}


def _reverted(hit: list[dict[str, Any]], journal: dict[str, Any]) -> float | None:
    """When the last of a fault's targets was reverted (the ledger's transitions); a kill has no
    end, and one never reverted lasted to the end of the run."""
    if not kind_module(hit[0].get("kind"), "journal").REVERTIBLE:
        return None
    ends = [epoch(t.get("at")) for r in hit for t in r.get("transitions") or [] if t.get("state") == "reverted"]
    if len(ends) < len(hit) or None in ends:
        return epoch(journal.get("end"))
    return max(e for e in ends if e is not None)


# The kubelet's events for an image it could not pull (reason Failed, or ErrImagePull's own).
PULL_FAILED = ("Failed", "ErrImagePull")


def recovery_from_events(events: list[dict[str, Any]], t0: float,
                         deletions: Sequence[tuple[float, str]] = (),
                         ready: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Per deleted pod: when it was deleted, its replacement (the next pod its controller
    created), when that was created, scheduled, first failed to pull its image, started and Ready;
    seconds after `t0`. `deletions` (epoch, namespace/pod) add deletions no Event tells (a plain
    DELETE: the audit log, a ledger); `ready` (namespace/pod -> epoch, `ready_times`) what no Event
    tells: when a pod became Ready."""
    deleted: list[tuple[float, str, str]] = [(at, pod, owner(pod.split("/", 1)[1])) for at, pod in deletions]
    created: dict[str, list[tuple[float, str]]] = {}  # owner -> [(at, namespace/pod)]
    phases: dict[str, dict[str, Any]] = {}
    for e in sorted((e for e in events if _when(e) is not None), key=_when):
        at, involved = _when(e), e.get("involvedObject") or {}
        ns, name, reason = involved.get("namespace", ""), involved.get("name", ""), e.get("reason", "")
        if involved.get("kind") == "Pod" and reason in DELETED:
            deleted.append((at, f"{ns}/{name}", owner(name)))  # type: ignore[arg-type]
        elif reason == "SuccessfulCreate" and "Created pod: " in (e.get("message") or ""):
            pod = e["message"].split("Created pod: ", 1)[1].strip()
            created.setdefault(name, []).append((at, f"{ns}/{pod}"))  # type: ignore[arg-type]
            phases.setdefault(f"{ns}/{pod}", {})["created"] = at
        elif involved.get("kind") == "Pod" and reason in PULL_FAILED and "pull" in (e.get("message") or "").lower():
            phases.setdefault(f"{ns}/{name}", {}).setdefault("pull_failed", at)
        elif involved.get("kind") == "Pod" and reason in ("Scheduled", "Started"):
            entry = phases.setdefault(f"{ns}/{name}", {})
            entry.setdefault(reason.lower(), at)
            if reason == "Scheduled" and " to " in (e.get("message") or ""):
                entry["node"] = e["message"].rsplit(" to ", 1)[1].strip()
    rows = []
    taken: set[str] = set()
    for at, pod, by in sorted(set(deleted)):
        if any(r["pod"] == pod.split("/", 1)[1] for r in rows):
            continue
        candidates = [(t, p) for t, p in created.get(by, []) if t >= at - 1 and p not in taken]
        row: dict[str, Any] = {"pod": pod.split("/", 1)[1], "deleted": round(at - t0, 3)}
        if candidates:
            _, new = min(candidates)
            taken.add(new)
            row["replacement"] = new.split("/", 1)[1]
            if (became := (ready or {}).get(new)) is not None:
                phases.setdefault(new, {})["ready"] = became
            for phase in ("created", "pull_failed", *PHASES):
                if phases.get(new, {}).get(phase) is not None:
                    row[phase] = round(phases[new][phase] - t0, 3)
            row["node"] = phases.get(new, {}).get("node")
        rows.append(row)
    return rows


def symptoms(recovery: list[dict[str, Any]], other_alerts: list[dict[str, Any]],
             tolerance: float = DEFAULT_TOLERANCE, breaches: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The incident's symptoms as a replay checks them (probes.incident): each alert that is not
    a fault by its stable labels, each deleted replica by its owner; offsets as recorded."""
    alerts, seen = [], set()
    for a in sorted(other_alerts, key=lambda a: a["firing_at"]):
        if a["firing_at"] < 0:  # firing before the first fault: not its symptom
            continue
        labels = stable(a["labels"])
        key = (a["name"], tuple(sorted(labels.items())))
        if key not in seen:  # the first firing of each: a replica's alert on another replica is the same symptom
            seen.add(key)
            alerts.append({"alert": a["name"], "labels": labels, "firing_at": a["firing_at"],
                           "resolved_at": a["resolved_at"], **({"pod": a["labels"]["pod"]} if "pod" in a["labels"]
                                                               else {})})
    replicas = [{"owner": owner(r["pod"]), "pod": r["pod"], "deleted": r["deleted"],
                 **{phase: r[phase] for phase in PHASES if r.get(phase) is not None}} for r in recovery]
    return {"tolerance": tolerance, "alerts": alerts, "replicas": replicas, **({"slo": breaches} if breaches else {})}


def timeline(title: str, sightings: list[Sighting], events: list[dict[str, Any]],
             other_alerts: list[dict[str, Any]], source: dict[str, Any],
             configuration: dict[str, Any] | None = None, deletions: Sequence[tuple[float, str]] = (),
             tolerance: float = DEFAULT_TOLERANCE, recovery: list[dict[str, Any]] | None = None,
             guards: dict[str, Any] | None = None, remediated: Sequence[dict[str, Any]] = (),
             ready: dict[str, float] | None = None, slo_found: Sequence[tuple[dict[str, Any], list[Reading]]] = (),
             end: float | None = None) -> dict[str, Any]:
    """The timeline file's data: faults at offsets from the first, the symptoms a replay checks,
    and what the incident recorded. The recovery is read from the events, unless it is given
    (a journal's own, already counted from its first fault); `slo_found` (`slo_symptoms`) gives
    each model's SLO breach in the range ending at `end`."""
    if not sightings:
        raise SpecError("no fault found in the range: no alert, event or deletion the mapping knows (see --mapping; "
                        "a pod deleted by hand needs --audit-log, or the kubelet's Killing event)")
    sightings = merged(sightings)
    t0 = min(s.start for s in sightings)
    last = max(s.end or s.start for s in sightings)
    faults = []
    for s in sorted(sightings, key=lambda s: s.start):
        hold = None if s.end is None else round(max(s.end - s.start, 1.0), 3)
        ttl = round((hold or (last - s.start)) + TTL_MARGIN)
        lasting = kind_module(s.fault.get("kind"), f"recorded {s.name}").REVERTIBLE  # a pod kill has no TTL
        faults.append({"at": round(s.start - t0, 3), **({"for": hold} if hold else {}),
                       "fault": {**s.fault, **({"ttl_seconds": ttl} if lasting else {})},
                       "note": f"recorded as {s.name}"})
    alerts = [{**a, "firing_at": round(a["firing_at"] - t0, 3),
               "resolved_at": None if a["resolved_at"] is None else round(a["resolved_at"] - t0, 3)}
              for a in other_alerts]
    if recovery is None:
        recovery = recovery_from_events(events, t0, deletions, ready)
    recorded = {"started_at": t0, "recovery": recovery, "alerts": alerts,
                **({"remediation": [{**r, "cordoned": round(r["cordoned"] - t0, 3)} for r in remediated]}
                   if remediated else {})}
    breaches, before = slo_symptoms(slo_found, t0, end if end is not None else last, recovery)
    checks = symptoms(recovery, alerts, tolerance, breaches)
    if before:
        source = {**source, "slo_before_first_fault": before}
    # Watched after the last fault long enough for the last symptom to show within its tolerance
    # (and no less than the tolerance: what the faults' end sets off shows too).
    latest = max([a["firing_at"] for a in checks["alerts"]] + [max(r.get(p, r["deleted"]) for p in PHASES)
                                                                for r in checks["replicas"]]
                 + [b["breached_at"] for b in breaches], default=0.0)
    length = max(f["at"] + f.get("for", 0) for f in faults)
    observe = max(float(tolerance), math.ceil(latest + tolerance - length))
    return {"title": title, "source": source, **({"configuration": configuration} if configuration else {}),
            **({"guards": guards} if guards is not None else {}), "faults": faults, "observe": observe,
            "symptoms": checks, "recorded": recorded}


def from_journal(journal: dict[str, Any], where: str, title: str | None, other_alerts: list[dict[str, Any]] | None,
                 tolerance: float = DEFAULT_TOLERANCE) -> dict[str, Any]:
    """A past run as a timeline: its faults (faults_from_journal), the recovery it watched, the
    guards it ran under, and the alerts of its range that are not faults as symptoms (None: no
    Prometheus was read)."""
    from chaoslib import substitute

    from chaos import guards

    state, experiment = journal.get("kilocard") or {}, journal.get("experiment") or {}
    sightings = faults_from_journal(journal, where)
    configuration = _plain_configuration(experiment)
    control = next((c for c in experiment.get("controls") or [] if isinstance(c, dict)
                    and (c.get("provider") or {}).get("module") == guards.MODULE), None)
    limits = substitute(dict((control or {}).get("provider", {}).get("arguments") or {}), configuration, {}) \
        if control else None
    namespace = configuration.get("namespace")
    source = {"journal": where, "run_id": state.get("run_id"), "experiment": state.get("experiment_file"),
              "verdict": state.get("verdict"), "reason": state.get("reason"), "alerts": other_alerts is not None}
    return timeline(title or f"{experiment.get('title', 'a run')} ({state.get('run_id', where)})", sightings, [],
                    other_alerts or [], source, {"namespace": namespace} if isinstance(namespace, str) else None,
                    tolerance=tolerance, guards=limits,
                    recovery=[{k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
                              for row in state.get("recovery") or []])


def alert_series(prom: Any, start: float, end: float, step: float) -> list[dict[str, Any]]:
    """Every firing alert's series over the range: one range query."""
    return list(prom.custom_query_range('ALERTS{alertstate="firing"}',
                                        start_time=dt.datetime.fromtimestamp(start, dt.UTC),
                                        end_time=dt.datetime.fromtimestamp(end, dt.UTC), step=f"{step:g}s"))


def pods(kube: Kube, namespaces: list[str | None]) -> list[dict[str, Any]]:
    """The namespaces' pods now: one LIST per namespace (None: every namespace)."""
    return [pod for ns in dict.fromkeys(namespaces) for pod in kube.list_objects("v1", "Pod", ns)]


def ready_times(found: list[dict[str, Any]]) -> dict[str, float]:
    """When each pod now Ready became so (namespace/pod -> epoch, its Ready condition's last
    transition): no Event tells it."""
    ready = {}
    for pod in found:
        meta = pod.get("metadata") or {}
        for c in (pod.get("status") or {}).get("conditions") or []:
            at = epoch(c.get("lastTransitionTime"))
            if c.get("type") == "Ready" and c.get("status") == "True" and at is not None:
                ready[f"{meta.get('namespace', '')}/{meta.get('name', '')}"] = at
    return ready


def models(found: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(namespace, model) of every model the pods serve, as kilocard finds a model everywhere."""
    who = snapshot.identities(found)
    return sorted({(p["metadata"]["namespace"], m) for p in found if (m := snapshot.model_of(p, who)) is not None})


def slo_readings(prom: Any, symptom: dict[str, Any], start: float, end: float, step: float,
                 zero: float) -> list[Reading]:
    """An SLO symptom's indicator from `start` to `end` (one range query, per replica where the
    indicator has replicas), as seconds after `zero`; a step with no value is a reading of none."""
    ind = slo.indicator(prom, symptom["indicator"], symptom["model"], symptom.get("namespace"),
                        symptom.get("window", DEFAULT_SLO_WINDOW), by=slo.REPLICA)
    return [Reading(round(x.at - zero, 3), x.values or None) for x in slo.history(prom, ind, start, end, step)]


def slo_symptoms(found: Sequence[tuple[dict[str, Any], list[Reading]]], t0: float, end: float,
                 recovery: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Each model's SLO breach in the range, as a replay checks it: its first breach after the first
    fault (`t0`) and when it was last under again (None: still over at `end`); a model that did not
    breach is no symptom. `found`: (symptom less its offsets, readings in epoch seconds). Also which
    were already breached at the first fault (no replay can show that breach begin: said, not kept)."""
    gone = [Replacement.of(r) for r in recovery]
    out, before = [], []
    for entry, readings in found:
        moved = [Reading(round(r.at - t0, 3), r.values) for r in readings]
        states = slo_states(entry, moved, gone)
        breaches = episodes(states, end - t0)
        if breaches:
            out.append({**entry, "breached_at": breaches[0][0], "recovered_at": breaches[-1][1]})
        if already_over(states):
            before.append(f"{entry.get('namespace')}/{entry['model']} {entry['indicator']} over "
                          f"{entry['threshold']:g} before the first fault")
    return out, before


def events(kube: Kube, namespaces: list[str | None], start: float, end: float) -> list[dict[str, Any]]:
    """Core Events in the range: the nodes' (they live in `default`) and each namespace's."""
    found = []
    for ns in dict.fromkeys(["default", *namespaces]):
        for e in kube.list_objects("v1", "Event", ns):
            at = _when(e)
            if at is not None and start - 1 <= at <= end + 1:
                found.append(e)
    return found
