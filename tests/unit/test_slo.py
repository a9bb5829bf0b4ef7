"""The SLO judge, pure: it cannot pass before the fault could show, needs a breach when one is
expected, names the worst replica, and carries the series it judged."""

import pytest

from probes import slo
from probes.slo import Recovery, Sample, judge

T0 = 1_000_000.0  # the fault's apply time
ECC = Recovery(threshold=0.5, budget=60, hold=10, blind=6, expect_impact=True)


def series(points, start=0.0, step=1.0):
    """Samples every `step` s from T0 + start: each point a {replica: value} dict (or None: no data)."""
    return [Sample(T0 + start + i * step, p or {}) for i, p in enumerate(points)]


def healthy(n):
    return [{"a": 0.23, "b": 0.24}] * n


def test_healthy_right_after_the_fault_is_not_a_pass_when_impact_is_expected():
    samples = series(healthy(20))
    assert judge(samples, T0, ECC, final=False) is None  # undecided: the fault may still show
    v = judge(series(healthy(61)), T0, ECC, final=True)
    assert not v.ok and v.details["outcome"] == "no_impact" and v.reason.startswith("no impact observed")


def test_a_hold_is_judged_to_the_deadline_never_passed_early():
    steady = Recovery(threshold=0.5, budget=60, hold=10, blind=6, expect_impact=False)
    assert judge(series(healthy(40)), T0, steady, final=False) is None  # healthy so far, not yet to the deadline
    v = judge(series(healthy(61)), T0, steady, final=True)
    assert v.ok and v.details["outcome"] == "held" and v.details["recovered_after_seconds"] == 6.0
    assert v.reason == "held under 0.5 from 6 s after the fault to the deadline (60 s)"


def test_breach_then_recovery_names_the_worst_replica_and_keeps_the_series():
    sick = [{"a": 0.23, "b": 0.24}] * 8 + [{"a": 0.23, "b": 0.74}] * 30 + healthy(23)
    v = judge(series(sick), T0, ECC, final=True)
    assert v.ok and v.details["outcome"] == "recovered"
    assert (v.details["breach_after"], v.details["recovered_after_seconds"]) == (8.0, 38.0)
    assert v.details["worst"] == "b" and v.details["peak"] == 0.74 and "worst b, peak 0.740" in v.reason
    assert v.details["series"][8] == {"at": T0 + 8, "values": {"a": 0.23, "b": 0.74}, "state": "breach",
                                      "why": "b at 0.740"}


def test_a_relapse_before_the_deadline_moves_the_recovery_or_fails_it():
    points = [{"a": 0.9}] * 8 + healthy(5) + [{"a": 0.9}] + healthy(47)
    v = judge(series(points), T0, ECC, final=True)
    assert v.ok and v.details["recovered_after_seconds"] == 14.0  # the healthy run that reaches the deadline
    late = [{"a": 0.9}] * 8 + healthy(45) + [{"a": 0.9}] + healthy(7)  # relapse at 53 s: 7 s left, hold 10
    v = judge(series(late), T0, ECC, final=True)
    assert not v.ok and v.details["outcome"] == "not_recovered"
    assert v.reason == ("not recovered within 60 s (under 0.5 since 54.0 s, not held 10 s by the deadline); "
                        "last: a at 0.900 at 53.0 s; worst a, peak 0.900")


def test_a_budget_shorter_than_the_recovery_fails_naming_the_replica():
    sick = [{"a": 0.23, "b": 0.74}] * 40 + healthy(30)
    short = Recovery(threshold=0.5, budget=45, hold=10, blind=6)
    v = judge(series(sick[:46]), T0, short, final=True)
    assert not v.ok and v.details["outcome"] == "not_recovered"
    assert v.reason == ("not recovered within 45 s (under 0.5 since 40.0 s, not held 10 s by the deadline); "
                        "last: b at 0.740 at 39.0 s; worst b, peak 0.740")
    # The same series with a budget the recovery fits in passes: the failure is the budget's.
    assert judge(series(sick[:61] + healthy(0)), T0, ECC, final=True).ok


