"""Model pods as the serving stacks create them (tests/unit/stacks/, each shaped as its stack's
chart, controller or docs, cited in the file): which model each serves, its replica and rank,
TP and PP sizes and engine, and where each was read."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from chaos import release, serving

STACKS = Path(__file__).parent / "stacks"


def identities(name: str) -> dict[str, serving.Identity]:
    return {i.pod: i for i in serving.identify_all(yaml.safe_load((STACKS / f"{name}.yaml").read_text()))}


def facts(i: serving.Identity) -> dict[str, str | None]:
    return {k: None if f is None else f.value for k, f in (("model", i.model), ("group", i.group), ("rank", i.rank),
                                                             ("size", i.group_size), ("engine", i.engine),
                                                             ("tp", i.tp), ("pp", i.pp))}


def test_vllm_on_leaderworkerset_the_ray_worker_takes_its_leaders_model() -> None:
    found = identities("lws-vllm")
    leader, worker = found["vllm-1"], found["vllm-1-1"]
    assert facts(leader) == {"model": "meta-llama/Meta-Llama-3.1-405B-Instruct", "group": "serving/9f3c0d",
                             "rank": "0", "size": "2", "engine": "vllm", "tp": "8", "pp": "2"}
    assert leader.model.source == "argument --model" and leader.pp.source == "argument --pipeline-parallel-size"
    # Its pod-index is its group's (1), not its rank: LWS's worker index says 0.
    assert leader.rank.source == "label leaderworkerset.sigs.k8s.io/worker-index"
    assert facts(worker) == {"model": "meta-llama/Meta-Llama-3.1-405B-Instruct", "group": "serving/9f3c0d",
                             "rank": "1", "size": "2", "engine": "vllm", "tp": None, "pp": None}
    assert worker.model.source == "its group's argument --model" and worker.engine.source.startswith("its image")
    assert leader.workload.value == worker.workload.value == "LeaderWorkerSet/vllm" and leader.stack == "LeaderWorkerSet"


def test_sglang_on_leaderworkerset_every_pod_names_the_model_and_the_groups_whole_tp() -> None:
    found = identities("lws-sglang")
    assert {p: facts(i) for p, i in found.items()} == {
        pod: {"model": "meta-llama/Meta-Llama-3.1-8B-Instruct", "group": "serving/51ab77", "rank": rank, "size": "2",
              "engine": "sglang", "tp": "2", "pp": None} for pod, rank in (("sglang-0", "0"), ("sglang-0-1", "1"))}
    assert found["sglang-0"].tp.source == "argument --tp" and found["sglang-0"].engine.source == "its command line"


def test_kserve_serves_under_its_model_name_and_a_multi_node_predictor_is_one_replica() -> None:
    found = identities("kserve")
    single = found["llama3-predictor-6c9f8d7b5-x2k4q"]
    assert facts(single) == {"model": "llama3", "group": "serving/llama3-predictor-6c9f8d7b5-x2k4q", "rank": "0",
                             "size": None, "engine": "vllm", "tp": "2", "pp": None}
    assert single.model.source == "argument --model-name" and single.workload.value == "InferenceService/llama3"
    assert single.engine.source.startswith("KServe's Hugging Face runtime")  # vLLM, its default backend
    head, worker = found["big-predictor-5d8c7f9b6-h7p2m"], found["big-predictor-worker-7b9d6c5f4-q9w8e"]
    assert facts(head) == {"model": "big", "group": "serving/big", "rank": "0", "size": "2", "engine": "vllm",
                           "tp": "8", "pp": "2"}
    assert head.tp.source == "env TENSOR_PARALLEL_SIZE" and head.group_size.source == "env RAY_NODE_COUNT"
    assert facts(worker) == {**facts(head), "rank": "1"} and worker.model.source == "its group's argument --model-name"
    # The runtime's Hugging Face backend, asked for by name, is not vLLM and exports none of its series.
    pod = yaml.safe_load((STACKS / "kserve.yaml").read_text())[0]
    pod["spec"]["containers"][0]["args"].append("--backend=huggingface")
    assert serving.identify(pod).engine is None


def test_a_plain_deployment_is_known_by_its_engine_and_kilocards_labels_override_everything() -> None:
    found = identities("plain")
    assert set(found) == {"qwen-7d4b9c8f6d-abcde", "llama-3-405b-0"}  # redis serves no model
    qwen = found["qwen-7d4b9c8f6d-abcde"]
    assert facts(qwen) == {"model": "qwen", "group": "serving/qwen-7d4b9c8f6d-abcde", "rank": "0", "size": None,
                           "engine": "vllm", "tp": "2", "pp": None}  # the first served name is the metrics' model_name
    assert qwen.workload == serving.Fact("Deployment/qwen", "owner ReplicaSet") and qwen.stack == "plain"
    ours = found["llama-3-405b-0"]
    assert facts(ours) == {"model": "llama-3-405b", "group": "kilocard-fleet/llama-3-405b-0", "rank": "0", "size": "2",
                           "engine": "vllm", "tp": "16", "pp": None}
    assert ours.model.source == "label kilocard.io/model" and ours.tp.source == "label kilocard.io/tp-size"


@pytest.mark.parametrize(("words", "flags"), [
    (["vllm", "serve", "m", "--tensor_parallel_size=4", "-pp", "2"], {"--tensor-parallel-size": "4", "-pp": "2"}),
    (["sh", "-c", "python -m sglang.launch_server --model-path 'a b' --tp-size 8; echo done"],
     {"-c": "python", "-m": "sglang.launch_server", "--model-path": "a b", "--tp-size": "8"}),
    (["--enforce-eager", "--max-model-len", "4096"], {"--enforce-eager": "", "--max-model-len": "4096"}),
])
def test_flags_are_read_in_every_spelling_an_engine_accepts(words: list[str], flags: dict[str, str]) -> None:
    pod = {"spec": {"containers": [{"command": words}]}}
    assert serving.arguments(pod)[0] == flags


def test_a_model_whose_pods_disagree_is_not_given_to_a_pod_that_names_none() -> None:
    pods = yaml.safe_load((STACKS / "kserve.yaml").read_text())[1:]
    pods[0]["spec"]["containers"][0]["args"] = ["--model_name=big"]
    other = {**pods[0], "metadata": {**pods[0]["metadata"], "name": "big-predictor-b"}}
    other["spec"] = {"containers": [{**pods[0]["spec"]["containers"][0], "args": ["--model_name=bigger"]}]}
    worker = pods[1]
    found = {i.pod: i for i in serving.identify_all([pods[0], other, worker])}
    assert worker["metadata"]["name"] not in found  # two names in its group: it cannot tell which


def test_an_lws_leaders_rank_is_its_worker_index_not_its_pod_index_which_counts_groups() -> None:
    from chaos.vocabulary import group_of

    leader = {"leaderworkerset.sigs.k8s.io/name": "vllm", "leaderworkerset.sigs.k8s.io/group-key": "k3",
              "leaderworkerset.sigs.k8s.io/worker-index": "0", "apps.kubernetes.io/pod-index": "3"}
    assert group_of("ns", "vllm-3", leader) == ("ns/k3", 0)
    assert group_of("ns", "llama-0-1", {"kilocard.io/tp-group": "g", "apps.kubernetes.io/pod-index": "1"}) == ("ns/g", 1)
    assert group_of("ns", "alone", {}) == ("ns/alone", 0)


def test_production_stack_llm_d_aibrix_and_dynamo_pods_are_known_by_the_name_their_engine_serves() -> None:
    stack = identities("production-stack")["vllm-mistral-deployment-vllm-6d5f7c9b8-k2j4h"]
    assert facts(stack) == {"model": "mistralai/Mistral-7B-Instruct-v0.2",
                            "group": "serving/vllm-mistral-deployment-vllm-6d5f7c9b8-k2j4h", "rank": "0",
                            "size": None, "engine": "vllm", "tp": "2", "pp": None}
    assert (stack.stack, stack.workload.value, stack.model.source) == (
        "vLLM production-stack", "Deployment/vllm-mistral-deployment-vllm", "argument of vllm serve")
    llmd = identities("llm-d")
    chart, guide = llmd["opt-decode-7f9c8d6b5-m4n2p"], llmd["wide-ep-decode-0"]
    # The chart's label is sanitised (facebook-opt-125m); the served name is what the metrics say.
    assert (chart.stack, chart.model, chart.tp) == ("llm-d", serving.Fact("facebook/opt-125m",
                                                                          "argument --served-model-name"),
                                                    serving.Fact("1", "env TP_SIZE"))
    assert (guide.stack, guide.model.value, guide.tp, guide.group.value, guide.group_size.value) == (
        "llm-d", "deepseek-ai/DeepSeek-R1-0528",
        serving.Fact("1", "argument --tensor-parallel-size ($TP_SIZE: env TP_SIZE)"), "serving/4e1d", "2")
    aibrix = identities("aibrix")
    plain = aibrix["qwen3-8b-5c7d9f8b6-t5r4e"]
    assert facts(plain) == {"model": "qwen3-8B", "group": "serving/qwen3-8b-5c7d9f8b6-t5r4e", "rank": "0",
                            "size": None, "engine": "vllm", "tp": "1", "pp": None}
    assert plain.engine.source == "label model.aibrix.ai/engine" and plain.stack == "AIBrix"
    assert [(facts(aibrix[p])["group"], facts(aibrix[p])["rank"]) for p in ("ds-decode-podset-0-0",
                                                                            "ds-decode-podset-0-1")] == [
        ("serving/ds-decode-podset-0", "0"), ("serving/ds-decode-podset-0", "1")]
    dynamo = identities("dynamo")["vllm-disagg-vllmdecodeworker-6b8c9d7f5-x7y8z"]
    assert facts(dynamo)["model"] == "Qwen/Qwen3-0.6B" and dynamo.engine == serving.Fact("vllm", "its command line")
    assert (dynamo.stack, dynamo.workload.value, dynamo.tp.value) == (
        "NVIDIA Dynamo", "DynamoGraphDeployment/vllm-disagg", "2")


def test_a_release_names_the_workload_as_discover_does_and_keeps_the_rollout() -> None:
    pods = yaml.safe_load((STACKS / "lws-vllm.yaml").read_text())
    lws = release.of(pods)["serving/meta-llama/Meta-Llama-3.1-405B-Instruct"]
    assert (lws["workloads"], lws["owners"]) == (["LeaderWorkerSet/vllm"], ["StatefulSet/vllm", "StatefulSet/vllm-1"])
    plain = release.of(yaml.safe_load((STACKS / "plain.yaml").read_text()))
    qwen = next(r for key, r in plain.items() if key.endswith("/qwen"))
    assert (qwen["workloads"], qwen["owners"]) == (["Deployment/qwen"], ["ReplicaSet/qwen-7d4b9c8f6d"])
