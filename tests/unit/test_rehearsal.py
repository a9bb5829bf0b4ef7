"""The month of failures against cases with a closed-form answer, and its seeds.

One model of N replicas, one per node, each node failing at rate lambda and repaired at rate mu:
- with no room elsewhere, a replica is down exactly while its node is: the number down is the
  machine-repairman's (M/M/c//N: c repair crews for N machines; c = N is the binomial);
- with room, a fixed detection time and start-up (restarted when the new node fails during it),
  each replica alternates up (exponential, 1/lambda) and down (the mean by renewal-reward): down
  with probability E[down] / (1/lambda + E[down]), independently (binomial).
The SLO breaks when fewer than 3 of 5 serve. The simulation's fraction of time broken, over
independent months, must hold the exact figure within four standard errors, and those errors must
be small enough for the check to fail on a wrong model (under 10 % of the figure).
"""

from __future__ import annotations

import math
import statistics

import pytest

from chaos.errors import SpecError
from chaos.rehearsal import month as rehearsal
from chaos.rehearsal import outcome
from chaos.rehearsal.rates import DEFAULTS, FailureClass, adjusted
from chaos.rehearsal.recoveries import Recoveries
from chaos.rehearsal.simulation import DAY, simulate, spares
from probes.impact import Load
from probes.snapshot import ClusterSnapshot, NodeView, PodView

N, LAMBDA, MU = 5, 1.0, 4.0  # per day
LOAD = Load(qps=21, service_rate=10, slo_seconds=1.0)  # P95 ln20 / (10 - 21/r): kept from 3 replicas
KEY = ("ns", "m")


def fleet(replicas: int, spare_nodes: int = 0) -> ClusterSnapshot:
    nodes = tuple(NodeView(f"n{i}", {"kubernetes.io/hostname": f"n{i}"}, cards_allocatable=8, cards_capacity=8,
                           cards_in_use=8 if i < replicas else 0) for i in range(replicas + spare_nodes))
    pods = tuple(PodView("ns", f"m{i}", f"u{i}", f"n{i}", "m", True, False, 8, f"g{i}", 0, {})
                 for i in range(replicas))
    return ClusterSnapshot(pods, nodes)


def host(repair_hours: float) -> tuple[FailureClass, ...]:
    return (FailureClass("host", "node", LAMBDA, "node", repair_hours, "test"),)


def broken_fraction(snapshot: ClusterSnapshot, classes: tuple[FailureClass, ...], recoveries: Recoveries,
                    crews: int | None, days: float = 400, seeds: int = 8) -> tuple[float, float]:
    """Mean fraction of time the SLO is broken over independent months, and its standard error."""
    fractions = [outcome.of_month(m, KEY, LOAD).slo_minutes / (days * DAY / 60)
                 for m in (simulate(snapshot, classes, recoveries, days, seed, crews) for seed in range(seeds))]
    return statistics.fmean(fractions), statistics.stdev(fractions) / math.sqrt(seeds)


def repairman(n: int, rho: float, crews: int) -> list[float]:
    """P(k machines down) of the machine-repairman model M/M/c//N (rho = lambda / mu)."""
    weights = [math.comb(n, k) * math.factorial(k) * rho ** k / (
        math.factorial(k) if k <= crews else math.factorial(crews) * crews ** (k - crews)) for k in range(n + 1)]
    return [w / sum(weights) for w in weights]


INSTANT = Recoveries({"host": (0.0,)}, {"m": (0.0,)})


@pytest.mark.parametrize("crews", [None, 1, 2])
def test_no_room_matches_the_machine_repairman(crews):
    exact = sum(repairman(N, LAMBDA / MU, crews or N)[3:])  # 3 or more of 5 down: 2 or fewer serve
    found, error = broken_fraction(fleet(N), host(24 / MU), INSTANT, crews)
    assert error < 0.1 * exact
    assert abs(found - exact) < 4 * error, (found, exact, error)


