"""A run's steady state looked at again while the fleet starts (chaos.settle.before): a fleet still
starting is waited for, a settled one that breaches fails at the first look, and a probe that raised
is never waited for."""

from __future__ import annotations

import time

from chaos import settle
from probes.snapshot import ClusterSnapshot, PodView


def fleet(*ages: float | None, ready: bool = True) -> ClusterSnapshot:
    now = time.time()
    return ClusterSnapshot(tuple(
        PodView("ns", f"m-{i}", f"u{i}", "n0", "m", ready, False, 8, f"ns/m-{i}", 0, {},
                ready_since=None if age is None else now - age) for i, age in enumerate(ages)), ())


def looks(*found: settle.Look):
    seen = list(found)
    return lambda: seen.pop(0) if len(seen) > 1 else seen[0]


BREACH = settle.Look(False, (("ns", "m"),), False, "ttft-under-threshold: m-0: 1.532 above 0.5")


def test_a_fleet_whose_newest_replica_just_started_is_looked_at_again_until_it_serves():
    found = settle.before(looks(BREACH, BREACH, settle.Look(True)), lambda: fleet(600, 5), 10, interval=0.01)
    assert found.met and found.looks == 3
    assert found.starting == ("m: m-1 Ready 5 s ago",)
    assert found.said().startswith("waited 0 s for the fleet to settle (m: m-1 Ready 5 s ago)")


def test_a_settled_fleet_that_breaches_fails_at_the_first_look():
    found = settle.before(looks(BREACH, settle.Look(True)), lambda: fleet(600, 300), 120, interval=0.01)
    assert not found.met and found.looks == 1 and found.starting == () and found.said() == ""
    assert found.reason == BREACH.reason


def test_a_fleet_that_never_settles_fails_at_the_timeout_saying_what_was_starting():
    found = settle.before(looks(BREACH), lambda: fleet(5, ready=False), 0.05, interval=0.01)
    assert not found.met and found.looks >= 2 and found.starting == ("m: m-0 not Ready",)
    assert found.reason == BREACH.reason and found.waited_seconds <= 1


def test_a_probe_that_raised_or_names_no_model_is_not_waited_for():
    for look in (settle.Look(False, (("ns", "m"),), True, "p: boom"), settle.Look(False, (), False, "p: no")):
        found = settle.before(looks(look, settle.Look(True)), lambda: fleet(1), 10, interval=0.01)
        assert not found.met and found.looks == 1


def test_a_cluster_that_cannot_be_read_is_not_waited_for():
    from chaos.errors import KilocardError

    def unreadable() -> ClusterSnapshot:
        raise KilocardError("apiserver not answering")

    found = settle.before(looks(BREACH, settle.Look(True)), unreadable, 10, interval=0.01)
    assert not found.met and found.looks == 1


def test_a_pod_whose_ready_time_is_unknown_is_not_starting():
    assert settle.starting(fleet(None), [("ns", "m")], time.time(), 120) == []
    assert settle.starting(fleet(1), [("other", "m")], time.time(), 120) == []  # another namespace's model
    assert settle.starting(fleet(1, 2), [(None, "m")], time.time(), 120) == ["m: m-0 Ready 1 s ago"]
