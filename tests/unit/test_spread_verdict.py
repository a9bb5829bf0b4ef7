"""traffic_spread_within's classes of wrong verdicts, one each: the replica a mean would hide, a
verdict taken before the budget, one that stops looking before the hold ends, silence read as a
spread, a restarted counter, and a replacement judged on a window it was not Ready for."""

from probes.spread import Rule, Sample, judge

T0 = 1_000.0
ALL = frozenset("abc")


def served(per_second: dict[str, float], start: float = -10, end: float = 40, ready=ALL, step: float = 2.0,
           counters: dict[str, float] | None = None) -> list[Sample]:
    """A sample every `step` s, each replica's counter rising at its rate per second."""
    counters = dict(counters or {r: 0.0 for r in per_second})
    samples = []
    t = start
    while t <= end:
        samples.append(Sample(T0 + t, dict(counters), ready))
        counters = {r: v + per_second.get(r, 0.0) * step for r, v in counters.items()}
        t += step
    return samples


def test_one_replica_left_out_fails_by_name_where_the_model_s_mean_would_pass():
    v = judge(served({"a": 10, "b": 10, "c": 1}), T0, Rule(10, 10))
    assert not v.ok and v.details["outcome"] == "not_spread" and v.details["replica"] == "c", v.reason
    assert v.details["share"] < 0.2 and "c finished" in v.reason
    ok = judge(served({"a": 10, "b": 10, "c": 8}), T0, Rule(10, 10))
    assert ok.ok and ok.details["outcome"] == "spread" and ok.details["lowest_share"] > 0.8, ok.reason


def test_uneven_before_the_budget_passes_once_even_and_uneven_after_it_fails():
    # c gets nothing for the first 14 s after time zero (a stale router), then its share.
    early = [s for s in served({"a": 10, "b": 10, "c": 0}, -10, 14)]
    later = served({"a": 10, "b": 10, "c": 10}, 16, 40, counters={"a": 240, "b": 240, "c": 0})
    v = judge([*early, *later], T0, Rule(30, 10))
    assert v.ok and 14 <= v.details["uneven_until_seconds"] <= 24, v.reason
    assert judge([*early, *later], T0, Rule(10, 10)).details["outcome"] == "not_spread"


def test_an_even_spread_lost_during_the_hold_fails():
    first = served({"a": 10, "b": 10, "c": 10}, -10, 20)
    then = served({"a": 10, "b": 10, "c": 0}, 22, 40, counters={"a": 320, "b": 320, "c": 320})
    v = judge([*first, *then], T0, Rule(10, 20))
    assert not v.ok and v.details["replica"] == "c" and v.details["at_seconds"] > 20, v.reason


def test_silence_is_never_a_spread():
    # A Ready replica with no series: unseen, so unknown; no request finished at all: uneven.
    quiet = [Sample(s.at, {k: x for k, x in s.finished.items() if k != "c"}, ALL)
             for s in served({"a": 10, "b": 10, "c": 10})]
    v = judge(quiet, T0, Rule(10, 10))
    assert not v.ok and v.details["outcome"] == "unknown" and "silent: c" in v.reason, v.reason
    idle = judge(served({"a": 0, "b": 0, "c": 0}, counters={"a": 5, "b": 5, "c": 5}), T0, Rule(10, 10))
    assert not idle.ok and idle.details["outcome"] == "not_spread" and idle.details["served"] == 0, idle.reason
    assert judge([], T0, Rule(10, 10)).details["outcome"] == "unknown"


def test_a_restarted_counter_counts_from_its_new_value():
    samples = served({"a": 10, "b": 10, "c": 10}, -10, 40, counters={"a": 0, "b": 0, "c": 5000})
    # c restarts 19 s after time zero: its counter falls to what it served since (10 at 20 s).
    restarted = [Sample(s.at, {**s.finished, "c": (s.at - T0 - 19) * 10} if s.at >= T0 + 20 else s.finished,
                        s.ready) for s in samples]
    v = judge(restarted, T0, Rule(10, 20))
    assert v.ok and v.details["lowest_share"] > 0.8, v.reason


def test_a_replacement_is_judged_once_ready_through_a_whole_window():
    # c is replaced by d at 10 s: d's counter starts at 0 then, and it is Ready from 12 s.
    before = served({"a": 10, "b": 10, "c": 10}, -10, 10)
    after = [Sample(s.at, {"a": s.finished["a"], "b": s.finished["b"], "d": s.finished["c"]},
                    frozenset("abd") if s.at >= T0 + 12 else frozenset("ab"))
             for s in served({"a": 10, "b": 10, "c": 10}, 12, 40, counters={"a": 220, "b": 220, "c": 0})]
    v = judge([*before, *after], T0, Rule(10, 20))
    assert v.ok and v.details["replicas"] == 3, v.reason
