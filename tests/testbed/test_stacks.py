"""The catalog against a fleet deployed as a serving stack deploys it, not as kilocard's testbed
labels it (testbed.stacks): no `kilocard.io/*` label on any pod, the model found from the
engine's arguments as on a production cluster. The experiment is the catalog's, unchanged but
for the namespace. Every stack and scenario: bench/stacks.py (docs/stacks.md's table)."""

from __future__ import annotations

import json
import subprocess

import pytest

from testbed import fleet, stacks, timing
from tests.testbed.helpers import serving
from tests.testbed.test_catalog import TP8, experiment, probe
from tests.testbed.test_runner import KILOCARD, kilocard_run

pytestmark = pytest.mark.testbed


def deploy_as(kube, p, stack: str, replicas: int) -> list[dict]:
    """The fleet's llama-3-70b, `replicas` of it, on the pool as `stack` deploys it."""
    objects = stacks.shaped(timing.stamp(p.fleet(TP8, replicas={TP8: replicas}), "default"), stack)
    fleet.deploy(kube, objects, timeout=90, say=lambda _m: None)
    return objects


@pytest.mark.long(120)
def test_s1_on_a_kserve_predictor_finds_the_model_by_its_arguments_and_judges_as_on_kilocards_fleet(
        kube, testbed, pool, prom, tmp_path):
    p = pool(3)
    objects = deploy_as(kube, p, "KServe", 2)
    pods = kube.list_pods_raw(p.namespace)
    assert len(pods) == 2 and not any(k.startswith("kilocard.io/model") for pod in pods
                                      for k in pod["metadata"]["labels"])
    serving(prom, p.namespace, {TP8: 2})
    done = subprocess.run([*KILOCARD, "discover", "-n", p.namespace, "-o", "json", "--kubeconfig",
                           str(testbed.paths.kubeconfig)], capture_output=True, text=True, timeout=60)
    (found,) = json.loads(done.stdout)
    assert (found["model"], found["stack"], found["workloads"], found["tp"]) == (
        TP8, "KServe", [f"InferenceService/{TP8}"], {"value": "8", "source": "argument --tensor-parallel-size"})
    assert found["sources"]["model"] == ["argument --model-name"]
    code, journal, _ = kilocard_run(testbed, tmp_path, experiment("s1-kill-one-replica.yaml"),
                                    "--var", f"namespace={p.namespace}")
    assert code == 0, journal["kilocard"]["reason"]
    (killed,) = journal["kilocard"]["faults"]
    deployment = next(o for o in objects if o["kind"] == "Deployment")["metadata"]["name"]
    assert killed["target"]["name"].startswith(f"{deployment}-")  # the predictor's pod, picked by `model:`
    (phases,) = journal["kilocard"]["recovery"]
    assert phases["pod"] == killed["target"]["name"] and phases["replacement"].startswith(f"{deployment}-")
    ready = probe(journal, "replacement-ready-within-budget")
    assert ready["recovered_after_seconds"] < 60, ready
    ttft = probe(journal, "ttft-holds-or-recovers")
    assert ttft["outcome"] in ("held", "recovered") and ttft["worst"].startswith(f"{deployment}-"), ttft["reason"]
    release = journal["kilocard"]["release"][f"{p.namespace}/{TP8}"]
    assert release["workloads"][0].startswith(f"ReplicaSet/{deployment}-")
    # Its negative twin, as on kilocard's fleet: a budget shorter than the start-up fails, naming
    # the replacement that is not Ready yet.
    code, journal, _ = kilocard_run(testbed, tmp_path / "twin", experiment("s1-kill-one-replica.yaml"),
                                    "--var", f"namespace={p.namespace}", "--var", "budget_seconds:int=10")
    (phases,) = journal["kilocard"]["recovery"]
    assert code == 1 and f"{p.namespace}/{phases['replacement']}: not Ready (0/1)" in journal["kilocard"]["reason"]
