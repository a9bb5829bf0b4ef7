"""Recovery and verdict per scenario over runs, and the resilience score.

Score of one run: 0 unless it passed (its judged exit code is 0: an experiment that declares an
expected failure passes when that failure is met). A passing run scores 1 - 0.5 x r, where r is
its slowest recovery as a share of that check's budget (capped at 1): a recovery at the budget
scores 0.5, an instant one 1. A run with no budgeted recovery check scores 1 when it passes.
A scenario's score is the mean of its last five runs; the resilience score is 100 x the mean of
the scenarios' scores, rounded. Budgeted recoveries are those the probes measured, each saying
`recovered_after_seconds` of its `budget_seconds` (probes.verdict.budgeted): whatever the probe,
none is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from chaos.report.journal import Run
from probes.verdict import recovery

LAST = 5


@dataclass(frozen=True)
class Recovery:
    seconds: float
    budget: float
    check: str


def recoveries(run: Run) -> list[Recovery]:
    """Every budgeted recovery the run measured, from any check that says one."""
    return [Recovery(*measured, c.name) for c in run.checks if (measured := recovery(c.output)) is not None]


def slowest(run: Run) -> Recovery | None:
    found = recoveries(run)
    return max(found, key=lambda r: r.seconds / r.budget) if found else None


def score(run: Run) -> float:
    if run.exit_code != 0:
        return 0.0
    worst = slowest(run)
    return 1.0 if worst is None else 1.0 - 0.5 * min(1.0, worst.seconds / worst.budget)


def by_scenario(runs: list[Run]) -> dict[str, list[Run]]:
    found: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda r: r.when):
        found.setdefault(run.scenario, []).append(run)
    return found


def resilience(runs: list[Run]) -> int:
    scenarios = by_scenario(runs)
    if not scenarios:
        return 0
    means = [sum(score(r) for r in rs[-LAST:]) / len(rs[-LAST:]) for rs in scenarios.values()]
    return round(100 * sum(means) / len(means))
