"""The straggler verdict (probes/straggler.py) on hand-made timelines, each the class of wrong
verdict it must not give: the slow replica averaged away, silence read as "no straggler", a
straggler from before the fault credited to it, a slow start judged before it could show."""

from __future__ import annotations

import statistics

from probes.straggler import Rule, Sample, judge

T0 = 1_700_000_000.0


def timeline(slow_from: float | None, replicas: int = 4, slow: str = "r1", factor: float = 1.6,
             silent: str | None = None, start: int = -5, end: int = 61) -> list[Sample]:
    names = [f"r{i}" for i in range(replicas)]
    samples = []
    for t in range(start, end):
        values = {r: 0.05 * (factor if r == slow and slow_from is not None and t >= slow_from else 1.0)
                  for r in names if r != silent}
        samples.append(Sample(T0 + t, values, frozenset(names)))
    return samples


def test_the_slow_replica_is_named_where_the_models_average_barely_moves():
    samples = timeline(slow_from=0, replicas=8, factor=1.5)
    mean_rise = statistics.mean(samples[-1].values.values()) / 0.05
    assert mean_rise < 1.1  # a model-level figure would call this healthy
    v = judge(samples, T0, Rule(ratio=1.3, hold=10, budget=60, blind=11))
    assert v.ok and v.details["straggler"] == "r1" and v.details["ratio"] == 1.5, v.reason
    assert v.details["named_after_seconds"] == 21.0 and v.details["slow_since_seconds"] == 11.0


def test_a_silent_replica_makes_no_straggler_unknown_never_a_clean_bill():
    v = judge(timeline(slow_from=None, silent="r2"), T0, Rule(hold=10, budget=30))
    assert not v.ok and v.details["outcome"] == "unknown" and v.details["unseen"] == 31, v.reason
    healthy = judge(timeline(slow_from=None), T0, Rule(hold=10, budget=30))
    assert healthy.details["outcome"] == "not_named" and "slowest" in healthy.reason


def test_a_replica_slow_before_the_fault_is_not_the_faults_straggler():
    v = judge(timeline(slow_from=-5), T0, Rule(hold=10, budget=60))
    assert not v.ok and v.details["outcome"] == "already" and v.details["straggler"] == "r1", v.reason


def test_slowness_that_comes_too_late_or_too_briefly_is_not_named():
    late = judge(timeline(slow_from=55), T0, Rule(hold=10, budget=60))
    assert late.details["outcome"] == "not_named", late.reason
    flicker = [Sample(s.at, {**s.values, "r1": 0.05}, s.ready) if int(s.at - T0) % 8 == 0 else s
               for s in timeline(slow_from=20)]  # back to its peers' pace every 8 s
    v = judge(flicker, T0, Rule(hold=10, budget=60))
    assert v.details["outcome"] == "not_named", v.reason  # never 10 s in a row


def test_nothing_is_judged_inside_the_blind_window():
    v = judge(timeline(slow_from=0, end=15), T0, Rule(hold=2, budget=14, blind=11))
    assert v.ok and v.details["slow_since_seconds"] == 11.0, v.reason  # the first sample it may judge
    assert judge(timeline(slow_from=0, end=10), T0, Rule(hold=2, budget=9, blind=11)).details["outcome"] == "unknown"
