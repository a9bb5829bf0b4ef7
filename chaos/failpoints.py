"""Failpoints: named places where the runner can be made to die on purpose, as etcd's gofail and
TiKV's fail-rs do, so a crash test hits the narrow windows a random SIGKILL almost never does
(the ledger written but nothing applied yet; a fault applied but not yet written down).

    KILOCARD_FAILPOINT=<name>[@<n>]   SIGKILL this process the n-th time (default 1st) it reaches <name>

Unset (always, outside tests), `reach` returns at once. The names, where they sit:

    fault-recorded   chaos.plan.execute_one: the ledger holds the fault as recorded; not applied yet
    fault-applied    chaos.plan.execute_one: one target's apply returned; the ledger does not know yet
    fault-reverted   chaos.revert.revert: one target's revert returned; the ledger does not know yet
"""

from __future__ import annotations

import os
import signal
import threading

NAMES = ("fault-recorded", "fault-applied", "fault-reverted")

_hits = 0
_lock = threading.Lock()


def _parse(text: str) -> tuple[str, int] | None:
    if not text:
        return None
    name, _, nth = text.partition("@")
    if name not in NAMES or not (nth or "1").isdigit() or int(nth or "1") < 1:
        raise ValueError(f"KILOCARD_FAILPOINT: expected one of {', '.join(NAMES)}, optionally @<n> (n >= 1), "
                         f"got {text!r}")
    return name, int(nth or "1")


def _arm() -> tuple[tuple[str, int] | None, str | None]:
    """(the armed failpoint, or the problem with the variable): a bad value is the command's input
    error (exit 2, said by the CLI), not a traceback at import."""
    try:
        return _parse(os.environ.get("KILOCARD_FAILPOINT", "")), None
    except ValueError as exc:
        return None, str(exc)


_armed, PROBLEM = _arm()


def reach(name: str) -> None:
    """Die here (SIGKILL: no handler, no finally, no flush) if this is the armed failpoint's n-th hit."""
    global _hits
    if _armed is None or _armed[0] != name:
        return
    with _lock:
        _hits += 1
        if _hits == _armed[1]:
            os.kill(os.getpid(), signal.SIGKILL)
