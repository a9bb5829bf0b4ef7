"""Stop conditions, pure: what fires, and that missing data fires too."""

import threading
import time

import pytest
from chaoslib.activity import execute_activity
from chaoslib.exit import exit_signals

from chaos import stop
from chaos.errors import SpecError
from probes.snapshot import ClusterSnapshot, NodeView, PodView

T_NOW = 1_700_000_000.0


def pod(name, ready=True, group=None, ready_since=None, **labels):
    return PodView("ns", name, f"uid-{name}", "a", "m", ready, False, 8, group or f"ns/{name}", 0,
                   {"kilocard.io/model": "m", **labels}, ready_since=ready_since)


NODES = (NodeView("a", {}, cards_capacity=8, cards_allocatable=8),)


def test_zero_ready_fires_when_no_replica_is_whole_and_ready():
    c = stop.Condition("zero-ready", "m", "ns")
    assert stop.breach(c, ClusterSnapshot((pod("a"), pod("b", ready=False)), NODES)) is None
    assert stop.breach(c, ClusterSnapshot((pod("b", ready=False),), NODES)) == "zero-ready m in ns: no Ready replica left"
    half = {"kilocard.io/group-size": "2"}
    assert stop.breach(c, ClusterSnapshot((pod("g-0", group="ns/g", **half),), NODES)) is not None  # a rank missing
    assert "could not be read" in stop.breach(c, None)  # missing data is a breach


def test_unhealthy_counts_pods_not_ready():
    c = stop.Condition("unhealthy", "m", max=1)
    assert stop.breach(c, ClusterSnapshot((pod("a", ready=False), pod("b")), NODES)) is None
    assert stop.breach(c, ClusterSnapshot((pod("a", ready=False), pod("b", ready=False)), NODES)) == (
        "unhealthy m > 1: 2 not Ready (a, b)")


def test_an_slo_past_its_hard_limit_or_without_data_fires():
    c = stop.Condition("slo", "m", limit=5.0)
    both = ClusterSnapshot((pod("pod-a", ready_since=0.0), pod("pod-b", ready_since=0.0)), NODES)
    assert stop.breach(c, both, {"pod-a": 0.3, "pod-b": 0.4}) is None
    assert stop.breach(c, both, {"pod-a": 7.5, "pod-b": 0.4}) == "slo ttft_p95 m > 5: pod-a at 7.500"
    assert stop.breach(c, None, {"pod-a": 7.5}) == "slo ttft_p95 m > 5: pod-a at 7.500"  # past the limit, known
    assert "no series" in stop.breach(c, both, {})
    assert "no data (connection refused)" in stop.breach(c, both, ConnectionError("connection refused"))
    # Under the limit, the silence of a replica is judged by the cluster; one that cannot be read fires.
    assert "could not be read" in stop.breach(c, None, {"pod-a": 0.3, "pod-b": 0.4})
    assert stop.breach(c, both, {"pod-a": 0.3}) == (
        f"slo ttft_p95 m > 5: pod-b Ready, exporting no series: {stop.BLIND}")
    fresh = ClusterSnapshot((pod("pod-a", ready_since=0.0), pod("pod-b", ready_since=T_NOW - 30)), NODES)
    assert stop.breach(c, fresh, {"pod-a": 0.3}, at=T_NOW) is None  # Ready for 30 s, under twice the 30 s window
    errors = stop.Condition("slo", "m", indicator="error_ratio", limit=0.05)  # the gateway's, per model
    assert stop.breach(errors, both, {"m": 0.01}) is None


def test_a_watcher_fires_once_with_the_first_breach():
    fired = []
    w = stop.Watcher({}, stop.Settings(0.2, (stop.Condition("slo", "m", limit=1.0),)), fire=lambda: fired.append(1))
    w._values = lambda c: {"pod-a": 2.0}
    w.start().thread.join(timeout=5)
    assert fired == [1] and w.fired == {"reason": "slo ttft_p95 m > 1: pod-a at 2.000", "blind": False}


def block(seconds: float) -> None:
    time.sleep(seconds)


def test_a_stop_that_lands_while_an_activity_runs_cuts_the_pause_after_it():
    """chaoslib takes an activity's pause after it in a `finally`: the interruption raised in the
    activity would wait the pause out, so the watcher interrupts it again there."""
    kill = {"type": "action", "name": "kill", "pauses": {"after": 30},
            "provider": {"type": "python", "module": __name__, "func": "block", "arguments": {"seconds": 1.0}}}
    w = stop.Watcher({}, stop.Settings(0.2, (stop.Condition("slo", "m", limit=1.0),)), method=[kill])
    w._values = lambda c: {"pod-a": 2.0}  # a breach at once: the signal lands inside the activity
    started = time.monotonic()
    with exit_signals(), pytest.raises(SystemExit):
        w.start()
        execute_activity({"method": [kill]}, kill, {}, {}, dry=None)
    w.stop()
    assert w.fired is not None and time.monotonic() - started < 5  # not the 30 s pause
    assert not stop.in_a_pause(threading.main_thread(), [kill])


@pytest.mark.parametrize(("arguments", "message"), [
    ({}, "conditions: required: expected a non-empty list, each a mapping"),
    ({"conditions": [{"kind": "slo", "model": "m"}]}, r"conditions\[0\].limit: required: expected a number above 0"),
    ({"conditions": [{"kind": "slo", "model": "m", "limit": -1}]}, r"conditions\[0\].limit: expected a number above 0"),
    ({"conditions": [{"kind": "zero-ready"}]}, r"conditions\[0\].model: required"),
    ({"conditions": [{"kind": "meteor", "model": "m"}]}, r"conditions\[0\].kind: expected one of zero-ready"),
    ({"conditions": [{"kind": "unhealthy", "model": "m", "max": 2, "min": 1}]}, r"unknown field 'min'"),
])
def test_bad_stop_conditions_name_the_field(arguments, message):
    control = {"name": "s", "provider": {"type": "python", "module": "chaos.stop", "arguments": arguments}}
    with pytest.raises(SpecError, match=r"e.yaml: controls\[0\].provider.arguments.*" + message):
        stop.declared({"controls": [control]}, "e.yaml")
