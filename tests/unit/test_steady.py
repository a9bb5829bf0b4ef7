"""What `testbed up --fleet` waits for before it calls a fleet Ready (testbed.steady): the catalog's
steady states, read from the catalog, and each held for its window without a break."""

from __future__ import annotations

import yaml

from testbed import steady
from testbed.steady import Criterion

TTFT = Criterion("ttft_p95", "replica", 0.5, "10s")


def test_the_criteria_are_the_strictest_the_catalogs_steady_states_ask():
    found = steady.criteria()
    assert found == (Criterion("error_ratio", "model", 0.05, "10s"), TTFT), found


def test_a_stricter_threshold_or_a_longer_window_anywhere_in_the_catalog_wins(tmp_path):
    def experiment(name: str, configuration: dict, arguments: dict) -> None:
        probe = {"type": "probe", "name": "p", "tolerance": True,
                 "provider": {"type": "python", "module": "probes.chaostoolkit", "func": "slo_under",
                              "arguments": {"model": "m", **arguments}}}
        (tmp_path / name).write_text(yaml.safe_dump({"title": name, "configuration": configuration,
                                                     "steady-state-hypothesis": {"title": "t", "probes": [probe]}}))

    experiment("a.yaml", {"t": 0.5, "w": "10s"}, {"threshold": "${t}", "window": "${w}"})
    experiment("b.yaml", {}, {"threshold": 0.3})  # the probe's own default window: 1m
    experiment("c.yaml", {}, {"indicator": "promql", "query": "up", "threshold": 0.01})  # names no indicator
    experiment("d.yaml", {}, {"indicator": "itl_p95", "per": "model", "threshold": 0.1, "window": "30s"})
    assert steady.criteria(tmp_path) == (Criterion("itl_p95", "model", 0.1, "30s"),
                                         Criterion("ttft_p95", "replica", 0.3, "1m"))


def test_each_criterion_must_hold_for_its_whole_window_without_a_break():
    watch = steady.Watch((TTFT,))
    key = ("ns", "m", TTFT)
    assert not watch.see(0.0, {key: None})
    assert not watch.see(9.0, {key: None})
    assert not watch.see(10.0, {key: "m-0: 1.532 above 0.5"})  # a breach starts the count again
    assert watch.unsettled(10.0) == ["ns/m: ttft_p95: m-0: 1.532 above 0.5"]
    assert not watch.see(11.0, {key: None})
    assert watch.unsettled(15.0) == ["ns/m: ttft_p95 met for 4 s of its 10s window"]
    assert watch.see(21.0, {key: None})


def test_every_model_must_hold_and_no_model_is_not_serving():
    watch = steady.Watch((TTFT,))
    assert not watch.see(0.0, {})
    a, b = ("ns", "a", TTFT), ("ns", "b", TTFT)
    watch.see(0.0, {a: None, b: "no series yet (no samples)"})
    assert not watch.see(30.0, {a: None, b: "no series yet (no samples)"})
    assert watch.unsettled(30.0) == ["ns/b: ttft_p95: no series yet (no samples)"]
