"""Fault-landed verification: after a target's apply returns, its effect is read back and the
record says Confirmed, Mismatch or Inconclusive (ledger, journal, `kilocard fault`). A fault that
silently did not land (the wrong interface, an agent on the wrong node, a DCGM field that was not
injected) would make a green experiment meaningless; a Mismatch fails the fault unless the fault
allows it, and Inconclusive is said as such, never counted as landed.

Each kind's module may define `verify(ctx, spec, target, undo) -> (status, evidence[, final])`:
one look, from what the cluster or the node's agent shows (a taint, allocatable, the agent's
read-back of a qdisc, an nft table, a frozen cgroup). Effects take a moment to show (a device
plugin's report, a cgroup settling), so the look is repeated, with growing pauses, until it
confirms, says it is `final` (no read-back exists: looking again cannot tell more), the fault's
`verify.within_seconds` ends, or the fault's TTL would (an expired fault is not a missing one);
then the last look stands. Stopped meanwhile (Ctrl-C, a stop condition), what was not confirmed
is inconclusive. A kind without `verify` is Inconclusive. The fault's own options:

    verify: {within_seconds: 15, allow_mismatch: false}
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from chaos.agent.protocol import CONFIRMED, INCONCLUSIVE, MISMATCH
from chaos.errors import KilocardError
from chaos.faults import Context
from chaos.faults._spec import Fields
from probes.verdict import Contract

STATUSES = (CONFIRMED, MISMATCH, INCONCLUSIVE)
FIELD = "verify"
DEFAULT_WITHIN_SECONDS = 15.0
MAX_WITHIN_SECONDS = 600.0


CONTRACTS = (
    Contract("fault landed", "read-back",
             asserts="confirmed: after its apply, the fault's effect was read back from the cluster or the node's "
                     "agent (a taint, allocatable, a qdisc with its rate, an nft table, a frozen cgroup)",
             time_zero="the target's apply returning",
             interval="repeated looks with growing pauses until confirmed, final, `verify.within_seconds` or the "
                      "fault's TTL",
             missing="a kind with no read-back is inconclusive; an inconclusive landing whose effect no probe saw "
                     "fails the run (the run's verdict)",
             exceptions="a read-back that raised or could not look is inconclusive, never confirmed",
             outcomes=(("confirmed", "landed"), ("mismatch", "not as applied: fails the fault unless "
                       "verify.allow_mismatch"), ("inconclusive", "not told"))),
)


@dataclass(frozen=True)
class Options:
    within_seconds: float = DEFAULT_WITHIN_SECONDS
    allow_mismatch: bool = False


def split(raw: Any, where: str) -> tuple[Any, Options]:
    """(the fault mapping without its `verify` field, the options it gave)."""
    if not isinstance(raw, dict) or FIELD not in raw:
        return raw, Options()
    rest = {k: v for k, v in raw.items() if k != FIELD}
    f = Fields(raw[FIELD], f"{where}.{FIELD}")
    options = Options(f.number("within_seconds", DEFAULT_WITHIN_SECONDS, high=MAX_WITHIN_SECONDS),
                      f.bool("allow_mismatch"))
    f.done()
    return rest, options


def verify(ctx: Context, module: ModuleType, spec: Any, target: dict[str, Any], undo: dict[str, Any],
           options: Options) -> dict[str, Any]:
    """{"status", "evidence", "seconds"}: the last look, repeated until confirmed or out of time."""
    look = getattr(module, "verify", None)
    started = time.monotonic()
    if look is None:
        return _said(INCONCLUSIVE, f"{spec.kind} has no read-back", started)
    ttl = float(getattr(spec, "ttl_seconds", 0.0) or math.inf)
    within = min(options.within_seconds, max(0.0, ttl - 1.0))
    pause = 0.2
    while True:
        final = False
        try:
            status, evidence, *rest = look(ctx, spec, target, undo)
            final = bool(rest and rest[0])
        except KilocardError as exc:  # could not look (an API error): not a finding
            status, evidence = INCONCLUSIVE, f"could not read the effect back: {exc}"
        except Exception as exc:  # noqa: BLE001 - a read-back's bug must not undo the run's ledger
            return _said(INCONCLUSIVE, f"the read-back failed: {type(exc).__name__}: {exc}", started)
        if status not in STATUSES:
            status, evidence = INCONCLUSIVE, f"an unknown read-back status {status!r}: {evidence}"
        left = within - (time.monotonic() - started)
        if status == CONFIRMED or final or left <= 0:
            return _said(status, evidence, started)
        if ctx.stop.wait(min(pause, left)):  # stopped before it showed: that tells nothing
            return _said(INCONCLUSIVE, f"stopped before the effect could be read back ({status}: {evidence})",
                         started)
        pause = min(pause * 2, 2.0)


def _said(status: str, evidence: str, started: float) -> dict[str, Any]:
    return {"status": status, "evidence": evidence, "seconds": round(time.monotonic() - started, 3)}


__all__ = ["CONFIRMED", "INCONCLUSIVE", "MISMATCH", "Options", "split", "summary", "verify"]


def summary(landed: list[dict[str, Any]]) -> dict[str, int]:
    """How many targets said each status (journal: kilocard.landed)."""
    return {s: sum(1 for v in landed if v.get("status") == s) for s in STATUSES}
