"""`kilocard hunt` on the real control plane and the real Prometheus: the loads it reads are the
simulator's, and a fleet made fragile on purpose (every replica of a model on one machine) has
that machine ranked first among the nodes."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest

from chaos import cli
from testbed import fleet, timing
from tests.testbed.helpers import eventually, workload

pytestmark = pytest.mark.testbed


def hunt(testbed: Any, *args: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["hunt", "--kubeconfig", str(testbed.paths.kubeconfig), "--prometheus-url",
                         testbed.prometheus_url, "-o", "json", *args]) == 0
    found: dict[str, Any] = json.loads(out.getvalue())
    return found


def test_the_machine_a_fragile_model_shares_ranks_first(testbed, kube, pool, prom):
    p = pool(4)
    shared = p.node_names[3]
    objects = timing.stamp(p.fleet("llama-2-7b-fragile", "llama-3-70b",
                                   replicas={"llama-2-7b-fragile": 4, "llama-3-70b": 2}), "default")
    workload(objects, "llama-2-7b-fragile")["spec"]["template"]["spec"]["nodeSelector"][
        "kubernetes.io/hostname"] = shared
    for model in ("llama-2-7b-fragile", "llama-3-70b"):  # the fragile first: the 70B's replicas then avoid its node
        fleet.deploy(kube, [o for o in objects if o["kind"] == "Namespace"
                            or o["metadata"].get("labels", {}).get("kilocard.io/model") == model],
                     timeout=90, say=lambda _m: None, prometheus=p.prometheus)

    # The simulator's truth (testbed.simulator.model): each replica serves 20 (70B) or 200 (7B)
    # requests per second and gets a quarter of that. Until a rate window has passed since the
    # last replica was Ready, the first ones' queues (they carried the whole load) are in it.
    def calibrated() -> dict[str, Any] | None:
        found = hunt(testbed, "-n", p.namespace, "--window", "20s")
        loads = found["inputs"]["loads"]
        truth = {"llama-3-70b": (20, 10), "llama-2-7b-fragile": (200, 200)}
        return found if all(
            loads[f"{p.namespace}/{model}"]["service_rate"] == pytest.approx(mu, rel=0.15)
            and loads[f"{p.namespace}/{model}"]["qps"] == pytest.approx(qps, rel=0.15)
            for model, (mu, qps) in truth.items()) else None

    found = eventually(calibrated, 60, interval=5)
    assert found, hunt(testbed, "-n", p.namespace, "--window", "20s")["inputs"]
    assert found["inputs"]["no_load"] == {}

    nodes = [d for d in found["ranked"] if d["kind"] == "node"]
    assert nodes[0]["domain"] == f"node/{shared}" and nodes[0]["severity"] == "outage"
    (lost,) = nodes[0]["models"]
    # Pinned to that machine by its nodeSelector, no replica fits anywhere else: lost for good.
    assert (lost["model"], lost["lost"], lost["replicas"], lost["nowhere"], lost["slo"]) == (
        "llama-2-7b-fragile", 4, 4, 4, "lasting")
    # A 70B node: one of two replicas, the other carries 10 QPS at P95 0.3 s; a spare node takes it.
    others = {d["domain"]: d for d in nodes[1:]}
    seventy_nodes = [d for d in others.values() if any(m["model"] == "llama-3-70b" for m in d["models"])]
    assert len(seventy_nodes) == 2
    for d in seventy_nodes:
        (m,) = d["models"]
        assert (m["lost"], m["nowhere"], m["slo"], d["severity"]) == (1, 0, "kept", "degraded")
        assert d["moves"] and set(d["moves"].values()) <= set(p.node_names) - {shared}
    # The rack holding the pool takes both models whole: ranked above any one node.
    assert found["ranked"][0]["kind"] == "rack" and found["ranked"][0]["severity"] == "outage"
