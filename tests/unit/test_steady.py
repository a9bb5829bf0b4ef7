"""What `testbed up --fleet` waits for before it calls a fleet Ready (testbed.steady): the catalog's
steady states, read from the catalog (the looks themselves are the testbed's: tests/testbed)."""

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
