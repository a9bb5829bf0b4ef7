"""Revert what a run applied, from its ledger records; recover what a dead runner left open.

    revert:  each open record -> kind.revert(undo) (only what that run placed) -> ledger: reverted;
             the in-cluster marker goes when the run has nothing open
    recover: open records from the local ledger files and the in-cluster markers (another machine
             needs only the kubeconfig) -> revert, per run; `expired_only` is the TTL reaper's pass
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from chaos import failpoints, faults, ledger
from chaos.errors import KilocardError
from chaos.faults import Context


def revert(ctx: Context, book: ledger.Ledger, records: list[ledger.Record]) -> list[ledger.Record]:
    """Revert open records; return those whose revert failed (operator action needed)."""
    todo = [r for r in records if r.open]
    modules = faults.registry()

    def one(record: ledger.Record) -> ledger.Record:
        try:
            modules[record.kind].revert(ctx.for_run(record.run_id), record.undo)
            failpoints.reach("fault-reverted")
            record.state, record.error = "reverted", ""
        except KilocardError as exc:
            record.error = f"revert failed: {exc}"
        except Exception as exc:  # noqa: BLE001 - a bug must not stop the other reverts
            record.error = f"revert failed: unexpected {type(exc).__name__}: {exc}"
        return record

    done = ctx.kube.batch(one, todo)
    book.write(done, in_cluster=any(modules[r.kind].REVERTIBLE for r in done))
    book.close_if_done()
    return [r for r in done if r.open]


def pending(ctx: Context, directory: Path | None, run_id: str | None = None,
            expired_only: bool = False) -> list[ledger.Record]:
    """What `recover` would revert (of one run, or all): the open records, past their TTL only
    with `expired_only`."""
    found = ledger.open_records(ctx.kube, directory, run_id)
    now = time.time()
    return [r for r in found if r.expired(now)] if expired_only else found


def recover(ctx: Context, directory: Path | None, run_id: str | None = None,
            expired_only: bool = False) -> tuple[list[ledger.Record], list[ledger.Record]]:
    """Revert what is still open (of one run, or all); return (reverted, still open). With no
    directory only the in-cluster markers count (an in-cluster reaper)."""
    found = pending(ctx, directory, run_id, expired_only)
    by_run: dict[str, list[ledger.Record]] = defaultdict(list)
    for r in found:
        by_run[r.run_id].append(r)
    reverted, left = [], []
    for run, records in sorted(by_run.items()):
        book = ledger.Ledger(run, ctx.kube, directory, on_disk=directory is not None)
        failed = revert(ctx, book, records)  # each record is reverted as its own run
        left += failed
        reverted += [r for r in records if r not in failed]
    return reverted, left
