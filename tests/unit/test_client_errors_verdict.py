"""client_errors_within's classes of wrong verdicts, one each: a failure after the budget, a window
too long, a client that sent nothing, requests still in flight, and the streams cut short said."""

from probes.client_errors import Request, Rule, judge

T0 = 1_000.0


def answered(start: float, end: float, every: float = 1.0) -> list[Request]:
    return [Request(T0 + start + i * every) for i in range(int((end - start) / every) + 1)]


def test_no_failure_is_clean_and_a_short_window_then_a_clean_hold_is_recovered():
    assert judge(answered(0, 20), T0, Rule(5, 10)).details["outcome"] == "clean"
    cut = [Request(T0 + 0.5, "connection_reset", aborted=True), Request(T0 + 1.5, "http_503")]
    v = judge([*cut, *answered(2, 20)], T0, Rule(5, 10))
    assert v.ok and v.details["outcome"] == "recovered", v.reason
    assert (v.details["window_start_seconds"], v.details["window_end_seconds"]) == (0.5, 1.5)
    assert v.details["errors"] == {"connection_reset": 1, "http_503": 1} and v.details["aborted_streams"] == 1
    assert "1 streams cut short" in v.reason


def test_a_failure_sent_after_the_budget_fails_however_short_the_window():
    v = judge([*answered(0, 20), Request(T0 + 7, "timeout")], T0, Rule(5, 10))
    assert not v.ok and v.details["outcome"] == "not_recovered" and v.details["last_failure_seconds"] == 7


def test_a_window_longer_than_allowed_fails_and_a_budget_of_zero_allows_no_failure():
    spread = [Request(T0 + 0.5, "http_503"), Request(T0 + 4.5, "http_503"), *answered(5, 20)]
    assert judge(spread, T0, Rule(5, 10, max_window=3)).details["outcome"] == "window_too_long"
    assert judge([Request(T0 + 1, "http_503"), *answered(2, 20)], T0, Rule(0, 10)).details[
        "outcome"] == "not_recovered"


def test_a_client_that_sent_nothing_saw_nothing_and_requests_in_flight_are_not_known():
    assert judge([], T0, Rule(5, 10)).details["outcome"] == "unknown"
    few = [Request(T0 + 1, "http_503"), *answered(14, 15)]  # two answered after the window: too few
    assert judge(few, T0, Rule(5, 10)).details["outcome"] == "unknown"
    v = judge(answered(0, 20), T0, Rule(5, 10), in_flight=(T0 + 12,))
    assert not v.ok and v.details["outcome"] == "unknown" and v.details["in_flight"] == 1


def test_requests_before_time_zero_or_after_the_interval_are_not_judged():
    outside = [Request(T0 - 1, "http_503"), Request(T0 + 16, "http_503")]
    assert judge([*outside, *answered(0, 15)], T0, Rule(5, 10)).details["outcome"] == "clean"
