"""The scenario catalog (experiments/) through `kilocard run` on the testbed, each with its
negative twin: the same experiment without the step that makes it pass must fail, for the
reason the scenario is about. Fleets start on the `default` timing, as the catalog assumes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from chaos.kube import node_ready
from testbed import fleet, timing
from tests.testbed.helpers import wait_ready
from tests.testbed.test_runner import kilocard_run

pytestmark = pytest.mark.testbed
CATALOG = Path(__file__).parents[2] / "experiments"
BIG = "llama-3-405b"


def experiment(name: str) -> dict:
    return yaml.safe_load((CATALOG / name).read_text())


@pytest.fixture
def tp16(kube, pool):
    """Both TP=16 groups of llama-3-405b on four nodes of a five-node pool (one spare)."""
    p = pool(5)
    fleet.deploy(kube, timing.stamp(p.fleet(BIG), "default"), timeout=90, say=lambda _m: None)
    wait_ready(kube, p.namespace, BIG, 4)
    return p


def test_s5_a_tp16_group_comes_back_after_a_machine_loss_with_the_out_of_service_step(kube, testbed, tmp_path,
                                                                                   tp16):
    code, journal, seconds = kilocard_run(testbed, tmp_path, experiment("s5-tp16-node-loss.yaml"),
                                          "--var", f"namespace={tp16.namespace}")
    assert code == 0, journal["kilocard"]["reason"]
    probe = next(r for r in journal["run"] if r["activity"]["name"] == "group-back-within-budget")
    # Back after the confirmation, PodGC and the new rank's whole start-up: not at once.
    group = next(o for o in tp16.fleet(BIG) if o["kind"] == "StatefulSet")
    start_up = timing.ready_after(group["spec"]["template"]["metadata"]["labels"], "default")
    assert 25 + start_up < probe["output"]["recovered_after"] < 120
    assert sorted(f["kind"] for f in journal["kilocard"]["faults"]) == ["node-kubelet-stop", "node-out-of-service"]
    assert {f["state"] for f in journal["kilocard"]["faults"]} == {"reverted"}
    lost = next(f["target"]["node"] for f in journal["kilocard"]["faults"] if f["kind"] == "node-kubelet-stop")
    kube.wait_until("nodes", lambda items: all(node_ready(n) for n in items if n.metadata.name == lost), timeout=60)
    assert seconds < 180


def test_s5_without_the_out_of_service_step_fails_with_the_group_incomplete(kube, testbed, tmp_path, tp16):
    twin = experiment("s5-tp16-node-loss.yaml")
    twin["method"] = [a for a in twin["method"] if a["name"] != "non-graceful-node-shutdown"]
    code, journal, _ = kilocard_run(testbed, tmp_path, twin, "--var", f"namespace={tp16.namespace}")
    assert code == 1
    reason = journal["kilocard"]["reason"]
    assert reason.startswith("probe 'group-back-within-budget' failed: 120 s after the fault:"), reason
    assert "1 of 2 ranks present" in reason, reason
    assert [f["kind"] for f in journal["kilocard"]["faults"]] == ["node-kubelet-stop"]
    assert journal["kilocard"]["faults"][0]["state"] == "reverted"


def test_s7_killing_every_replica_is_stopped_by_its_stop_condition(kube, pool, testbed, tmp_path):
    p = pool(2)
    fleet.deploy(kube, timing.stamp(p.fleet("llama-3-70b", replicas={"llama-3-70b": 2}), "default"), timeout=90,
                 say=lambda _m: None)
    code, journal, seconds = kilocard_run(testbed, tmp_path, experiment("s7-kill-every-replica.yaml"),
                                          "--var", f"namespace={p.namespace}")
    assert code == 3, journal["kilocard"]["reason"]
    assert journal["kilocard"]["reason"] == (
        f"stop condition fired: zero-ready llama-3-70b in {p.namespace}: no Ready replica left")
    assert seconds < 60  # aborted at once, not after the 120 s pause
    # Without the stop condition the same run is not stopped: the outage runs its course.
    twin = experiment("s7-kill-every-replica.yaml")
    twin["controls"] = [c for c in twin["controls"] if c["name"] != "stop-conditions"]
    twin["method"][0]["pauses"] = {"after": 5}
    wait_ready(kube, p.namespace, "llama-3-70b", 2, timeout=90)
    code, journal, _ = kilocard_run(testbed, tmp_path, twin, "--var", f"namespace={p.namespace}")
    assert code == 0 and journal["status"] == "completed", journal["kilocard"]["reason"]
