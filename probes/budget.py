"""A budget, judged: did a check hold at some moment within `budget` seconds of time zero?

The moments are the cluster as it was over time (probes.snapshot.moments: the run's record, then
live), each standing until the next. The verdict is the first moment in [time zero, time zero +
budget] at which the check holds, however late the probe that asks: a probe reached after its
budget judges the record of the interval, and with no record reaching into it, cannot judge
(outcome unknown), never the present state. A moment before time zero does not count; the state
it shows still stands at time zero if nothing changed since.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from probes.snapshot import ClusterSnapshot, Moment
from probes.verdict import Verdict, budgeted, failed, passed, unknown


def first_within(moments: Iterable[Moment], check: Callable[[ClusterSnapshot], Verdict], zero: float,
                 budget: float, zero_is: str) -> Verdict:
    """Passes at the first moment within the budget the check holds, saying after how long
    (`recovered_after_seconds`, beside `budget_seconds`); fails with the check's reason as the
    budget ran out. `impact_seen`: the check was seen failing at some moment in the interval (the
    fault showed)."""
    deadline = zero + budget
    last: Verdict | None = None
    observed_from: float | None = None
    impact = False
    for m in _from(moments, zero):
        if m.at > deadline:
            break
        at = max(m.at, zero)
        if observed_from is None:
            observed_from = at
        verdict = check(m.snapshot)
        if verdict.ok:
            after = at - zero
            return passed(f"{verdict.reason}, {after:.1f} s after {zero_is} (budget {budget:g} s)",
                          **verdict.details, **budgeted(budget, after), impact_seen=impact,
                          observed_from=round(observed_from - zero, 3))
        last, impact = verdict, True
    if last is None or observed_from is None:
        return unknown(f"no view of the cluster within {budget:g} s of {zero_is}: the probe came after its "
                       "budget, with no record of the interval to judge from", **budgeted(budget, None),
                       impact_seen=False, observed_from=None)
    return failed(f"{budget:g} s after {zero_is}: {last.reason}", **last.details, **budgeted(budget, None),
                  impact_seen=True, observed_from=round(observed_from - zero, 3))


def _from(moments: Iterable[Moment], zero: float) -> Iterator[Moment]:
    """The moments from time zero on: of those before it, only the last (it stands at zero)."""
    before: Moment | None = None
    for m in moments:
        if m.at <= zero:
            before = m
            continue
        if before is not None:
            yield before
            before = None
        yield m
    if before is not None:
        yield before
