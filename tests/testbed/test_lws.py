"""LeaderWorkerSet's real controller manager (sigs.k8s.io/lws, built from its Go module, with its
CRD and webhooks: testbed.lws) runs vLLM the way LWS's own example deploys it
(docs/examples/vllm/GPU/lws.yaml of the release: a leader starting Ray and the OpenAI server with
TP 8 x PP 2, a worker joining it), and kilocard finds the model, its groups and ranks from what the
controller and its pod webhook wrote, then judges the catalog's S1 against it with only the
namespace and the model's name given: the controller recreates the killed pod's whole group, and
the verdict says what that costs a TP=16 replica. S5 loses the machine under rank 1 of the first
replica, found by the model's name alone, and LWS brings the group back on a spare machine."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from probes import tp_groups
from testbed import lws, steady
from tests.testbed.conftest import PORT_BASE
from tests.testbed.helpers import controller_running
from tests.testbed.test_catalog import CATALOG, experiment, probe
from tests.testbed.test_runner import KILOCARD, kilocard_run

pytestmark = [pytest.mark.testbed, pytest.mark.long(240)]
MODEL = "llama-3-405b"  # the testbed's TP=16 profile; served under this name, from Meta's weights
GROUP = "leaderworkerset.sigs.k8s.io/group-index"
WORKER = "leaderworkerset.sigs.k8s.io/worker-index"


@pytest.fixture(scope="module")
def controller(testbed, kube) -> Iterator[lws.Controller]:
    yield from controller_running(lws.Controller, testbed, kube)


def vllm_on_lws(pool: str, namespace: str) -> dict:
    """The release's vLLM example as its users apply it (testbed.lws.example): TP 8 x PP 2, the
    model served under the testbed's name for it, from Meta's weights."""
    return lws.example("vllm", namespace, pool, MODEL, "meta-llama/Llama-3.1-405B-Instruct", cards=8, pods=2,
                       replicas=2, card_resource="nvidia.com/gpu")


def test_s1_on_vllm_as_the_real_lws_controller_runs_it_fails_on_single_pod_budgets_and_its_twin_passes(controller, testbed, kube, pool, prom, tmp_path):
    p = pool(4)
    kube.apply({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": p.namespace, "labels": {"kilocard.io/chaos": "enabled"}}})  # the guard's opt-in
    kube.apply(vllm_on_lws(p.name, p.namespace))
    kube.wait_ready("pods", 4, timeout=120, namespace=p.namespace)
    pods = kube.list_pods_raw(p.namespace)
    # The controller made them: a leader StatefulSet, one worker StatefulSet per group, and its
    # webhook's labels on every pod.
    owners = {pod["metadata"]["name"]: pod["metadata"]["ownerReferences"][0]["name"] for pod in pods}
    assert owners == {"vllm-0": "vllm", "vllm-1": "vllm", "vllm-0-1": "vllm-0", "vllm-1-1": "vllm-1"}, owners
    assert {(pod["metadata"]["labels"][GROUP], pod["metadata"]["labels"][WORKER]) for pod in pods} == {
        ("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")}
    done = subprocess.run([*KILOCARD, "discover", "-n", p.namespace, "-o", "json", "--kubeconfig",
                           str(testbed.paths.kubeconfig)], capture_output=True, text=True, timeout=60)
    (found,) = json.loads(done.stdout)
    assert (found["model"], found["stack"], found["workloads"]) == (MODEL, "LeaderWorkerSet",
                                                                    ["LeaderWorkerSet/vllm"]), found
    assert (found["tp"]["value"], found["pp"]["value"]) == ("8", "2"), found
    assert tp_groups.desired(kube, MODEL, p.namespace) == 4  # the worker StatefulSets count, naming no model
    steady.wait(kube, p.prometheus, [p.namespace], steady.TIMEOUT, say=lambda _m: None)  # as fleet.deploy waits
    # First the rehearsal, and the verdict's twin: plan --twin copies the LeaderWorkerSet (not the
    # StatefulSets its controller made) into a fresh testbed and runs LWS's controller there; with
    # a TTFT budget that holds a TP=16 replica's restart, S1 passes there, the killed pod's whole
    # group (two pods) made anew.
    rehearsal = subprocess.run([*KILOCARD, "plan", "-e", str(CATALOG / "s1-kill-one-replica.yaml"), "--var",
                                f"namespace={p.namespace}", "--var", f"model={MODEL}", "--var",
                                "ttft_budget_seconds:int=90", "--kubeconfig", str(testbed.paths.kubeconfig), "--twin",
                                "--twin-port-base", str(PORT_BASE + 100), "--journal", str(tmp_path / "twin.json")],
                               capture_output=True, text=True, timeout=400)
    assert "Traceback" not in rehearsal.stderr and (tmp_path / "twin.json").is_file(), rehearsal.stdout + rehearsal.stderr
    twin = json.loads((tmp_path / "twin.json").read_text())["kilocard"]
    assert rehearsal.returncode == 0 and twin["verdict"] == "passed", twin["reason"]
    assert twin["release"][f"{p.namespace}/{MODEL}"]["workloads"] == ["LeaderWorkerSet/vllm"], twin["release"]
    assert len({phases["pod"] for phases in twin["recovery"]}) == 2, twin["recovery"]  # a group of two, made anew
    # The catalog's S1 as written (for llama-3-70b's single-pod replicas): LWS's
    # RecreateGroupOnPodRestart deletes the killed pod's whole group and makes it anew, so the
    # replica is down for its drain and a TP=16 start-up (about 42 s here), past S1's 40 s TTFT
    # budget: failed, naming the replica, while the group itself is back within its 60 s.
    code, journal, _ = kilocard_run(testbed, tmp_path / "as-written", experiment("s1-kill-one-replica.yaml"),
                                    "--var", f"namespace={p.namespace}", "--var", f"model={MODEL}")
    (killed,) = journal["kilocard"]["faults"]
    release = journal["kilocard"]["release"][f"{p.namespace}/{MODEL}"]
    assert release["workloads"] == ["LeaderWorkerSet/vllm"], release  # as discover names it
    index = {pod["metadata"]["name"]: pod["metadata"]["labels"][GROUP] for pod in pods}
    group = {name for name, i in index.items() if i == index[killed["target"]["name"]]}
    recreated = {phases["pod"] for phases in journal["kilocard"]["recovery"]}
    assert recreated == group, (group, journal["kilocard"]["recovery"])  # the controller took the group down
    back = probe(journal, "replacement-ready-within-budget")
    assert back["verdict"] == "ok" and back["recovered_after_seconds"] > 30, back  # never the survivors alone
    ttft = probe(journal, "ttft-holds-or-recovers")
    assert code == 1 and ttft["outcome"] == "not_recovered" and "not Ready" in ttft["reason"], ttft
    assert controller.proc is not None and controller.proc.alive(), controller.log_tail()


def test_s5_loses_the_machine_under_rank_1_and_lws_brings_the_group_back_on_the_spare(controller, testbed, kube,
                                                                                      pool, tmp_path):
    p = pool(5)  # two groups of two machines, one spare
    kube.apply({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": p.namespace, "labels": {"kilocard.io/chaos": "enabled"}}})
    kube.apply(vllm_on_lws(p.name, p.namespace))
    kube.wait_ready("pods", 4, timeout=120, namespace=p.namespace)
    rank1 = next(pod for pod in kube.list_pods_raw(p.namespace) if pod["metadata"]["name"] == "vllm-0-1")
    # The catalog's S5 unchanged but for the namespace and the model: rank 1 of the first replica
    # is vllm-0-1, the worker LWS made for group 0.
    code, journal, _ = kilocard_run(testbed, tmp_path, experiment("s5-tp16-node-loss.yaml"),
                                    "--var", f"namespace={p.namespace}", "--var", f"model={MODEL}")
    lost = {f["target"]["node"] for f in journal["kilocard"]["faults"]}
    assert lost == {rank1["spec"]["nodeName"]}, journal["kilocard"]["faults"]
    assert code == 0, journal["kilocard"]["reason"]
    back = probe(journal, "group-back-within-budget")
    assert 25 < back["recovered_after_seconds"] < 120, back  # after the confirmation and a TP=16 start-up
    now = {pod["metadata"]["name"]: pod["spec"].get("nodeName") for pod in kube.list_pods_raw(p.namespace)}
    assert len(now) == 4 and rank1["spec"]["nodeName"] not in now.values(), now
