"""The hung-group probe on the testbed: a TP=16 group whose rank 1 is frozen keeps both pods Ready
while it serves nothing; the probe names it (rank 0 still exports, its gauges frozen as the engine
is: at the testbed's load the batch it held running, an empty queue; the counter is flat), judges
only once its window lies after the fault, and passes again once the rank is thawed."""

from __future__ import annotations

import time
import uuid

import pytest

from chaos import ledger, plan, revert
from chaos.agent.client import AgentClient
from chaos.faults import Context
from probes import chaostoolkit
from testbed import fleet, timing
from tests.testbed.helpers import eventually, wait_ready

pytestmark = pytest.mark.testbed
BIG = "llama-3-405b"
WINDOW = "15s"


def test_a_frozen_rank_1_turns_the_probe_red_with_both_pods_ready_and_green_once_thawed(kube, pool, testbed,
                                                                                        tmp_path):
    p = pool(4)
    fleet.deploy(kube, timing.stamp(p.fleet(BIG), "fast"), timeout=90, say=lambda _m: None)  # two groups
    wait_ready(kube, p.namespace, BIG, 4)
    run_id = f"t-{uuid.uuid4().hex[:8]}"
    cfg = {"kilocard_kubeconfig": str(testbed.paths.kubeconfig), "kilocard_prometheus_url": testbed.prometheus_url,
           "kilocard_run_id": run_id, "kilocard_ledger_dir": str(tmp_path / "ledger")}
    assert eventually(lambda: chaostoolkit.no_hung_groups(BIG, p.namespace, WINDOW, configuration=cfg)["verdict"] == "ok", 60)

    ctx = Context(kube, AgentClient(kube), run_id, say=lambda _m: None)
    book = ledger.Ledger(run_id, kube, tmp_path / "ledger")
    stalled = plan.inject(ctx, book, {"kind": "rank-stall", "namespace": p.namespace, "rank": 1, "count": 1,
                                      "label_selector": f"kilocard.io/model={BIG}", "ttl_seconds": 120})
    try:
        (record,) = stalled.records
        assert record.landed["status"] == "confirmed", record.landed
        started = time.time()
        red = chaostoolkit.no_hung_groups(BIG, p.namespace, WINDOW, configuration=cfg)
        # It waited for the window to lie after the fault: before that the stall could not show.
        assert time.time() - started >= 15 - 2
        assert red["verdict"] == "failed" and red["outcome"] == "hung", red["reason"]
        assert red["hung"] == [record.target["group"]] and "1 of 2 Ready replicas hung" in red["reason"], red
        assert "finished 0 over 15s, running " in red["reason"], red["reason"]
        # The queue froze empty: only the requests it held running tell the hang from an idle replica.
        (frozen,) = [r for r in red["replicas"] if r["group"] == record.target["group"]]
        assert frozen["running"] > 0 and frozen["waiting"] == 0 and frozen["waiting_change"] == 0, frozen
        assert chaostoolkit.tp_groups_whole(BIG, p.namespace, cfg)["verdict"] == "ok"  # every pod Ready
    finally:
        assert revert.revert(ctx, book, stalled.records) == []
    # Thawed: the group drains its queue and progresses again; the probe passes once it shows.
    assert eventually(lambda: chaostoolkit.no_hung_groups(BIG, p.namespace, WINDOW, configuration=cfg)["verdict"] == "ok", 60)
