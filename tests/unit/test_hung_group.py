"""The hung-group probe: a TP group all Ready that serves nothing is named, per replica, and no
data is never a pass; its fetcher's queries; the stop condition built on it."""

import dataclasses

import pytest
import requests

from chaos import stop
from chaos.errors import SpecError
from probes import chaostoolkit, hung
from probes.hung import Figures, Progress
from probes.snapshot import ClusterSnapshot, NodeView, PodView

NOW = 1_700_000_000.0
NODES = (NodeView("n0", {}), NodeView("n1", {}), NodeView("n2", {}))


def group(name, node, ready=True, ready_for=600.0, size=2):
    """A TP group of `size` pods on one node, Ready for `ready_for` seconds."""
    labels = {"kilocard.io/model": "m", "kilocard.io/tp-group": name, "kilocard.io/group-size": str(size)}
    return tuple(PodView("ns", f"{name}-{r}", f"uid-{name}-{r}", node, "m", ready, False, 4, f"ns/{name}", r, labels,
                         ready_since=NOW - ready_for if ready else None) for r in range(size))


def world(*groups):
    return ClusterSnapshot(tuple(p for g in groups for p in g), NODES)


def figures(demand=None, **by_lead):
    """Figures at NOW: each lead pod's (finished, waiting, waiting change[, running])."""
    return Figures(NOW, {("ns", lead.replace("_", "-")): Progress(*v) for lead, v in by_lead.items()}, demand)


def test_a_group_all_ready_with_a_flat_counter_is_named_hung():
    v = hung.judge(world(group("g0", "n0"), group("g1", "n1")),
                   figures(g0_0=(0, 100, 100), g1_0=(150, 2, 0)), "m")
    assert not v.ok and v.details["outcome"] == "hung" and v.details["hung"] == ["ns/g0"]
    assert v.reason == ("m: 1 of 2 Ready replicas hung: ns/m group g0 (pods g0-0, g0-1 on n0): finished 0 over 30s, "
                        "waiting 100 (+100) while 1 other(s) progressed")
    assert {"group": "ns/g0", "pods": ["g0-0", "g0-1"], "nodes": ["n0"], "series": True, "finished": 0,
            "running": None, "waiting": 100, "waiting_change": 100} in v.details["replicas"]


def test_one_hung_group_among_many_healthy_ones_is_named_not_averaged_away():
    healthy = {f"g{i}_0": (150, 1, 0) for i in range(1, 8)}
    v = hung.judge(world(*(group(f"g{i}", f"n{i % 3}") for i in range(8))), figures(g0_0=(0, 40, 40), **healthy), "m")
    assert not v.ok and v.details["hung"] == ["ns/g0"] and "1 of 8 Ready replicas hung" in v.reason


def test_a_frozen_lead_exporting_nothing_while_ready_is_hung():
    v = hung.judge(world(group("g0", "n0"), group("g1", "n1")), figures(g1_0=(150, 1, 0)), "m")
    assert v.details["hung"] == ["ns/g0"]
    assert "ns/m group g0 (pods g0-0, g0-1 on n0): no series over 30s while Ready (its lead's scrape fails)" in v.reason


def test_a_hung_group_with_waiting_requests_is_named_even_without_other_evidence_of_demand():
    v = hung.judge(world(group("g0", "n0")), figures(g0_0=(0, 5, 5)), "m")
    assert v.details["hung"] == ["ns/g0"]


def test_the_gateway_counter_is_demand_enough():
    v = hung.judge(world(group("g0", "n0")), figures(demand=50, g0_0=(0, None, None)), "m")
    assert v.details["hung"] == ["ns/g0"]
    assert v.reason.endswith("finished 0 over 30s, no running or waiting gauge: judged by the model's demand")


def test_a_replica_that_just_started_is_not_hung():
    v = hung.judge(world(group("g0", "n0", ready_for=10), group("g1", "n1")), figures(g1_0=(150, 1, 0)), "m")
    assert v.ok and v.details["settling"] == ["ns/g0"]
    assert v.reason == "m: every Ready replica progressed over 30s (1 judged, 1 settling; fewest finished: ns/g1, 150)"


def test_a_replica_not_wholly_ready_is_left_to_the_tp_group_probe():
    lead, rank1 = group("g0", "n0")
    half = (lead, dataclasses.replace(rank1, ready=False, ready_since=None))
    v = hung.judge(world(half, group("g1", "n1")), figures(g1_0=(150, 1, 0)), "m")
    assert v.ok and [r["group"] for r in v.details["replicas"]] == ["ns/g1"]


