"""Plan, then execute: the seam every runner (`kilocard fault`, `kilocard run`, game days, replay)
goes through, and where a blast-radius guard looks before anything happens.

    plan:     parse every fault (no cluster) -> resolve each one's targets -> check them against the
              cluster (selector syntax, nodes, card indices, agents, other runs holding a target)
              -> read the undo data. Writes nothing; any problem is a SpecError naming the file,
              entry and field, raised before the first fault is applied.
    execute:  per fault, in order: write the ledger (recorded, with the undo data) -> apply, with
              bounded concurrency -> write the ledger (applied | failed) -> read each target's
              effect back (chaos.landed: confirmed | mismatch | inconclusive) -> write the ledger.
"""

from __future__ import annotations

import collections
import json
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from chaos import failpoints, faults, fields, landed, ledger
from chaos.agent.protocol import iso
from chaos.errors import KilocardError, SpecError
from chaos.faults import Context, FaultKind
from chaos.vocabulary import describe_target


@dataclass(frozen=True)
class Span:
    """When a fault of a plan is in place, as far as the plan can tell before it runs: from
    `start` to `end` (exclusive), each a point in the plan's own order (for an experiment: which
    revert of the run's faults came before, which activity, the offset in a replayed timeline).
    Two faults of one plan stack only if their spans overlap: the same fault can come back on the
    same target once its window is over (a link that goes down three times in a minute)."""

    start: tuple[float, ...]
    end: tuple[float, ...]

    def overlaps(self, other: Span) -> bool:
        return max(self.start, other.start) < min(self.end, other.end)


ALWAYS = Span((-math.inf,), (math.inf,))  # a fault whose window the plan does not know: every other one


@dataclass
class Planned:
    """One fault of a plan: where it came from, its kind module and spec, one record per target."""

    where: str
    module: FaultKind
    spec: Any
    records: list[ledger.Record] = field(default_factory=list)
    verify: landed.Options = field(default_factory=landed.Options)

    @property
    def kind(self) -> str:
        return str(self.spec.kind)

    @property
    def failed(self) -> list[ledger.Record]:
        return [r for r in self.records if r.state == "failed"]

    @property
    def unlanded(self) -> list[ledger.Record]:
        """Targets whose effect was read back and is not there, unless the fault allows that."""
        if self.verify.allow_mismatch:
            return []
        return [r for r in self.records if r.landed.get("status") == landed.MISMATCH]

    def problems(self) -> str:
        """Why this fault failed (an apply that raised, an effect that did not land), "" if it did not."""
        return "; ".join([*(f"{describe_target(r.target)}: {r.error}" for r in self.failed),
                          *(f"{describe_target(r.target)}: did not land: {r.landed['evidence']}"
                            for r in self.unlanded)])


@dataclass
class Plan:
    run_id: str
    faults: list[Planned]

    @property
    def records(self) -> list[ledger.Record]:
        return [r for p in self.faults for r in p.records]

    def describe(self) -> list[dict[str, Any]]:
        """What would be done, as plain data (`kilocard plan` prints it)."""
        return [{"where": p.where, "kind": p.kind, "ttl_seconds": p.spec.ttl_seconds,
                 "targets": [r.target for r in p.records]} for p in self.faults]


def parse(raw: Any, where: str) -> tuple[FaultKind, Any]:
    """(kind module, spec) from plain data; SpecError names the field."""
    module, spec, _options = parse_one(raw, where)
    return module, spec


def parse_one(raw: Any, where: str) -> tuple[FaultKind, Any, landed.Options]:
    """(kind module, spec, its verification options): the fields its kind's schema declares, read
    and checked, every error at once; then what only the kind can tell (`build`). A run meets one
    fault several times (checked before it starts, planned, applied by its action): it is parsed
    once, the first time, and the same frozen spec serves the rest."""
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a mapping with a 'kind', got {type(raw).__name__}")
    key = _canonical(raw)
    found = _parsed.get(key)
    if found is None:
        module = faults.kind_module(raw.get("kind"), where)
        values = fields.read(module.SCHEMAS[raw["kind"]], raw, where)
        options = landed.Options.of(values.pop(landed.FIELD))
        found = module, module.build(values, where), options
        with _parsing:  # background actions parse in threads
            _parsed[key] = found
            PARSED[key] += 1
            while len(_parsed) > _PARSED_KEPT:
                del _parsed[next(iter(_parsed))]
    return found