def test_hopeless_is_decided_before_the_deadline():
    v = judge(series([{"b": 0.9}] * 55), T0, ECC, final=False)  # 54 s + 10 s hold > 60 s
    assert v is not None and not v.ok and "never back under" in v.reason and "b at 0.900" in v.reason
    assert judge(series([{"b": 0.9}] * 50), T0, ECC, final=False) is None  # 49 s + 10 s: still possible


def test_absence_is_impact_only_when_the_cluster_corroborates_it():
    gone = [None] * 10 + healthy(51)  # no series for 10 s, then back: nothing says why
    v = judge(series(gone), T0, ECC, final=True)
    assert not v.ok and v.details["outcome"] == "unknown" and "no series, and nothing says why" in v.reason
    dead = [Sample(T0 + i, {}, pods={"a": False}) for i in range(10)] + series(healthy(51), start=10)
    v = judge(dead, T0, ECC, final=True)  # every replica NotReady: the absence is the fault's
    assert v.ok and v.details["breach_after"] == 0.0 and "no series: no Ready replica" in v.reason
    failing = [Sample(T0 + i, {}, impact="the gateway failed 3.00 requests/s") for i in range(10)]
    v = judge(failing + series(healthy(51), start=10), T0, ECC, final=True)
    assert v.ok and v.details["outcome"] == "recovered"
    blip = healthy(20) + [None] + healthy(40)  # one scrape missing: not the fault's impact, and not seen either
    v = judge(series(blip), T0, ECC, final=True)
    assert not v.ok and v.details["outcome"] == "unknown"


def test_a_breach_already_there_when_the_fault_came_is_not_its_impact():
    late = Recovery(threshold=0.5, budget=60, hold=10, blind=6, scrape=1)
    v = judge(series([{"a": 0.9}] * 4 + healthy(40), start=-1), T0, late, final=False)  # over in the scrape before
    assert not v.ok and v.details["outcome"] == "unknown" and v.reason.startswith("already over 0.5 when the fault")


def test_a_breach_before_the_fault_that_cleared_before_its_impact_does_not_hide_the_impact():
    """S10 in CI: start-up failures 10 s before the resets put 0.111 in the scrape before the
    fault, 0.0 in the two after it, then the resets' own breach: the rate windows that read 0.0
    hold none of the old failures, so the breach after them is the fault's."""
    s10 = Recovery(threshold=0.05, budget=45, hold=10, blind=11, scrape=1)
    points = [{"m": 0.111}, {"m": 0.0}, {"m": 0.0}] + [{"m": 0.055 * i} for i in range(1, 10)] + \
        [{"m": 0.5}] * 15 + [{"m": 0.0}] * 20
    v = judge(series(points, start=-1), T0, s10, final=False)
    assert v is None  # not decided early: nothing a later sample cannot change
    v = judge(series(points, start=-1), T0, s10, final=True)
    assert v.ok and v.details["outcome"] == "recovered" and v.details["breach_after"] == 2.0, v.reason
    lasted = [{"m": 0.111}] * 3 + points[3:]  # still over when the resets' breach is counted
    v = judge(series(lasted, start=-1), T0, s10, final=False)
    assert v is not None and v.details["outcome"] == "unknown" and v.reason.startswith("already over"), v


def test_only_samples_up_to_the_deadline_count():
    recovered_then_blip = [{"a": 0.9}] * 40 + healthy(40) + [{"a": 0.9}] * 5 + healthy(60)
    budget = Recovery(threshold=0.5, budget=120, hold=10, blind=6)
    v = judge(series(recovered_then_blip), T0, budget, final=True)  # a probe started long after the deadline
    assert v.ok and v.details["recovered_after_seconds"] == 85.0 and v.details["series"][-1]["at"] == T0 + 120
    breach_too_late = judge(series(healthy(121) + [{"a": 0.9}] * 5), T0, budget, final=True)
    assert breach_too_late.details["outcome"] == "no_impact"