@pytest.mark.parametrize("snapshot, found, says", [
    (world(group("g0", "n0")), figures(), "no series for any replica's lead"),
    (world(group("g0", "n0")), figures(other_0=(150, 0, 0)), "no series for any replica's lead"),  # labels differ
    (world(group("g0", "n0", ready_for=5)), figures(g0_0=(0, 0, 0)), "no replica Ready for 30s to judge"),
    (world(), figures(), "no series for any replica's lead"),
    (world(group("g0", "n0")), figures(g0_0=(0, 0, 0)), "idle cannot be told from hung"),
    (world(group("g0", "n0")), figures(g0_0=(0, 0, 0, 0)), "idle cannot be told from hung"),
])
def test_no_data_is_never_a_pass(snapshot, found, says):
    v = hung.judge(snapshot, found, "m")
    assert not v.ok and v.details["outcome"] == "unknown" and says in v.reason
    assert v.reason.endswith("cannot judge, not healthy")


def test_every_replica_progressing_passes():
    v = hung.judge(world(group("g0", "n0"), group("g1", "n1")), figures(g0_0=(140, 1, 0), g1_0=(150, 2, -1)), "m")
    assert v.ok and v.details["outcome"] == "progressing"
    assert v.reason == "m: every Ready replica progressed over 30s (2 judged; fewest finished: ns/g0, 140)"


class FakeProm:
    """Answers the fetcher's queries from per-query rows; count() says which names exist."""

    def __init__(self, names, rows):
        self.names, self.rows, self.asked = names, rows, []

    def custom_query(self, query):
        self.asked.append(query)
        if query.startswith("count("):
            found = [{"metric": {"namespace": "ns", "pod": "g0-0"}, "value": [0, "1"]}]
            return found if any(f'"{n}"' in query for n in self.names) else []
        return [{"metric": m, "value": [0, str(v)]} for m, v in self.rows.get(query.split(" (")[0], [])]


def test_the_fetcher_asks_per_lead_pod_in_the_spelling_prometheus_stores():
    lead = {"namespace": "ns", "pod": "g0-0"}
    prom = FakeProm({"kilocard_sim_requests_total", "vllm_request_success_total", "vllm_num_requests_running", "vllm_num_requests_waiting"}, {
        "sum(increase(kilocard_sim_requests_total{model_name=\"m\",namespace=\"ns\"}[30s]))": [({}, 75)],
        "sum by": [(lead, 0)]})
    found = hung.fetch(prom, "m", "ns")
    assert found.demand == 75 and found.replicas == {("ns", "g0-0"): Progress(0, 0, 0, 0)}
    matchers = 'model_name="m",namespace="ns"'
    assert [q for q in prom.asked if not q.startswith("count(")] == [
        f"sum(increase(kilocard_sim_requests_total{{{matchers}}}[30s]))",
        f"sum by (namespace, pod) (increase(vllm_request_success_total{{{matchers}}}[30s]))",
        f"sum by (namespace, pod) (vllm_num_requests_running{{{matchers}}})",
        f"sum by (namespace, pod) (vllm_num_requests_waiting{{{matchers}}})",
        f"sum by (namespace, pod) (delta(vllm_num_requests_waiting{{{matchers}}}[30s]))",
    ]


def test_the_fetcher_asks_for_the_names_the_simulated_engines_export():
    from prometheus_client import CollectorRegistry, generate_latest

    from testbed.simulator.metrics import VllmCollector
    from tests.unit.sim_helpers import pod, world_with

    w = world_with(pod("v", "n0", "m", 1), pod("s", "n1", "m", 1, labels={"kilocard.io/engine": "sglang"}))
    w.last_tick -= 1.0
    w.tick()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(VllmCollector(w))
    text = generate_latest(registry).decode()
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    for name in (*hung.FINISHED_NAMES, *hung.RUNNING_NAMES, *hung.WAITING_NAMES):
        assert any(line.startswith(name + "{") and 'namespace="ns"' in line and 'pod="' in line for line in samples), name


def test_the_fetcher_of_an_engine_without_queue_gauges_leaves_them_unknown():
    prom = FakeProm({"sglang:num_requests_total"}, {"sum by": [({"namespace": "ns", "pod": "g0-0"}, 0)]})
    assert hung.fetch(prom, "m").replicas == {("ns", "g0-0"): Progress(0)}


def test_the_fetcher_without_a_finished_counter_finds_no_replica():
    found = hung.fetch(FakeProm(set(), {}), "m")
    assert found.replicas == {} and found.demand is None


class Down:
    def custom_query(self, query):
        raise requests.ConnectionError(f"{query}: connection refused")


def test_the_probe_with_prometheus_down_is_unknown_not_a_pass(monkeypatch):
    monkeypatch.setattr(chaostoolkit, "_prom", lambda _cfg: Down())
    monkeypatch.setattr(chaostoolkit, "_time_zero_if_any", lambda _cfg, _since: None)  # no fault yet: judged at once
    out = chaostoolkit.no_hung_groups("m")
    assert out["verdict"] == "failed" and out["outcome"] == "unknown"


