"""Postmortem replay: an incident's timeline of faults at their offsets, played on the testbed
or a cluster, its recovery set beside the one the incident recorded.

A timeline file (YAML or JSON; `kilocard record` writes one from Events and firing alerts):

    title: "2026-11-12: ECC on one card, then rack 2 loses packets, then a node goes"
    configuration: {namespace: kilocard-fleet}     # the replay experiment's configuration
    guards: {max_nodes: 16}                        # its blast-radius limits (chaos.guards; default theirs)
    faults:
    - at: 0                                        # seconds after the incident began
      for: 120                                     # how long it lasted (default: to the end)
      fault: {kind: gpu-ecc, nodes: [gpu-070], card: 3, params: {type: dbe}, ttl_seconds: 600}
    - at: 90
      for: 60
      fault: {kind: network-loss, node_selector: "kilocard.io/rack=rack-02", percent: 100,
              params: {percent: 5}, ttl_seconds: 600}
    observe: 60                                    # seconds to watch after the last fault ends
    symptoms:                                      # what the incident showed, as checks (record writes them)
      tolerance: 15                                # seconds either side of each recorded offset
      alerts: [{alert: ReplicaTtftP95High, labels: {namespace: kilocard-fleet, model_name: llama-3-70b},
                firing_at: 3, resolved_at: 41}]
      replicas: [{owner: llama-3-70b-tp8-5d4f7c9b8, pod: llama-3-70b-tp8-5d4f7c9b8-x2x9p, deleted: 16,
                  scheduled: 16.2, started: 41, ready: 68}]   # the phases record read
      slo: [{model: llama-3-70b, namespace: kilocard-fleet, indicator: ttft_p95, threshold: 0.5,
             window: 30s, breached_at: 5, recovered_at: 44}]  # record --slo: the worst replica's breach
    fixed:                                         # the postmortem's action items, for --expect fixed
      alerts: {ReplicaTtftP95High: {resolved_within: 30}}
      replicas: {ready_within: 60}                 # or started_within
      slo: {llama-3-70b: {recovered_within: 30}}
    verify: [...]                                  # more Chaos Toolkit probes, judged after the replay
    recorded: {recovery: [...], alerts: [...]}     # what the incident showed, for the report

The replay is a Chaos Toolkit experiment (`experiment`) whose action, `chaos.actions.replay_timeline`,
applies each fault at its offset and reverts it when its window ends, and whose probe,
`incident_symptoms` (probes.incident), judges the symptoms: "reproduced" by default, or with
`expect="fixed"` that they did not come back (or came back within the `fixed` budgets). It runs
through the strict runner, so every fault is planned, guarded, ledgered and reverted as any
experiment's, and its exit code is the verdict's: 0 reproduced (or fixed), 1 not. Two faults of
one kind on one target at overlapping times are bad input: which revert would end it?
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos import guards, input_file, ledger, lifecycle, plan
from chaos.errors import KilocardError, SpecError
from chaos.faults import Context, kind_module
from chaos.judgement import REPLAY_JUDGE
from probes import incident

EXTENSION = "kilocard-replay"
ACTION = "replay-timeline"
DEFAULT_OBSERVE = 60.0
_TOP = {"title", "description", "source", "configuration", "guards", "faults", "observe", "symptoms", "fixed",
        "verify", "recorded"}
PROBE = "incident-{expect}"
_ENTRY = {"at", "for", "fault", "note"}


@dataclass(frozen=True)
class Entry:
    at: float
    hold: float | None  # seconds the fault lasts; None: until the replay ends
    fault: dict[str, Any]
    where: str
    note: str = ""

    @property
    def until(self) -> float | None:
        return None if self.hold is None else self.at + self.hold

    @property
    def span(self) -> plan.Span:
        """Its window in the replay: [at, at + for), to the end without `for`."""
        return plan.Span((self.at,), (math.inf,) if self.until is None else (self.until,))


@dataclass(frozen=True)
class Timeline:
    path: Path
    title: str
    entries: tuple[Entry, ...]
    observe: float = DEFAULT_OBSERVE
    description: str = ""
    configuration: dict[str, Any] = field(default_factory=dict)
    verify: tuple[dict[str, Any], ...] = ()
    recorded: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)
    symptoms: dict[str, Any] = field(default_factory=dict)
    fixed: dict[str, Any] | None = None
    guards: dict[str, Any] | None = None

    @property
    def length(self) -> float:
        """Seconds from the first fault to the end of the last window."""
        return max((e.until if e.until is not None else e.at) for e in self.entries)


def _seconds(value: Any, where: str, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or (positive and value == 0):
        raise SpecError(f"{where}: expected seconds{' above 0' if positive else ' (0 or more)'}, got {value!r}")
    return float(value)


def load(path: Path) -> Timeline:
    """Read and check a timeline file without a cluster; SpecError lists every problem."""
    return parse(input_file.read(path), path)


def parse(data: Any, path: Path) -> Timeline:
    where = str(path)
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected a timeline (a mapping with title and faults), got {type(data).__name__}")
    problems = [f"{where}: {k}: unknown field; expected one of {', '.join(sorted(_TOP))}" for k in sorted(
        set(data) - _TOP)]
    if not isinstance(data.get("title"), str) or not data["title"].strip():
        problems.append(f"{where}: title: required, a line that names the incident")
    raw = data.get("faults")
    entries: list[Entry] = []
    if not isinstance(raw, list) or not raw:
        problems.append(f"{where}: faults: required, a list of {{at, for, fault}}")
        raw = []
    for i, item in enumerate(raw):
        at_where = f"{where}: faults[{i}]"
        try:
            entries.append(_entry(item, at_where))
        except SpecError as exc:
            problems.append(str(exc))
    observe = DEFAULT_OBSERVE
    for key, kind in (("configuration", dict), ("recorded", dict), ("source", dict), ("verify", list)):
        if key in data and not isinstance(data[key], kind):
            problems.append(f"{where}: {key}: expected a {'mapping' if kind is dict else 'list'}, got {data[key]!r}")
    try:
        observe = _seconds(data.get("observe", DEFAULT_OBSERVE), f"{where}: observe", positive=False)
    except SpecError as exc:
        problems.append(str(exc))
    if data.get("guards") is not None:
        try:
            guards.limits(data["guards"], f"{where}: guards")
        except SpecError as exc:
            problems.append(str(exc))
    if "symptoms" in data:
        problems += incident.problems(data["symptoms"], data.get("fixed"), where)
    elif data.get("fixed") is not None:
        problems.append(f"{where}: fixed: a fix is judged against the symptoms, and the timeline has none")
    if not problems:
        problems += overlaps(entries, {i: static_targets(e.fault) for i, e in enumerate(entries)}, where)
    if problems:
        raise SpecError("\n".join(problems))
    return Timeline(path, data["title"].strip(), tuple(sorted(entries, key=lambda e: e.at)), observe,
                    str(data.get("description") or ""), dict(data.get("configuration") or {}),
                    tuple(data.get("verify") or ()), dict(data.get("recorded") or {}), dict(data.get("source") or {}),
                    dict(data.get("symptoms") or {}), data.get("fixed"), data.get("guards"))


def _entry(item: Any, where: str) -> Entry:
    if not isinstance(item, dict):
        raise SpecError(f"{where}: expected a mapping with at, for and fault, got {item!r}")
    unknown = sorted(set(item) - _ENTRY)
    if unknown:
        raise SpecError(f"{where}.{unknown[0]}: unknown field; expected one of {', '.join(sorted(_ENTRY))}")
    if "at" not in item or "fault" not in item:
        raise SpecError(f"{where}: {'at' if 'at' not in item else 'fault'}: required")
    at = _seconds(item["at"], f"{where}.at", positive=False)
    hold = _seconds(item["for"], f"{where}.for", positive=True) if item.get("for") is not None else None
    plan.parse(item["fault"], f"{where}.fault")  # the fault kind's own checks, field by field
    return Entry(at, hold, dict(item["fault"]), f"{where}.fault", str(item.get("note") or ""))


def static_targets(fault: dict[str, Any]) -> set[tuple[str, ...]]:
    """The targets a fault names outright (listed nodes, with their cards): what can be checked
    for overlaps before any cluster is read. Selectors resolve later (`resolved_targets`)."""
    nodes = fault.get("nodes") if isinstance(fault.get("nodes"), list) else []
    cards = fault.get("cards") if isinstance(fault.get("cards"), list) else (
        [fault["card"]] if "card" in fault else [None])
    return {(str(n), *(() if c is None else (f"card {c}",))) for n in nodes for c in cards}


def resolved_targets(records: list[ledger.Record]) -> set[tuple[str, ...]]:
    """The targets a planned fault resolved to, keyed as `static_targets` keys them."""
    found = set()
    for r in records:
        t = r.target
        if t.get("name"):
            found.add((f"{t.get('namespace', '')}/{t['name']}",))
            continue
        cards = t.get("cards") if isinstance(t.get("cards"), list) else [t.get("card")]
        found |= {(str(t.get("node")), *(() if c is None else (f"card {c}",))) for c in cards}
    return found


def overlaps(entries: list[Entry] | tuple[Entry, ...], targets: dict[int, set[tuple[str, ...]]],
             where: str) -> list[str]:
    """Pairs of one kind on one target whose windows overlap ([at, at + for), open-ended without for).
    A kind with nothing to revert (a pod kill) has no window: two of them are two events."""
    problems = []
    for i, a in enumerate(entries):
        for j in range(i + 1, len(entries)):
            b = entries[j]
            if a.fault.get("kind") != b.fault.get("kind") or not kind_module(a.fault.get("kind"), a.where).REVERTIBLE:
                continue
            shared = targets.get(i, set()) & targets.get(j, set())
            first, second = (a, b) if a.at <= b.at else (b, a)
            if shared and a.span.overlaps(b.span):
                problems.append(f"{where}: faults[{j}] overlaps faults[{i}]: both {a.fault['kind']} on "
                                f"{' '.join(sorted(shared)[0])} between {second.at:g} s and "
                                f"{'the end' if first.until is None else f'{first.until:g} s'}; "
                                "one fault per target at a time (end the first with `for`)")
    return problems


# The labels an alert names its model by (vLLM's and SGLang's metrics both say model_name).
ALERT_MODEL_LABELS = ("model_name", "model")


def unreached(timeline: Timeline, reached: set[tuple[str, str]], where: str, expect: str) -> list[str]:
    """Replayed as the test of a fix, the faults, resolved now, must touch a replica of a model the
    incident's alerts or SLO breaches name: the cluster moves after an incident (a recorded node may
    serve nothing today), and a fault that lands on nothing shows no symptom, which would pass as
    "fixed". (As a reproduction it is judged "not reproduced", exit 1: no pass.) A timeline whose
    symptoms name no model is not judged here."""
    if expect != incident.FIXED:
        return []
    named = set()
    for alert in timeline.symptoms.get("alerts") or []:  # checked by incident.problems when loaded
        labels = alert.get("labels") or {}
        model = next((labels[k] for k in ALERT_MODEL_LABELS if labels.get(k)), None)
        if model:
            named.add((labels.get("namespace", ""), model))
    named |= {(str(b.get("namespace") or ""), str(b["model"])) for b in timeline.symptoms.get("slo") or []}
    if not named or any((ns, model) in reached or (not ns and model in {m for _, m in reached}) for ns, model in named):
        return []
    models = ", ".join(f"{ns}/{model}" if ns else model for ns, model in sorted(named))
    return [f"{where}: the replay's faults, resolved now, touch no replica of {models}, the model its symptoms "
            f"name (the cluster has moved since the incident?); aim each fault at the model (nodes_of or a "
            f"label_selector) or the replay cannot judge the fix"]


def namespaces(timeline: Timeline) -> list[str]:
    """Where the symptoms' Events are: the replay's namespace, the recorded ones, the alerts'."""
    found = [timeline.configuration.get("namespace"), *(timeline.source.get("namespaces") or []),
             *((a.get("labels") or {}).get("namespace") for a in timeline.symptoms.get("alerts") or []),
             *(b.get("namespace") for b in timeline.symptoms.get("slo") or [])]
    return sorted({str(n) for n in found if n})