def test_settings_no_verdict_could_pass_are_refused():
    with pytest.raises(slo.SloError, match="shorter than the blind window"):
        Recovery(threshold=0.5, budget=30, hold=10, blind=31)


def test_one_series_expected_means_one():
    class Two(Prom):
        def custom_query(self, query):
            return [{"metric": {"pod": "a"}, "value": [0, "0.9"]}, {"metric": {"pod": "b"}, "value": [0, "0.1"]}]

    with pytest.raises(slo.SloError, match="returned 2 series where one was expected"):
        slo.under(Two(set()), slo.Indicator("m", "q", "1m", by=None), 0.5)
    assert slo.under(Two(set()), slo.Indicator("m", "q", "1m", by="pod"), 0.5).details["worst"] == "a"


def test_history_asks_whole_steps_within_the_point_limit():
    asked = {}

    class Ranged(Prom):
        def custom_query_range(self, query, start_time, end_time, step):
            asked.update(start=start_time.timestamp(), end=end_time.timestamp(), step=step)
            return []

    samples = slo.history(Ranged(set()), slo.Indicator("m", "q", "1m"), T0 + 0.4, T0 + 30_000.2, 2.5)
    assert asked == {"start": T0, "end": T0 + 30_000, "step": "3"}  # 30000 s / 10000 points
    assert len(samples) == 10_001 and samples[0] == Sample(T0, {})


def test_failed_queries_are_unknown():
    down = [Sample(T0 + i, {}, "connection refused") for i in range(61)]
    v = judge(down, T0, ECC, final=True)
    assert not v.ok and v.details["outcome"] == "unknown"
    # Prometheus down during the "recovery" proves nothing: a pass needs real healthy samples.
    blind_spot = series([{"a": 0.9}] * 10) + [Sample(T0 + 10 + i, {}, "down") for i in range(51)]
    assert not judge(blind_spot, T0, ECC, final=True).ok


def test_samples_before_the_fault_only_say_which_series_existed():
    samples = series(healthy(10), start=-10) + series([{"a": 0.9, "b": 0.2}] * 3 + healthy(58))
    v = judge(samples, T0, ECC, final=True)
    assert v.ok and v.details["breach_after"] == 0.0 and len(v.details["series"]) == 61
    vanished = series(healthy(10), start=-10) + series([{"a": 0.9}] * 3 + [{"a": 0.2}] * 58)
    v = judge(vanished, T0, ECC, final=True)  # b existed at the fault, then never again, its pod not known
    assert not v.ok and v.details["outcome"] == "not_recovered" and "b of unknown readiness" in v.reason


class Prom:
    """Stores series by name: {metric name: {labels tuple: value}}; answers the probe's queries."""

    def __init__(self, names, now=None, history=()):
        self.names, self.now, self.past = names, now, history
        self.asked = []

    def custom_query(self, query):
        self.asked.append(query)
        if query.startswith("count("):
            found = [{"metric": {"namespace": "ns", "pod": "p"}, "value": [0, "1"]}]
            return found if any(f'"{n}"' in query for n in self.names) else []
        return [{"metric": {"pod": k}, "value": [0, str(v)]} for k, v in self.now().items()]

    def custom_query_range(self, query, start_time, end_time, step):
        return [{"metric": {"pod": pod}, "values": [[at, str(v)] for at, v in points]} for pod, points in self.past]


