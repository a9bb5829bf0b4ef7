"""`kilocard discover` on the testbed's real apiserver and scheduler: pods shaped as the serving
stacks shape them (tests/unit/stacks/: vLLM and SGLang on LeaderWorkerSet, KServe's single- and
multi-node predictors, vLLM production-stack, llm-d, AIBrix, NVIDIA Dynamo, a plain vLLM
Deployment), created in a pool and scheduled there, are found
as their models with replicas, ranks, TP and PP sizes and engine, and where each was read; the
testbed's own fleet, by its kilocard.io labels. LeaderWorkerSet's controller cannot be built
here (its Go module is refused by the module proxy), so its pods are made as it and its webhook
label them."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from chaos.vocabulary import ready
from testbed import fleet
from tests.testbed.helpers import deploy
from tests.testbed.test_runner import KILOCARD

pytestmark = pytest.mark.testbed
STACKS = Path(__file__).parents[1] / "unit" / "stacks"


def placed(pod: dict, p) -> dict:
    """The stack's pod in the pool's namespace, on its nodes (no owner: a made-up owner's uid would
    have the garbage collector delete it)."""
    pod = copy.deepcopy(pod)
    meta = pod["metadata"]
    meta["namespace"] = p.namespace
    meta.pop("ownerReferences", None)
    spec = pod["spec"]
    spec["nodeSelector"] = {fleet.POOL_LABEL: p.name}
    spec["tolerations"] = [{"key": fleet.POOL_LABEL, "operator": "Equal", "value": p.name, "effect": "NoSchedule"}]
    for c in spec["containers"]:
        c["resources"] = {"limits": {p.config.card_resource: (c.get("resources") or {}).get("limits", {}).get(
            "nvidia.com/gpu", "1")}}
    return {"apiVersion": "v1", "kind": "Pod", **pod}


@pytest.mark.long(30)
def test_discover_finds_each_stacks_models_replicas_and_ranks_and_says_where_it_read_them(kube, testbed, pool):
    p = pool(8)  # five TP=8 pods take a node each; the small ones (15 cards) share the rest
    deploy(kube, p, {"llama-3-70b": 1})  # the testbed's own fleet: kilocard.io labels
    pods = [placed(pod, p) for path in sorted(STACKS.glob("*.yaml")) for pod in yaml.safe_load(path.read_text())
            if pod["metadata"]["namespace"] == "serving"]
    for pod in pods:
        kube.apply(pod)
    kube.wait_until("pods", lambda items: sum(ready(i) for i in items) >= len(pods) + 1, timeout=180, raw=True,
                    namespace=p.namespace)
    done = subprocess.run([*KILOCARD, "discover", "-n", p.namespace, "-o", "json", "--kubeconfig",
                           str(testbed.paths.kubeconfig)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    found = {m["model"]: m for m in json.loads(done.stdout)}
    assert set(found) == {"meta-llama/Meta-Llama-3.1-405B-Instruct", "meta-llama/Meta-Llama-3.1-8B-Instruct", "llama3",
                          "big", "qwen", "llama-3-70b", "mistralai/Mistral-7B-Instruct-v0.2", "facebook/opt-125m",
                          "deepseek-ai/DeepSeek-R1-0528", "qwen3-8B", "deepseek-r1", "Qwen/Qwen3-0.6B"}  # redis: none
    assert {m["model"]: m["stack"] for m in found.values() if m["stack"] not in ("LeaderWorkerSet", "KServe", "plain",
                                                                                 "kilocard")} == {
        "mistralai/Mistral-7B-Instruct-v0.2": "vLLM production-stack", "facebook/opt-125m": "llm-d",
        "deepseek-ai/DeepSeek-R1-0528": "llm-d", "qwen3-8B": "AIBrix", "deepseek-r1": "AIBrix",
        "Qwen/Qwen3-0.6B": "NVIDIA Dynamo"}
    lws = found["meta-llama/Meta-Llama-3.1-405B-Instruct"]
    assert (lws["stack"], lws["workloads"], lws["engine"]["value"], lws["tp"], lws["pp"]["value"]) == (
        "LeaderWorkerSet", ["LeaderWorkerSet/vllm"], "vllm",
        {"value": "8", "source": "argument --tensor-parallel-size"}, "2")
    (replica,) = lws["replicas"]
    assert replica["size"] == "2" and [(x["pod"], x["rank"], x["ready"]) for x in replica["pods"]] == [
        ("vllm-1", 0, True), ("vllm-1-1", 1, True)]
    assert {x["node"] for x in replica["pods"]} <= set(p.node_names)
    assert lws["sources"]["model"] == ["argument --model", "its group's argument --model"]
    big = found["big"]
    assert [x["rank"] for x in big["replicas"][0]["pods"]] == [0, 1] and big["tp"]["source"] == "env TENSOR_PARALLEL_SIZE"
    assert found["qwen"]["sources"]["model"] == ["argument --served-model-name"]
    ours = found["llama-3-70b"]
    assert ours["sources"]["model"] == ["label kilocard.io/model"] and ours["stack"] == "kilocard"
    # In words: the cluster, each model with its stack and sources, each replica's pods by rank.
    text = subprocess.run([*KILOCARD, "discover", "-n", p.namespace, "--kubeconfig", str(testbed.paths.kubeconfig)],
                          capture_output=True, text=True, timeout=60).stdout
    assert text.startswith(f"cluster: kubeconfig {testbed.paths.kubeconfig}\n")
    assert f"{p.namespace}/meta-llama/Meta-Llama-3.1-8B-Instruct  [LeaderWorkerSet: LeaderWorkerSet/sglang]" in text
    assert "  replica " in text and "sglang-0 rank 0 on " in text and "sglang-0-1 rank 1 on " in text