def experiment(timeline: Timeline, expect: str = incident.REPRODUCED) -> dict[str, Any]:
    """The replay as a Chaos Toolkit experiment: one action plays the faults at their offsets (and
    watches `observe` seconds more); then the symptoms are judged (`expect`: reproduced or fixed),
    and the timeline's own probes."""
    if expect not in incident.EXPECT:
        raise SpecError(f"--expect: expected one of {', '.join(incident.EXPECT)}, got {expect!r}")
    has_symptoms = any(timeline.symptoms.get(k) for k in ("alerts", "replicas", "slo"))
    if not has_symptoms and (expect == incident.FIXED or not timeline.verify):
        raise SpecError(f"{timeline.path}: nothing to judge the replay by: the timeline records no symptom (symptoms: "
                        "alerts, replicas, slo; kilocard record writes them)" + ("" if expect == incident.FIXED else
                                                                            " and has no verify probe"))
    played = [{"at": e.at, "for": e.hold, "fault": e.fault} for e in timeline.entries]
    judge = [{"type": "probe", "name": PROBE.format(expect=expect),
              "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"},
              "provider": {"type": "python", "module": "probes.chaostoolkit", "func": REPLAY_JUDGE,
                           "arguments": {"symptoms": timeline.symptoms, "expect": expect,
                                         **({"fixed": timeline.fixed} if timeline.fixed else {}),
                                         "namespaces": namespaces(timeline),
                                         "first_at": timeline.entries[0].at}}}] if has_symptoms else []
    return {
        "title": f"replay: {timeline.title}",
        "description": timeline.description or f"Replay of the incident timeline {timeline.path}.",
        "tags": ["kilocard", "replay", expect],
        "configuration": dict(timeline.configuration),
        **({"controls": [{"name": "guards", "provider": {"type": "python", "module": guards.MODULE,
                                                          "arguments": timeline.guards}}]}
           if timeline.guards is not None else {}),
        "method": [{"type": "action", "name": ACTION, "provider": {
            "type": "python", "module": "chaos.actions", "func": "replay_timeline",
            "arguments": {"timeline": played, "observe": timeline.observe}}}, *judge, *timeline.verify],
        "extensions": [{"name": EXTENSION, "timeline": str(timeline.path), "expect": expect,
                        "recorded": timeline.recorded, "source": timeline.source}],
    }


