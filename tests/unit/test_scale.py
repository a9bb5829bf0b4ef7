"""What a testbed's size changes (testbed.config.Tuning), the large fleet, the DCGM renderer's
kept labels, and the incremental Ready count, as pure logic."""

from pathlib import Path

import yaml

from chaos.kube import Kube
from chaos.vocabulary import MODEL_LABEL
from testbed import fleet, prometheus
from testbed.config import LARGE, LARGE_FROM_NODES, SMALL, TestbedConfig
from testbed.simulator.dcgm import HEALTH_FIELDS, DcgmRenderer
from tests.unit.sim_helpers import pod, world_with


def config(**kw):
    return TestbedConfig(state_dir=Path("/nonexistent"), advertise_address="10.255.255.1", **kw).validate()


def test_the_profile_follows_the_size_unless_named():
    assert config().tuning is SMALL
    assert config(nodes=LARGE_FROM_NODES - 1).tuning is SMALL
    assert config(nodes=LARGE_FROM_NODES).tuning is LARGE
    assert config(nodes=1250, profile="small").tuning is SMALL
    assert config(nodes=4, profile="large").tuning is LARGE
    # An explicit engine scrape interval wins over the profile's; nothing else changes.
    tuned = config(nodes=1250, scrape_seconds=1.0).tuning
    assert tuned.engine_scrape_seconds == 1.0 and tuned.dcgm_scrape_seconds == LARGE.dcgm_scrape_seconds


def test_every_profile_detects_a_lost_node_after_a_missed_renewal_only():
    for tuning in (SMALL, LARGE):
        renewal = tuning.node_lease_seconds / 4  # kwok renews a quarter into the lease
        assert renewal < tuning.node_monitor_grace_seconds <= 4 * renewal


def test_prometheus_scrapes_cards_and_engines_at_the_profiles_intervals(tmp_path):
    target = prometheus.write_config(tmp_path / "prometheus.yml", 1, 2, LARGE, tmp_path / "ca", tmp_path / "c",
                                     tmp_path / "k")
    jobs = {j["job_name"]: j for j in yaml.safe_load(target.read_text())["scrape_configs"]}
    written = yaml.safe_load(target.read_text())["global"]["scrape_interval"]
    assert written == f"{int(LARGE.engine_scrape_seconds * 1000)}ms"
    assert jobs["dcgm-exporter"]["scrape_interval"] == f"{int(LARGE.dcgm_scrape_seconds * 1000)}ms"
    assert "scrape_interval" not in jobs["vllm"]  # the global one


def test_the_large_fleet_is_the_default_resized():
    objects = fleet.load("large", "huawei.com/Ascend910")
    workloads = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet")]
    per_model = {}
    for o in workloads:
        if MODEL_LABEL in o["metadata"]["labels"]:  # not the endpoint picker
            per_model.setdefault(o["metadata"]["labels"][MODEL_LABEL], []).append(o)
    assert per_model["llama-3-70b"][0]["spec"]["replicas"] >= 80
    assert per_model["llama-2-7b"][0]["spec"]["replicas"] >= 600
    groups = per_model["llama-3-405b"]
    names = [g["metadata"]["name"] for g in groups]
    assert names == [f"llama-3-405b-g{i}" for i in range(8)]
    for g in groups:  # each copy names only itself: its selector, service and anti-affinity
        text = yaml.safe_dump(g)
        assert g["metadata"]["name"] in text and all(n not in text for n in names if n != g["metadata"]["name"])
        assert g["spec"]["selector"]["matchLabels"]["kilocard.io/tp-group"] == g["metadata"]["name"]
    assert "huawei.com/Ascend910" in yaml.safe_dump(objects) and "nvidia.com/gpu" not in yaml.safe_dump(objects)


def test_the_health_set_keeps_what_faults_move_and_labels_follow_pods():
    w = world_with(pod("a", "n0", "llama-2-7b", 1))
    renderer = DcgmRenderer(w, fields="health")
    text = renderer.render()
    names = {line.split("{")[0] for line in text.splitlines() if not line.startswith("#")}
    assert names == set(HEALTH_FIELDS)
    assert 'gpu="0"' in text and 'pod="a"' in text
    # The pod leaves its card: the kept label text must not outlive it.
    w.remove_pod("uid-a")
    assert 'pod="a"' not in renderer.render()
    w.upsert_pod(pod("b", "n0", "llama-2-7b", 1))
    assert 'pod="b"' in renderer.render()
    # Every card of the node, every field, one line each.
    assert len(DcgmRenderer(w).render().splitlines()) == 16 * (2 + len(w.cards))


class _Events(Kube):
    """A Kube whose events() replays a script (the counting is what is under test)."""

    def __init__(self, script):  # no API client: nothing is called
        self.script = script

    def events(self, *args, **kwargs):
        yield from self.script


def _node(uid, ready, deleting=False):
    meta = {"uid": uid, **({"deletionTimestamp": "x"} if deleting else {})}
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_ready_is_counted_per_event_and_never_twice():
    script = [("SYNC", [_node("a", True), _node("b", False)]),
              ("MODIFIED", _node("a", True)),  # a again: still one
              ("MODIFIED", _node("b", True)),  # two
              ("MODIFIED", _node("a", True, deleting=True)),  # terminating is not Ready: one
              ("ADDED", _node("c", True)),  # two
              ("DELETED", _node("b", True)),  # one
              ("ADDED", _node("d", True)),  # two
              ("ADDED", _node("e", True))]  # three
    assert _Events(script).wait_ready("nodes", 3, timeout=5) == 3
    try:
        _Events(script[:4]).wait_ready("nodes", 3, timeout=5)
    except TimeoutError as exc:
        assert "1/3 nodes Ready" in str(exc)
    else:
        raise AssertionError("three were never Ready at once")
