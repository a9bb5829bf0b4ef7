import math

import pytest

from testbed.simulator import model as m


def test_half_speed_triples_p95_at_a_quarter_load():
    healthy = m.ttft_p95(service=20, arrival=5)
    slowed = m.ttft_p95(service=10, arrival=5)
    assert healthy == pytest.approx(math.log(20) / 15)
    assert slowed / healthy == pytest.approx(3.0)


def test_calibration_against_the_500ms_slo():
    for model, p in m.PROFILES.items():
        assert m.ttft_p95(p.service_rate, 0.25 * p.service_rate) < 0.5, model
    big = m.PROFILES["llama-3-70b"]
    assert m.ttft_p95(big.service_rate / 2, 0.25 * big.service_rate) > 0.5


def test_saturation_builds_a_backlog_without_dividing_by_zero():
    backlog, done = m.step_backlog(0.0, service=10, arrival=10, seconds=1)
    assert (backlog, done) == (0.0, 10)
    backlog, done = m.step_backlog(0.0, service=0.5 * 10, arrival=10, seconds=2)
    assert backlog == pytest.approx(10) and done == pytest.approx(10)
    assert math.isfinite(m.ttft_p95(service=5, arrival=10, backlog=backlog))
    assert m.ttft_p95(service=5, arrival=10, backlog=backlog) > 2  # waits behind 10 queued requests
    # Load falls back: the backlog drains with the spare capacity.
    left, done = m.step_backlog(backlog, service=10, arrival=5, seconds=1)
    assert left == pytest.approx(5) and done == pytest.approx(10)
    assert m.ttft_p95(service=0.0, arrival=1.0) > 1e6  # a stalled replica: huge, finite


def test_cdfs_are_distributions():
    values = [m.ttft_cdf(x, 20, 5) for x in m.TTFT_BUCKETS]
    assert values == sorted(values) and values[0] >= 0 and values[-1] == pytest.approx(1)
    assert m.ttft_cdf(m.ttft_p95(20, 5), 20, 5) == pytest.approx(0.95)
    assert m.itl_cdf(0.0, 0.03) == 0 and m.itl_cdf(1.0, 0.03) == pytest.approx(1)
    assert m.bucket_fractions([0.2, 0.1, 1.3]) == [0.2, 0.2, 1.0]
