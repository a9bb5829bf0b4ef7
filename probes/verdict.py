"""What a probe answers: ok or not, why (one line a person reads), and the figures behind it.
`to_json()` is the tolerance-friendly output a Chaos Toolkit probe returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str
    details: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        """`verdict` is "ok" or "failed", for a built-in Chaos Toolkit tolerance:
        {type: regex, target: verdict, pattern: "^ok$"}."""
        return {"verdict": "ok" if self.ok else "failed", "ok": self.ok, "reason": self.reason, **self.details}


# How a verdict says it had no data to judge by (its outcome is "unknown"): never healthy, and
# never the failure an experiment expects either (chaos.run.Expectation).
NO_DATA = "cannot judge, not healthy"


def passed(reason: str, **details: Any) -> Verdict:
    return Verdict(True, reason, details)


def failed(reason: str, **details: Any) -> Verdict:
    return Verdict(False, reason, details)
