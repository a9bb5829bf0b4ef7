"""What a month of failures costs each model, over many simulated months: SLO-minutes lost,
availability, the worst day, the time with no spare, each as a mean with its confidence interval
and the spread of the months; and the spares that bring it under a target.

    SLO-minutes   minutes the model's P95 TTFT, its load over the replicas serving, is over its
                  SLO (probes.impact.Load)
    availability  1 - SLO-minutes / horizon
    worst day     the day of the month with the most SLO-minutes
    no spare      minutes with no replica beyond the fewest that keep the SLO (one more loss
                  breaks it), breaches included
    replica-hours replicas not serving, summed over time (for a model without load figures too)

Across months (seeds): the mean, a 95 % confidence interval of the mean (normal, from the
months' standard deviation), and the 90th percentile of the months ("9 months in 10 lose at most").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from chaos.rehearsal.simulation import DAY, Month
from probes.impact import Load

Z95 = 1.96


@dataclass(frozen=True)
class Figure:
    """One figure over many months."""

    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def half_width(self) -> float:
        """Of the 95 % confidence interval of the mean; inf from one month."""
        n = len(self.values)
        return Z95 * statistics.stdev(self.values) / math.sqrt(n) if n > 1 else math.inf

    @property
    def p90(self) -> float:
        return quantile(self.values, 0.9)

    def describe(self, digits: int = 1) -> dict[str, Any]:
        low, high = max(0.0, self.mean - self.half_width), self.mean + self.half_width
        return {"mean": round(self.mean, digits),
                "ci95": [round(low, digits), round(high, digits)] if math.isfinite(self.half_width) else None,
                "p90": round(self.p90, digits), "min": round(min(self.values), digits),
                "max": round(max(self.values), digits)}


def quantile(values: tuple[float, ...] | list[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics (numpy's default)."""
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def fewest(load: Load, most: int) -> int | None:
    """The fewest replicas that keep the SLO (None: not even `most` do)."""
    return next((r for r in range(1, most + 1) if load.p95(r) <= load.slo_seconds), None)


@dataclass(frozen=True)
class ModelMonth:
    """One model over one simulated month."""

    slo_minutes: float | None  # None: no load figures
    worst_day: int | None
    worst_day_minutes: float | None
    no_spare_minutes: float | None
    replica_hours_down: float
    days: tuple[float, ...] = ()  # SLO-minutes of each day


def of_month(month: Month, key: tuple[str, str], load: Load | None) -> ModelMonth:
    timeline = month.serving[key]
    full = timeline[0][1]
    spans = list(zip(timeline, [*timeline[1:], (month.horizon, 0)], strict=True))
    down_hours = sum((until - at) * (full - serving) for (at, serving), (until, _) in spans) / 3600
    if load is None:
        return ModelMonth(None, None, None, None, down_hours)
    least = fewest(load, max(full, 1))
    days = [0.0] * max(1, math.ceil(month.horizon / DAY))
    no_spare = 0.0
    for (at, serving), (until, _) in spans:
        if least is None or serving <= least:
            no_spare += until - at
    for at, until in breaches(timeline, month.horizon, load):
        for day, minutes in _split(at, until, DAY):
            days[min(day, len(days) - 1)] += minutes
    worst = max(range(len(days)), key=lambda d: days[d])
    return ModelMonth(sum(days), worst, days[worst], no_spare / 60, down_hours, tuple(days))


def _split(start: float, end: float, width: float) -> Iterator[tuple[int, float]]:
    """(bin, minutes) of [start, end) in the bins of `width` seconds it falls in (days, hours)."""
    while start < end:
        index = int(start // width)
        upto = min(end, (index + 1) * width)
        yield index, (upto - start) / 60
        start = upto


def breaches(timeline: list[tuple[float, int]], horizon: float, load: Load) -> list[tuple[float, float]]:
    """The spans [from, to) the model's SLO was broken."""
    spans = zip(timeline, [*timeline[1:], (horizon, 0)], strict=True)
    return [(at, until) for (at, serving), (until, _) in spans if load.p95(serving) > load.slo_seconds]


def worst_hour(months: list[Month], loads: dict[tuple[str, str], Load]) -> dict[str, Any] | None:
    """The hour, over every simulated month, with the most SLO-minutes summed over the models:
    its month (seed index), start, minutes per model, each model's breaches and the failures that
    were in force in it (seconds from its start, clipped to it), and the events from a day before."""
    best: tuple[float, int, float, dict[str, float]] | None = None
    for index, month in enumerate(months):
        hours: dict[int, dict[str, float]] = {}
        for key, load in loads.items():
            spans = breaches(month.serving[key], month.horizon, load) if key in month.serving else []
            name = f"{key[0]}/{key[1]}"
            for at, until in spans:
                for hour, minutes in _split(at, until, 3600):
                    per = hours.setdefault(hour, {})
                    per[name] = per.get(name, 0.0) + minutes
        for hour, per in hours.items():
            total = sum(per.values())
            if best is None or total > best[0]:
                best = (total, index, hour * 3600.0, per)
    if best is None:
        return None
    total, index, start, per = best
    month = months[index]
    end = start + 3600

    def clip(t: float) -> float:
        return round(min(max(t - start, 0.0), 3600.0), 1)

    in_force = []
    for e in month.events:
        if e.kind != "failure" or e.at >= end:
            continue
        # A node or card is out until its repair (or the horizon); an engine crash is a moment.
        until = e.at if e.detail == "replica" else next(
            (r.at for r in month.events if r.kind == "repaired" and r.node == e.node and r.what == e.what
             and r.at >= e.at), month.horizon)
        if until < start or (e.detail == "replica" and e.at < start):
            continue
        in_force.append({"class": e.what, "node": e.node, "card": e.card, "pods": list(e.pods),
                         "from": clip(e.at), "to": clip(until), "at": round(e.at - start, 1)})
    return {"month": index, "start_seconds": start, "slo_minutes": round(total, 2),
            "models": {k: round(v, 2) for k, v in sorted(per.items())},
            "breaches": {f"{k[0]}/{k[1]}": [[clip(a), clip(b)] for a, b in
                                            breaches(month.serving[k], month.horizon, load) if b > start and a < end]
                         for k, load in sorted(loads.items()) if k in month.serving},
            "faults": in_force,
            "events": [{"at": round(e.at - start, 1), "kind": e.kind, "what": e.what, "detail": e.detail}
                       for e in month.events if start - DAY <= e.at < end]}