def test_one_crew_is_worse_than_one_each():
    """The closed forms differ by more than the check's resolution: it tells the models apart."""
    one, each = sum(repairman(N, LAMBDA / MU, 1)[3:]), sum(repairman(N, LAMBDA / MU, N)[3:])
    assert one > 3 * each
    found, error = broken_fraction(fleet(N), host(24 / MU), INSTANT, 1)
    assert abs(found - each) > 8 * error


def test_with_room_a_fixed_recovery_gives_the_binomial():
    """Detection d, then start-up s on a new node, which may fail during it (rate lambda): the
    recovery starts again. The down time's mean is d + (e^(lambda s) - 1) (1 / lambda + d) (a
    task of length s restarted at each failure, each restart costing d more); a replica is down
    that share of its up-and-down cycle, independently of the others (renewal-reward)."""
    d, s = 2 / 24, 4 / 24  # days
    recoveries = Recoveries({"host": (d * DAY,)}, {"m": (s * DAY,)})
    down = d + (math.exp(LAMBDA * s) - 1) * (1 / LAMBDA + d)
    p = down / (1 / LAMBDA + down)
    exact = sum(math.comb(N, k) * p ** k * (1 - p) ** (N - k) for k in range(3, N + 1))
    # Spare nodes, repaired in an hour: room is never short (free nodes fail too, at the same rate).
    found, error = broken_fraction(fleet(N, spare_nodes=N), host(1.0), recoveries, None)
    assert error < 0.1 * exact
    assert abs(found - exact) < 4 * error, (found, exact, error)


def test_a_seed_is_one_month_and_another_is_another():
    classes = adjusted(DEFAULTS, ["gpu.per_day=0.01", "host.per_day=0.02"])
    recoveries = Recoveries({"gpu": (60.0,), "host": (60.0,), "network": (60.0,), "engine": (30.0,)},
                            {"m": (300.0,)})
    a, b = (simulate(fleet(N, 2), classes, recoveries, 30, seed) for seed in (7, 7))
    assert a.serving == b.serving and a.events == b.events and sum(a.failures.values()) > 0
    assert simulate(fleet(N, 2), classes, recoveries, 30, 8).events != a.events


def test_a_spare_is_placed_where_the_scheduler_would_and_lowers_the_cost():
    grown, unplaced = spares(fleet(N, spare_nodes=1), {KEY: 2})
    assert unplaced == {KEY: 1}  # one free node: the second spare fits nowhere
    placed = [p for p in grown.pods if "~spare" in p.name]
    assert [p.node for p in placed] == ["n5"] and grown.node("n5").cards_free == 0
    plan = rehearsal.Plan(horizon_days=200, seeds=6, max_spares=3, target_availability=0.9999)
    snapshot = fleet(N, spare_nodes=3)
    recoveries = Recoveries({"host": (6 * 3600.0,)}, {"m": (0.0,)})
    found = rehearsal.rehearse(snapshot, {KEY: LOAD}, host(24 / MU), recoveries, plan)
    curve = found["spares"]["ns/m"]["curve"]
    means = [c["slo_minutes"]["mean"] for c in curve if "slo_minutes" in c]
    assert len(means) >= 2 and means == sorted(means, reverse=True) and means[1] < means[0]


