"""KServe's real controller manager (github.com/kserve/kserve, built from its Go module with its
CRDs, ConfigMap, webhooks and Hugging Face runtime: testbed.kserve) serves the fleet's llama-3-70b
from an InferenceService as KServe's LLM page writes one, in RawDeployment mode: the controller
makes the predictor Deployment, its webhook the pods. No `kilocard.io/*` label is on any pod;
kilocard finds the model from the runtime's arguments as on a production cluster, and judges the
catalog's S1, unchanged but for the namespace, as on kilocard's own fleet. Every stack and
scenario: bench/stacks.py (docs/stacks.md's table)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from testbed import kserve, steady
from tests.testbed.helpers import controller_running
from tests.testbed.test_catalog import TP8, experiment, probe
from tests.testbed.test_runner import KILOCARD, kilocard_run

pytestmark = [pytest.mark.testbed, pytest.mark.long(150)]
WEIGHTS = "meta-llama/Llama-3.1-70B-Instruct"


@pytest.fixture(scope="module")
def controller(testbed, kube) -> Iterator[kserve.Controller]:
    yield from controller_running(kserve.Controller, testbed, kube)


def test_s1_on_an_inference_service_made_by_kserves_controller_judges_as_on_kilocards_fleet(
        controller, kube, testbed, pool, prom, tmp_path):
    p = pool(3)
    kube.apply({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": p.namespace, "labels": {"kilocard.io/chaos": "enabled"}}})  # the guard's opt-in
    kube.apply(kserve.inference_service(p.namespace, p.name, TP8, WEIGHTS, cards=8, replicas=2,
                                        card_resource="nvidia.com/gpu"))
    kube.wait_ready("pods", 2, timeout=120, namespace=p.namespace)
    # The controller made the predictor Deployment, owned by the InferenceService; its webhook
    # admitted the pods, and none carries a label of kilocard's.
    (deployment,) = kube.list_objects("apps/v1", "Deployment", p.namespace)
    assert deployment["metadata"]["name"] == f"{TP8}-predictor", deployment["metadata"]
    assert [o["kind"] for o in deployment["metadata"]["ownerReferences"]] == ["InferenceService"]
    pods = kube.list_pods_raw(p.namespace)
    assert len(pods) == 2 and not any(k.startswith("kilocard.io/") for pod in pods for k in pod["metadata"]["labels"])
    steady.wait(kube, p.prometheus, [p.namespace], steady.TIMEOUT, say=lambda _m: None)  # as fleet.deploy waits
    done = subprocess.run([*KILOCARD, "discover", "-n", p.namespace, "-o", "json", "--kubeconfig",
                           str(testbed.paths.kubeconfig)], capture_output=True, text=True, timeout=60)
    (found,) = json.loads(done.stdout)
    assert (found["model"], found["stack"], found["workloads"], found["tp"]) == (
        TP8, "KServe", [f"InferenceService/{TP8}"], {"value": "8", "source": "argument --tensor-parallel-size"})
    assert found["sources"]["model"] == ["argument --model-name"] and found["engine"]["value"] == "vllm", found
    code, journal, _ = kilocard_run(testbed, tmp_path, experiment("s1-kill-one-replica.yaml"),
                                    "--var", f"namespace={p.namespace}")
    assert code == 0, journal["kilocard"]["reason"]
    (killed,) = journal["kilocard"]["faults"]
    predictor = f"{TP8}-predictor"
    assert killed["target"]["name"].startswith(f"{predictor}-")  # the predictor's pod, picked by `model:`
    (phases,) = journal["kilocard"]["recovery"]
    assert phases["pod"] == killed["target"]["name"] and phases["replacement"].startswith(f"{predictor}-")
    ready = probe(journal, "replacement-ready-within-budget")
    assert ready["recovered_after_seconds"] < 60, ready
    ttft = probe(journal, "ttft-holds-or-recovers")
    assert ttft["outcome"] in ("held", "recovered") and ttft["worst"].startswith(f"{predictor}-"), ttft["reason"]
    release = journal["kilocard"]["release"][f"{p.namespace}/{TP8}"]
    assert release["workloads"] == [f"InferenceService/{TP8}"], release  # as `kilocard discover` names it
    assert release["owners"][0].startswith(f"ReplicaSet/{predictor}-"), release  # the rollout
    # The controller gives a predictor that asks for a GPU the runtime image's -gpu tag.
    assert release["images"] == [{"image": f"{kserve.RUNTIME_IMAGE}-gpu", "digest": None}], release
    # Its negative twin, as on kilocard's fleet: a budget shorter than the start-up fails, naming
    # the replacement that is not Ready yet.
    code, journal, _ = kilocard_run(testbed, tmp_path / "twin", experiment("s1-kill-one-replica.yaml"),
                                    "--var", f"namespace={p.namespace}", "--var", "budget_seconds:int=10")
    (phases,) = journal["kilocard"]["recovery"]
    assert code == 1 and f"{p.namespace}/{phases['replacement']}: not Ready (0/1)" in journal["kilocard"]["reason"]
    assert controller.proc is not None and controller.proc.alive(), controller.log_tail()
