"""kv_cache_within's classes of wrong verdicts, one each: an exhausted replica among healthy ones,
a replacement's preemptions, a restart's counter, a silent replica, a load that never came."""

from probes.kv import Bounds, Sample, judge

T0 = 1_000.0
ALL = frozenset({"a", "b"})


def steady(at: float, a: float = 0.0, b: float = 0.0, ua: float = 0.4, ub: float = 0.4) -> Sample:
    return Sample(at, {"a": a, "b": b}, {"a": ua, "b": ub}, ALL)


def test_no_preemption_and_usage_in_bounds_passes_naming_the_hottest_replica():
    v = judge([steady(T0 - 5), steady(T0 + 5, ua=0.7), steady(T0 + 15)], T0, Bounds(20))
    assert v.ok and v.details["outcome"] == "within" and v.details["replica"] == "a", v.reason


def test_one_replica_preempting_fails_however_quiet_the_others_the_sum_or_mean_would_hide_nothing():
    samples = [steady(T0 - 5, a=40), steady(T0 + 5, a=40), steady(T0 + 10, a=43), steady(T0 + 15, a=45)]
    v = judge(samples, T0, Bounds(20))
    # Its counter stood at 40 before time zero: only the 5 after it are the fault's.
    assert not v.ok and v.details["outcome"] == "preempted" and v.details["replica"] == "a", v.reason
    assert v.details["preemptions"] == 5 and v.details["since_seconds"] == 10
    assert judge(samples, T0, Bounds(20, max_preemptions=5)).ok


def test_a_replacement_first_seen_after_time_zero_counts_from_zero_and_a_restart_counts_on():
    fresh = [steady(T0 - 5), Sample(T0 + 5, {"a": 0, "b": 0, "c": 3}, {"a": 0.4, "b": 0.4, "c": 0.9}, ALL)]
    said = judge(fresh, T0, Bounds(20)).details
    assert said["replica"] == "c" and said["preemptions"] == 3
    restarted = [steady(T0 - 5, a=10), steady(T0 + 5, a=12), steady(T0 + 10, a=1)]
    assert judge(restarted, T0, Bounds(20)).details["preemptions"] == 3  # 2, then 1 after the restart


def test_usage_past_its_bound_fails_and_a_silent_replica_is_unknown_never_within():
    assert judge([steady(T0 + 5, ub=0.99)], T0, Bounds(20, max_usage=0.95)).details["outcome"] == "over_usage"
    silent = Sample(T0 + 10, {"a": 0}, {"a": 0.4}, ALL)  # b is Ready and says nothing: it may be the one
    v = judge([steady(T0 + 5), silent], T0, Bounds(20))
    assert not v.ok and v.details["outcome"] == "unknown", v.reason
    assert judge([Sample(T0 + 5, error="down")], T0, Bounds(20)).details["outcome"] == "unknown"


def test_a_load_that_never_reached_the_model_is_idle_not_within():
    v = judge([steady(T0 + 5, ua=0.0, ub=0.002)], T0, Bounds(20, min_usage=0.01))
    assert not v.ok and v.details["outcome"] == "idle", v.reason


def test_samples_after_the_interval_are_not_judged_and_none_in_it_is_unknown():
    late = steady(T0 + 30, a=9)  # after the interval: another fault's
    assert judge([steady(T0 + 5), late], T0, Bounds(20)).ok
    assert judge([steady(T0 - 5)], T0, Bounds(20)).details["outcome"] == "unknown"