def play(ctx: Context, book: ledger.Ledger, entries: list[dict[str, Any]], observe: float,
         clock: Callable[[], float] = time.time) -> list[dict[str, Any]]:
    """Apply each fault at its offset from now and revert it when its window ends (a fault with no
    `for` stays to the end, where the runner's revert takes it); keep watching `observe` seconds
    after the last (chaos.lifecycle.drive). Each fault is resolved when its time comes (the
    cluster has moved on since the plan). Returns per fault its planned and actual offsets; a stop
    (a signal, a stop condition) ends the replay early, and a fault that could not be applied, or
    not reverted, fails it."""
    played: list[dict[str, Any]] = [{} for _ in entries]

    def window(i: int, entry: dict[str, Any]) -> lifecycle.Window:
        at, hold = float(entry["at"]), entry.get("for")
        return lifecycle.Window(at, None if hold is None else at + float(hold),
                                lambda: plan.plan(ctx, [(entry["fault"], f"timeline[{i}]")]).faults[0])

    def applied(i: int, fault: plan.Planned, done: lifecycle.Schedule) -> None:
        started = [r.applied_at for r in fault.records if r.applied_at]
        played[i] = {"at": float(entries[i]["at"]), "kind": fault.kind, "targets": [r.target for r in fault.records],
                     "applied_after": round(min(started) - done.started, 3) if started else None}
        if fault.problems():
            raise KilocardError(f"timeline[{i}] {fault.kind}: {fault.problems()}")

    def reverted(i: int, left: list[ledger.Record], done: lifecycle.Schedule) -> None:
        played[i]["reverted_after"] = round(done.step_at, 3)
        if left:
            raise KilocardError(f"timeline[{i}]: revert failed: " + "; ".join(r.error for r in left))

    lifecycle.drive(ctx, book, [window(i, e) for i, e in enumerate(entries)], observe, applied, reverted, clock)
    return played