# Specs by their fault's canonical JSON (errors are never kept: each one is said where it is met).
_parsed: dict[str, tuple[FaultKind, Any, landed.Options]] = {}
_PARSED_KEPT = 1024
PARSED: collections.Counter[str] = collections.Counter()  # how often each fault was parsed in this process
_parsing = threading.Lock()


def _canonical(raw: dict[str, Any]) -> str:
    return json.dumps(raw, sort_keys=True, default=repr)


def parses(raw: Any) -> int:
    """How many times this process has parsed this fault (its canonical form): once, or never."""
    return PARSED[_canonical(raw)] if isinstance(raw, dict) else 0


def entries(raws: list[Any], source: str) -> list[tuple[Any, str]]:
    """Pair each raw fault with its place in the input: `file[2]` in a list, `file: fault` for a
    file of one (so a field reads `f.yaml: fault.count`, never as a file named f.yaml.count)."""
    return [(raw, f"{source}[{i}]" if len(raws) > 1 else f"{source}: fault") for i, raw in enumerate(raws)]


def parse_all(items: list[tuple[Any, str]]) -> list[tuple[str, FaultKind, Any, landed.Options]]:
    """(where, kind module, spec, verification options) of every entry: all bad input found
    before any cluster is asked, every entry's at once."""
    found, problems = [], []
    for raw, where in items:
        try:
            found.append((where, *parse_one(raw, where)))
        except SpecError as exc:
            problems.append(str(exc))
    if problems:
        raise SpecError("\n".join(problems))
    return found


# What judges a run's plan just before it executes (the guards' control, around each kilocard
# action: chaos/guards.py): the exact resolved plan, which it may refuse by raising.
Judge = Callable[[Context, Plan], None]
_judges: dict[str, list[Judge]] = {}


def judge_with(run_id: str, judge: Judge) -> None:
    _judges.setdefault(run_id, []).append(judge)


def unjudge(run_id: str, judge: Judge) -> None:
    if judge in _judges.get(run_id, []):
        _judges[run_id].remove(judge)
    if not _judges.get(run_id):
        _judges.pop(run_id, None)


def plan(ctx: Context, items: list[tuple[Any, str]], spans: Sequence[Span] = ()) -> Plan:
    """Parse everything first (no cluster needed), then resolve and check each fault (`spans`:
    each item's window, when the plan's faults are not all in place at once); then the run's
    judges (`judge_with`) see the plan, exactly as it will execute, and may refuse it."""
    planned = resolve(ctx, parse_all(items), spans)
    for judge in list(_judges.get(ctx.run_id, ())):
        judge(ctx, planned)
    return planned


def resolve(ctx: Context, parsed: list[tuple[str, FaultKind, Any, landed.Options]],
            spans: Sequence[Span] = ()) -> Plan:
    """Resolve and check each parsed fault against the cluster: against the entries before it
    whose span overlaps its own (all of them, without spans). Nothing is written; a SpecError
    means nothing will have been applied."""
    planned: list[Planned] = []
    span = list(spans) or [ALWAYS] * len(parsed)
    for i, (where, module, spec, options) in enumerate(parsed):
        found = module.targets(ctx, spec, where)
        if not found and not spec.allow_empty:
            raise SpecError(f"{where}: no targets: the selectors match nothing (set allow_empty: true to accept that)")
        check = getattr(module, "check", None)
        if check is not None and found:
            check(ctx, spec, found, where, [(p.where, r) for k, p in enumerate(planned) for r in p.records
                                            if span[k].overlaps(span[i])])
        planned.append(Planned(where, module, spec, _records(ctx, module, spec, found), options))
    return Plan(ctx.run_id, planned)