# --- the stop condition -----------------------------------------------------------------------------
def test_a_hung_group_stop_condition_parses_and_describes_itself():
    found = stop.settings({"conditions": [{"kind": "hung-group", "model": "m", "namespace": "ns", "window": "1m"}]},
                          "e.yaml")
    assert found.conditions == (stop.Condition("hung-group", "m", "ns", window="1m"),)
    assert found.conditions[0].describe() == "hung-group m in ns over 1m"
    assert stop.Condition("hung-group", "m").describe() == "hung-group m over 30s"


@pytest.mark.parametrize(("condition", "message"), [
    ({"kind": "hung-group", "model": "m", "window": "soon"}, r".window: expected a Prometheus duration"),
    ({"kind": "hung-group", "model": "m", "limit": 1}, r": unknown field 'limit'; expected one of kind, model, namespace, window"),
    ({"kind": "hung-group"}, r".model: required"),
])
def test_bad_hung_group_conditions_name_the_field(condition, message):
    with pytest.raises(SpecError, match=r"e.yaml.conditions\[0\]" + message):
        stop.settings({"conditions": [condition]}, "e.yaml")


def test_the_hung_group_condition_fires_on_a_hung_group_and_when_it_cannot_look():
    c = stop.Condition("hung-group", "m")
    s = world(group("g0", "n0"), group("g1", "n1"))
    assert stop.breach(c, s, figures(g0_0=(140, 1, 0), g1_0=(150, 2, 0))) is None
    assert stop.breach(c, s, figures(g1_0=(150, 2, 0))).startswith(
        "hung-group m over 30s: m: 1 of 2 Ready replicas hung: ns/m group g0")
    assert stop.breach(c, s, figures()).endswith("a stop condition treats that as a breach")
    assert "could not be read" in stop.breach(c, None, figures(g1_0=(150, 2, 0)))
    assert "no data (connection refused)" in stop.breach(c, s, ConnectionError("connection refused"))


def test_a_watcher_looks_at_prometheus_for_a_hung_group_condition():
    w = stop.Watcher({}, stop.Settings(1, (stop.Condition("hung-group", "m"),)), fire=lambda: None)
    w._snapshot = lambda: world(group("g0", "n0"))
    w._figures = lambda c: figures(g0_0=(0, 3, 3))
    assert "1 of 1 Ready replicas hung" in w.check()


def test_a_replica_that_finished_none_with_nothing_waiting_is_idle_not_hung():
    # At a low rate a healthy replica may finish no request in a window: its empty queue says it is not hung.
    found = figures(g0_0=(0.0, 0.0, 0.0), g1_0=(3.0, 0.0, 0.0))
    v = hung.judge(world(group("g0", "n0"), group("g1", "n1")), found, "m")
    assert v.ok and "1 idle" in v.reason, v.reason


def test_a_frozen_engine_whose_waiting_gauge_froze_at_0_with_requests_running_is_hung():
    # A frozen engine stops updating its gauges: at a low load its queue freezes empty, its batch does not.
    found = figures(g0_0=(0.0, 0.0, 0.0, 3.0), g1_0=(150.0, 0.0, 0.0, 4.0))
    v = hung.judge(world(group("g0", "n0"), group("g1", "n1")), found, "m")
    assert not v.ok and v.details["hung"] == ["ns/g0"]
    assert v.reason.endswith("(pods g0-0, g0-1 on n0): finished 0 over 30s, running 3, waiting 0 (+0) while 1 "
                             "other(s) progressed"), v.reason


def test_a_replica_that_finished_none_with_nothing_running_or_waiting_is_idle_not_hung():
    found = figures(g0_0=(0.0, 0.0, 0.0, 0.0), g1_0=(3.0, 0.0, 0.0, 1.0))
    v = hung.judge(world(group("g0", "n0"), group("g1", "n1")), found, "m")
    assert v.ok and v.details["outcome"] == "progressing"
    assert v.reason == ("m: every Ready replica progressed over 30s or held no request (1 idle, 2 judged; fewest "
                        "finished: ns/g0, 0)"), v.reason


@pytest.mark.parametrize(("demand", "others", "hung_too"), [
    (50, {}, True),  # the gateway counted requests
    (None, {"g1_0": (150.0,)}, True),  # another replica progressed
    (0, {"g1_0": (0.0,)}, False),  # no demand at all: unknown, not hung
])
def test_an_engine_that_exports_no_queue_gauge_is_judged_by_the_model_s_demand(demand, others, hung_too):
    groups = [group("g0", "n0")] + ([group("g1", "n1")] if others else [])
    v = hung.judge(world(*groups), figures(demand=demand, g0_0=(0.0,), **others), "m")
    assert v.details["outcome"] == ("hung" if hung_too else "unknown") and not v.ok, v.reason
    assert ("ns/g0" in v.details.get("hung", [])) is hung_too
