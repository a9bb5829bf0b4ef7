"""Apply and revert faults through the write-ahead ledger; recover what a dead runner left open.

    inject:  parse (bad input -> SpecError, nothing recorded) -> select targets ("no targets" is an
             error unless allow_empty) -> prepare each (read what revert needs) -> ledger: recorded
             (with that undo data) -> apply, bounded concurrency -> ledger: applied | failed
    revert:  each open record -> kind.revert(undo) -> ledger: reverted; the in-cluster marker goes
             when the run has nothing open
    recover: open records from the local ledger files and the in-cluster markers (another machine
             needs only the kubeconfig) -> revert, per run; `expired_only` is the TTL reaper's pass
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos import faults, ledger
from chaos.errors import KilocardError, SpecError
from chaos.faults import Context


@dataclass
class Injection:
    kind: str
    spec: Any
    records: list[ledger.Record] = field(default_factory=list)

    @property
    def failed(self) -> list[ledger.Record]:
        return [r for r in self.records if r.state == "failed"]


def parse(raw: Any, where: str) -> tuple[Any, Any]:
    """(kind module, spec) from plain data; SpecError names the field."""
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a mapping with a 'kind', got {type(raw).__name__}")
    module = faults.kind_module(raw.get("kind"), where)
    return module, module.parse(raw, where)


def inject(ctx: Context, book: ledger.Ledger, raw: Any, where: str = "fault") -> Injection:
    module, spec = parse(raw, where)
    targets = module.targets(ctx, spec)
    if not targets and not spec.allow_empty:
        raise SpecError(f"{where}: no targets: the selectors match nothing (set allow_empty: true to accept that)")
    expires = ledger.iso(time.time() + max(spec.ttl_seconds, 0))
    injection = Injection(spec.kind, spec)

    def prepared(target: dict[str, Any]) -> ledger.Record:
        return ledger.Record(run_id=book.run_id, fault_id=uuid.uuid4().hex[:12], kind=spec.kind, target=target,
                             expires_at=expires, undo=module.prepare(ctx, spec, target))

    injection.records = ctx.kube.batch(prepared, targets)
    book.write(injection.records, in_cluster=module.REVERTIBLE)  # BEFORE anything changes

    def applied(record: ledger.Record) -> ledger.Record:
        try:
            record.undo = module.apply(ctx, spec, record.target, record.undo)
            record.state = "applied" if module.REVERTIBLE else "reverted"  # nothing left to undo
        except KilocardError as exc:
            record.state, record.error = "failed", str(exc)
        return record

    injection.records = ctx.kube.batch(applied, injection.records)
    book.write(injection.records, in_cluster=module.REVERTIBLE)
    return injection


def revert(ctx: Context, book: ledger.Ledger, records: list[ledger.Record]) -> list[ledger.Record]:
    """Revert open records; return those whose revert failed (operator action needed)."""
    todo = [r for r in records if r.open]
    modules = faults.registry()

    def one(record: ledger.Record) -> ledger.Record:
        try:
            modules[record.kind].revert(ctx, record.undo)
            record.state, record.error = "reverted", ""
        except KilocardError as exc:
            record.error = f"revert failed: {exc}"
        return record

    done = ctx.kube.batch(one, todo)
    book.write(done, in_cluster=any(modules[r.kind].REVERTIBLE for r in done))
    book.close_if_done()
    return [r for r in done if r.open]


def recover(ctx: Context, directory: Path | None, run_id: str | None = None,
            expired_only: bool = False) -> tuple[list[ledger.Record], list[ledger.Record]]:
    """Revert what is still open (of one run, or all); return (reverted, still open). With no
    directory only the in-cluster markers count (an in-cluster reaper)."""
    found = ledger.open_records(ctx.kube, directory, run_id)
    if expired_only:
        now = time.time()
        found = [r for r in found if r.expired(now)]
    by_run: dict[str, list[ledger.Record]] = defaultdict(list)
    for r in found:
        by_run[r.run_id].append(r)
    reverted, left = [], []
    for run, records in sorted(by_run.items()):
        book = ledger.Ledger(run, ctx.kube, directory, on_disk=directory is not None)
        failed = revert(Context(ctx.kube, ctx.agents, run, ctx.say), book, records)
        left += failed
        reverted += [r for r in records if r not in failed]
    return reverted, left