def test_recoveries_and_rates_refuse_bad_input(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text('{"detection": {"host": []}, "startup": {"m": [-1]}}')
    with pytest.raises(SpecError, match=r"detection.host: expected a non-empty list.*\n.*startup.m"):
        Recoveries.read(bad)
    with pytest.raises(SpecError, match="no start-up samples for model 'x'"):
        INSTANT.check({"host"}, {"m", "x"})
    with pytest.raises(SpecError, match="NAME one of gpu, host, network, engine"):
        adjusted(DEFAULTS, ["disk.per_day=1"])
    with pytest.raises(SpecError, match="a number from 0"):
        adjusted(DEFAULTS, ["gpu.per_day=-1"])


def test_the_field_defaults_are_the_counts_not_the_percentages():
    by_name = {c.name: c for c in DEFAULTS}
    # 268 GPU-attributable of 419 in 54 days on 16,384 cards: about 9.3 a month on 1,024 cards.
    assert by_name["gpu"].per_month(1024) == pytest.approx(268 / (16_384 * 54) * 1024 * 30)
    assert round(by_name["gpu"].per_month(1024), 1) == 9.3
    total = 268 + 53 + 35 + 63
    assert total == 419


def test_a_months_figures_from_its_timeline():
    """5 replicas, kept from 3: 2 serve for 90 minutes across midnight of day 0, 3 for an hour on day 2."""
    from chaos.rehearsal.simulation import Event, Month

    t0 = DAY - 30 * 60
    timeline = [(0.0, 5), (t0, 2), (t0 + 90 * 60, 5), (2 * DAY, 3), (2 * DAY + 3600, 5)]
    m = Month(3 * DAY, {KEY: timeline}, [Event(t0, "failure", "host", "node", "n1", 0, ("ns/m1",)),
                                         Event(t0 + 7200, "repaired", "host", node="n1")])
    found = outcome.of_month(m, KEY, LOAD)
    assert found.slo_minutes == pytest.approx(90)
    assert found.days == pytest.approx((30, 60, 0))
    assert (found.worst_day, found.worst_day_minutes) == (1, pytest.approx(60))
    assert found.no_spare_minutes == pytest.approx(90 + 60)  # at 3 (the fewest) or under
    assert found.replica_hours_down == pytest.approx(3 * 1.5 + 2 * 1)
    hour = outcome.worst_hour([m], {KEY: LOAD})
    assert hour is not None and hour["slo_minutes"] == pytest.approx(60) and hour["start_seconds"] == DAY
    assert [e["what"] for e in hour["events"]] == ["host"]  # the repair comes after the hour
    assert hour["breaches"] == {"ns/m": [[0.0, 3600.0]]}
    assert hour["faults"] == [{"class": "host", "node": "n1", "card": 0, "pods": ["ns/m1"], "from": 0.0, "to": 3600.0,
                               "at": -1800.0}]
    assert outcome.fewest(LOAD, 5) == 3 and outcome.fewest(Load(100, 10, 0.5), 5) is None


def test_the_worst_hour_becomes_a_timeline_replay_accepts():
    from pathlib import Path

    from chaos import replay as replays
    from chaos.rehearsal import replay

    hour = {"month": 3, "start_seconds": 7200.0, "slo_minutes": 12.0, "models": {"ns/m": 12.0},
            "breaches": {"ns/m": [[600.0, 1320.0]]},
            "faults": [{"class": "gpu", "node": "n1", "card": 2, "pods": ["ns/m1"], "from": 0.0, "to": 3600.0,
                        "at": -900.0},
                       {"class": "host", "node": "n2", "card": 0, "pods": ["ns/m2"], "from": 590.0, "to": 1400.0,
                        "at": 590.0},
                       {"class": "engine", "node": "n3", "card": 5, "pods": ["ns/m3"], "from": 1000.0, "to": 1000.0,
                        "at": 1000.0}]}
    effects = {"gpu": "node", "host": "node", "network": "node", "engine": "replica"}
    data = replay.incident(hour, effects, {"ns/m": 0.5}, compress=10)
    # The GPU failed 15 minutes before the hour: not replayed (the month had moved its replicas away).
    assert [(e["at"], e["fault"]["kind"], e.get("for")) for e in data["faults"]] == [
        (0.0, "node-kubelet-stop", 81.0), (41.0, "pod-kill", None)]
    assert "still under repair: gpu on n1" in data["description"]
    assert data["symptoms"]["slo"] == [{"model": "m", "namespace": "ns", "indicator": "ttft_p95", "threshold": 0.5,
                                        "window": "10s", "breached_at": 1.0, "recovered_at": 73.0}]
    timeline = replays.parse(data, Path("worst-hour.yaml"))  # as `kilocard replay` reads the file
    assert len(timeline.entries) == 2