def _records(ctx: Context, module: FaultKind, spec: Any, found: list[dict[str, Any]]) -> list[ledger.Record]:
    """One ledger record per target, with the undo data read now, before anything changes."""

    def prepared(target: dict[str, Any]) -> ledger.Record:
        fault_id = uuid.uuid4().hex[:12]
        undo = {**module.prepare(ctx, spec, target, fault_id), "fault_id": fault_id}
        return ledger.Record(run_id=ctx.run_id, fault_id=fault_id, kind=spec.kind, target=target, expires_at="",
                             undo=undo)

    return ctx.kube.batch(prepared, found)


def execute_one(ctx: Context, book: ledger.Ledger, fault: Planned) -> Planned:
    """Record, then apply, one planned fault. A target whose apply raised is `failed` (it may have
    half-happened, so it is still reverted); the others go on."""
    module, spec = fault.module, fault.spec
    expires = iso(time.time() + max(spec.ttl_seconds, 0))  # the TTL runs from now, as the agent's does
    for record in fault.records:
        record.expires_at = expires
    book.write(fault.records, in_cluster=module.REVERTIBLE)  # BEFORE anything changes
    failpoints.reach("fault-recorded")

    def settle(record: ledger.Record, started: float, outcome: dict[str, Any] | BaseException) -> ledger.Record:
        if isinstance(outcome, KilocardError):
            record.state, record.error = "failed", str(outcome)
        elif isinstance(outcome, BaseException):  # a bug must not cost the other targets their ledger entry
            record.state, record.error = "failed", f"unexpected {type(outcome).__name__}: {outcome}"
        else:
            record.undo = outcome
            failpoints.reach("fault-applied")
            record.state = "applied" if module.REVERTIBLE else "reverted"  # nothing left to undo
            record.applied_at, record.applied_until = started, time.time()
        return record

    def applied(record: ledger.Record) -> ledger.Record:
        started = time.time()  # the fault's time: the first change comes at the start of its apply
        try:
            outcome: dict[str, Any] | BaseException = module.apply(ctx, spec, record.target, record.undo)
        except Exception as exc:  # noqa: BLE001 - settled as failed
            outcome = exc
        return settle(record, started, outcome)

    # A kind that can apply to every target in one go (pod-kill's DELETEs, all in flight at once)
    # says so with `apply_all`; None from it means "one by one" (an eviction waits on its PDB).
    bulk = getattr(module, "apply_all", None)
    started = time.time()
    outcomes: list[Any] | None = None
    if bulk is not None:
        try:
            outcomes = bulk(ctx, spec, [(r.target, r.undo) for r in fault.records])
        except Exception as exc:  # noqa: BLE001 - every target settled as failed: it may have half-happened
            outcomes = [exc] * len(fault.records)
    if outcomes is None:
        fault.records = ctx.kube.batch(applied, fault.records)
    else:
        fault.records = [settle(r, started, o) for r, o in zip(fault.records, outcomes, strict=True)]
    # Settled, written before the look: a runner that dies while it looks still reverts what it applied.
    book.write(fault.records, in_cluster=module.REVERTIBLE)
    done = [r for r in fault.records if r.applied_at]
    for record, seen in zip(done, landed.verify_all(ctx, module, spec, [(r.target, r.undo) for r in done],
                                                    fault.verify), strict=True):
        record.landed = seen
    book.write(done, in_cluster=module.REVERTIBLE)
    return fault


def inject(ctx: Context, book: ledger.Ledger, raw: Any, where: str = "fault") -> Planned:
    """Plan one fault and execute it (for callers with a single fault: a Chaos Toolkit action)."""
    (fault,) = plan(ctx, [(raw, where)]).faults
    return execute_one(ctx, book, fault)
