"""Fault-landed verification: after a target's apply returns, its effect is read back and the
record says Confirmed, Mismatch or Inconclusive (ledger, journal, `kilocard fault`). A fault that
silently did not land (the wrong interface, an agent on the wrong node, a DCGM field that was not
injected) would make a green experiment meaningless; a Mismatch fails the fault unless the fault
allows it, and Inconclusive is said as such, never counted as landed.

Each kind's module may define `verify(ctx, spec, target, undo) -> Look(status, evidence, final)`:
one look, from what the cluster or the node's agent shows (a taint, allocatable, the agent's
read-back of a qdisc, an nft table, a frozen cgroup); or `verify_all(ctx, spec, [(target, undo)])`,
one such outcome (or the exception it makes) per target, for a kind that reads many targets back
in one go (a pod kill). Effects take a moment to show (a device plugin's report, a cgroup
settling), so the look is repeated, with growing pauses, until it confirms, says it is `final`
(no read-back exists: looking again cannot tell more), the fault's `verify.within_seconds` ends,
or the fault's TTL would (an expired fault is not a missing one); then the last look stands.
Stopped meanwhile (Ctrl-C, a stop condition), what was not confirmed is inconclusive. A kind
with no read-back is Inconclusive. The fault's own options:

    verify: {within_seconds: 15, allow_mismatch: false}
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chaos.agent.protocol import CONFIRMED, INCONCLUSIVE, MISMATCH
from chaos.errors import KilocardError
from chaos.faults import Context, FaultKind, Look
from chaos.fields import boolean, filled, mapping, number
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

    @classmethod
    def of(cls, values: dict[str, Any] | None) -> Options:
        """The options a fault's `verify` field gave (its schema accepted them), else the defaults;
        a number as a float, as for every field (`filled`)."""
        return cls(**filled(SCHEMA, values or {}))


# Every fault kind has this field (chaos.faults._spec.kind).
SCHEMA = mapping(FIELD, "how the fault's effect is read back once applied (chaos.landed): confirmed, mismatch or "
                 "inconclusive per target; a mismatch fails the fault", {
                     "within_seconds": number(0, MAX_WITHIN_SECONDS, "how long the read-back may take to confirm "
                                              "(effects take a moment to show)", Options.within_seconds),
                     "allow_mismatch": boolean("a mismatch is reported, not failed", Options.allow_mismatch)},
                 example={"within_seconds": 30})


def verify(ctx: Context, module: FaultKind, spec: Any, target: dict[str, Any], undo: dict[str, Any],
           options: Options) -> dict[str, Any]:
    """{"status", "evidence", "seconds"}: the last look, repeated until confirmed or out of time."""
    (said,) = verify_all(ctx, module, spec, [(target, undo)], options)
    return said


def verify_all(ctx: Context, module: FaultKind, spec: Any, targets: list[tuple[dict[str, Any], dict[str, Any]]],
               options: Options) -> list[dict[str, Any]]:
    """`verify` for every (target, undo) of one fault, one result each: the targets still undecided
    are looked at together, by the kind's `verify_all` where it has one (a pod kill reads every pod
    back in one go), else one by one in parallel; each is decided, and timed, on its own."""
    started = time.monotonic()
    look = _looks(ctx, module, spec)
    if look is None:
        return [_said(INCONCLUSIVE, f"{spec.kind} has no read-back", started) for _ in targets]
    ttl = float(getattr(spec, "ttl_seconds", 0.0) or math.inf)
    within = min(options.within_seconds, max(0.0, ttl - 1.0))
    said: list[dict[str, Any] | None] = [None] * len(targets)
    pause = 0.2
    while True:
        pending = [i for i, s in enumerate(said) if s is None]
        seen = look([targets[i] for i in pending])
        left = within - (time.monotonic() - started)
        for i, (status, evidence, final) in zip(pending, seen, strict=True):
            if status == CONFIRMED or final or left <= 0:
                said[i] = _said(status, evidence, started)
        undecided = [(i, status, evidence) for i, (status, evidence, _f) in zip(pending, seen, strict=True)
                     if said[i] is None]
        if not undecided:
            return [s for s in said if s is not None]
        if ctx.stop.wait(min(pause, left)):  # stopped before it showed: that tells nothing
            for i, status, evidence in undecided:
                said[i] = _said(INCONCLUSIVE, f"stopped before the effect could be read back ({status}: {evidence})",
                                started)
            return [s for s in said if s is not None]
        pause = min(pause * 2, 2.0)


Looker = Callable[[list[tuple[dict[str, Any], dict[str, Any]]]], list[tuple[str, str, bool]]]


def _looks(ctx: Context, module: FaultKind, spec: Any) -> Looker | None:
    """One look at many targets: (status, evidence, final) each. A look that could not be made (an
    API error) is inconclusive and looked at again; one that failed otherwise (a read-back's bug)
    is inconclusive and final, so it never undoes the run's ledger."""
    many: Callable[..., Any] | None = getattr(module, "verify_all", None)
    one: Callable[..., Any] | None = getattr(module, "verify", None)
    if many is None:
        if one is None:
            return None
        many = _one_by_one(one)
    each = many

    def outcome(found: Any) -> tuple[str, str, bool]:
        if isinstance(found, KilocardError):
            return INCONCLUSIVE, f"could not read the effect back: {found}", False
        if isinstance(found, Exception):
            return INCONCLUSIVE, f"the read-back failed: {type(found).__name__}: {found}", True
        seen = Look(*found)
        if seen.status not in STATUSES:
            return INCONCLUSIVE, f"an unknown read-back status {seen.status!r}: {seen.evidence}", False
        return seen.status, seen.evidence, bool(seen.final)

    def look(targets: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[tuple[str, str, bool]]:
        found = _caught(lambda: each(ctx, spec, targets))
        return [outcome(f) for f in (found if isinstance(found, list) else [found] * len(targets))]

    return look


def _one_by_one(one: Callable[..., Any]) -> Callable[..., list[Any]]:
    """A kind's look at one target as a look at many: in parallel, each exception its target's own."""
    def many(ctx: Context, spec: Any, targets: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[Any]:
        return ctx.kube.batch(lambda t: _caught(lambda: one(ctx, spec, *t)), targets)
    return many


def _caught(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - judged as an outcome
        return exc


def _said(status: str, evidence: str, started: float) -> dict[str, Any]:
    return {"status": status, "evidence": evidence, "seconds": round(time.monotonic() - started, 3)}


__all__ = ["CONFIRMED", "INCONCLUSIVE", "MISMATCH", "Options", "SCHEMA", "summary", "verify", "verify_all"]


def summary(landed: list[dict[str, Any]]) -> dict[str, int]:
    """How many targets said each status (journal: kilocard.landed)."""
    return {s: sum(1 for v in landed if v.get("status") == s) for s in STATUSES}
