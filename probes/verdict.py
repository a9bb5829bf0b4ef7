"""What a probe answers: ok or not, why (one line a person reads), and the figures behind it.
`to_json()` is the tolerance-friendly output a Chaos Toolkit probe returns.

Every verdict ends in one of four judgements (docs/verdicts.md):
    ok        judged, and the cluster is as the verdict asserts
    failed    judged, and it is not: the reason says what was seen
    unknown   could not judge (no data, a silence nothing explains, no history to judge from):
              never healthy, and never the failure an experiment expects either
    error     the probe raised (a 403, a bug): the runner's word for it, never a judged failure
A verdict's `outcome` detail says more (held, recovered, no_impact, hung, ...); "unknown" is both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OK, FAILED, UNKNOWN, ERROR = "ok", "failed", "unknown", "error"

# How a verdict says it had no data to judge by (its outcome is "unknown"): never healthy, and
# never the failure an experiment expects either (chaos.judgement.Expectation).
NO_DATA = "cannot judge, not healthy"

# Every budgeted probe says its budget, and how long after its time zero the cluster met it (None:
# not met), under these two keys whatever the probe: the resilience score reads them alone.
BUDGET_SECONDS, RECOVERED_AFTER_SECONDS = "budget_seconds", "recovered_after_seconds"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str
    details: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def judgement(self) -> str:
        if self.ok:
            return OK
        return UNKNOWN if self.details.get("outcome") == UNKNOWN else FAILED

    def to_json(self) -> dict[str, Any]:
        """`verdict` is "ok" or "failed", for a built-in Chaos Toolkit tolerance:
        {type: regex, target: verdict, pattern: "^ok$"}; `judgement` tells failed from unknown."""
        return {"verdict": "ok" if self.ok else "failed", "ok": self.ok, "reason": self.reason,
                "judgement": self.judgement, **self.details}


def passed(reason: str, **details: Any) -> Verdict:
    return Verdict(True, reason, details)


def failed(reason: str, **details: Any) -> Verdict:
    return Verdict(False, reason, details)


def unknown(reason: str, **details: Any) -> Verdict:
    """Could not judge: the reason ends saying so."""
    return Verdict(False, f"{reason}: {NO_DATA}", {**details, "outcome": UNKNOWN})


def budgeted(budget: float, after: float | None) -> dict[str, float | None]:
    """A budgeted probe's two keys."""
    return {BUDGET_SECONDS: budget, RECOVERED_AFTER_SECONDS: None if after is None else round(after, 3)}


def recovery(output: dict[str, Any]) -> tuple[float, float] | None:
    """(seconds to recover, budget) from a budgeted probe's output that met its budget; None for
    any other output (not budgeted, not met, or not numbers)."""
    after, budget = output.get(RECOVERED_AFTER_SECONDS), output.get(BUDGET_SECONDS)
    if (isinstance(after, bool) or isinstance(budget, bool) or not isinstance(after, (int, float))
            or not isinstance(budget, (int, float))):
        return None
    return (float(after), float(budget)) if budget > 0 else None


@dataclass(frozen=True)
class Contract:
    """What a verdict means, written once (docs/verdicts.md is generated from these):
    what `ok` asserts, its time zero, the interval it judges, what missing, NaN or vanished data
    means, what an exception means, and the outcomes it can end in."""

    name: str  # as an experiment names it: a probe function, a stop condition, a guard
    kind: str  # probe | stop condition | guard | runner
    asserts: str
    time_zero: str
    interval: str
    missing: str
    exceptions: str
    outcomes: tuple[tuple[str, str], ...]  # (outcome, when)
    judge: tuple[str, ...] = ()  # the pure functions that decide it (module.function), as mutated and oracle-tested