@pytest.mark.parametrize("stored, expected", [
    ({"vllm:time_to_first_token_seconds_bucket"}, "vllm:time_to_first_token_seconds_bucket"),
    ({"sglang:time_to_first_token_seconds_bucket"}, "sglang:time_to_first_token_seconds_bucket"),
    ({"vllm_time_to_first_token_seconds_bucket"}, "vllm_time_to_first_token_seconds_bucket"),
])
def test_indicator_finds_the_engine_and_judges_per_replica_or_per_model(stored, expected):
    per_replica = slo.indicator(Prom(stored), "ttft_p95", "llama", "ns", window="30s")
    assert per_replica.query == (f'histogram_quantile(0.95, sum by (le, pod) (rate({expected}'
                                 f'{{model_name="llama",namespace="ns"}}[30s])))')
    assert per_replica.by == "pod" and per_replica.window_seconds == 30
    per_model = slo.indicator(Prom(stored), "ttft_p95", "llama", by=None, window="1m")
    assert "sum by (le) (" in per_model.query and per_model.by is None


def test_itl_prefers_the_current_name_and_falls_back_to_the_deprecated_one():
    old = slo.indicator(Prom({"vllm:time_per_output_token_seconds_bucket"}), "itl_p95", "m")
    assert "vllm:time_per_output_token_seconds_bucket" in old.query
    new = slo.indicator(Prom({"vllm:time_per_output_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket"}),
                        "itl_p95", "m")
    assert "vllm:inter_token_latency_seconds_bucket" in new.query


def test_bad_indicator_inputs_are_errors():
    with pytest.raises(slo.SloError, match="not a Prometheus duration"):
        slo.indicator(Prom(set()), "ttft_p95", "m", window="30 seconds")
    with pytest.raises(slo.SloError, match="unknown indicator"):
        slo.indicator(Prom(set()), "latency", "m")
    with pytest.raises(slo.metric_names.MetricNotFound):
        slo.indicator(Prom(set()), "ttft_p95", "m")
    assert slo.seconds("1m30s") == 90 and slo.seconds("500ms") == 0.5


def test_a_probe_started_late_still_sees_the_breach_from_history():
    clock = [T0 + 20.0]
    history = [("b", [(T0 + i, 0.9 if 5 <= i < 15 else 0.2) for i in range(61)])]  # as Prometheus has it
    prom = Prom({"x"}, now=lambda: {"b": 0.2}, history=history)

    def sleep(s):
        clock[0] += s

    ind = slo.Indicator("m", "q", "5s", "pod")
    v = slo.recovered_within(prom, ind, T0, ECC, interval=1.0, clock=lambda: clock[0], sleep=sleep)
    assert v.ok and v.details["breach_after"] == 5.0 and v.details["recovered_after_seconds"] == 15.0
    assert clock[0] == T0 + 60.0  # judged to the deadline: a pass is never decided early


def test_error_ratio_and_a_query_of_ones_own():
    stored = {"kilocard_sim_requests_total", "kilocard_sim_requests_failed_total"}
    ratio = slo.indicator(Prom(stored), "error_ratio", "m", "ns", window="1m")
    assert ratio.query == ('(sum(rate(kilocard_sim_requests_failed_total{model_name="m",namespace="ns"}[1m])) '
                           'or vector(0)) / sum(rate(kilocard_sim_requests_total{model_name="m",namespace="ns"}[1m]))')
    assert ratio.by is None  # the gateway counts per model
    own = slo.indicator(Prom(set()), "promql", "m", query="max(my_queue_depth)", by=None)
    assert own.query == "max(my_queue_depth)"
    with pytest.raises(slo.SloError, match="needs a query"):
        slo.indicator(Prom(set()), "promql", "m")


def test_a_per_replica_indicator_groups_by_the_pod_label_prometheus_stores():
    from tests.unit.test_metric_names import Series

    prom = Series({"__name__": "vllm:time_to_first_token_seconds_bucket", "model_name": "m", "namespace": "mon",
                   "pod": "exporter", "exported_namespace": "ns", "exported_pod": "m-0"})
    ind = slo.indicator(prom, "ttft_p95", "m", "ns", window="30s")
    assert ind.by == "exported_pod"
    assert ind.query == ('histogram_quantile(0.95, sum by (le, exported_pod) (rate(vllm:time_to_first_token_seconds_'
                         'bucket{model_name="m",exported_namespace="ns"}[30s])))')
