"""The probes' snapshot reads a model's pods as their serving stack made them (chaos.serving):
no kilocard label needed, kilocard's labels still an explicit override, and the replica's TP,
PP and group sizes what the stack or the engine's arguments say."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from probes import snapshot, tp_groups

STACKS = Path(__file__).parent / "stacks"
LLAMA = "meta-llama/Meta-Llama-3.1-405B-Instruct"
NODE = {"metadata": {"name": "n0", "labels": {}}, "status": {"capacity": {"nvidia.com/gpu": "8"},
                                                              "allocatable": {"nvidia.com/gpu": "8"},
                                                              "conditions": [{"type": "Ready", "status": "True"}]}}


def placed(name: str, nodes: dict[str, str], ready: bool = True) -> list[dict[str, Any]]:
    """The stack's pods as the API would give them once scheduled: a uid, a node, a Ready condition."""
    pods = copy.deepcopy(yaml.safe_load((STACKS / f"{name}.yaml").read_text()))
    for i, pod in enumerate(pods):
        meta = pod["metadata"]
        meta.update(uid=f"uid-{name}-{i}", resourceVersion="1")
        pod["spec"]["nodeName"] = nodes.get(meta["name"], "n0")
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}
    return pods


def nodes(*names: str) -> list[dict[str, Any]]:
    return [{**NODE, "metadata": {"name": n, "labels": {}}} for n in names]


def test_a_vllm_replica_on_leaderworkerset_is_one_group_with_its_sizes_from_the_leaders_arguments() -> None:
    pods = placed("lws-vllm", {"vllm-1": "n0", "vllm-1-1": "n1"})
    s = snapshot.build(pods, nodes("n0", "n1"))
    members = sorted(s.replicas(LLAMA), key=lambda p: p.rank)
    assert [(p.name, p.group, p.rank, p.cards) for p in members] == [("vllm-1", "serving/9f3c0d", 0, 8),
                                                                     ("vllm-1-1", "serving/9f3c0d", 1, 8)]
    leader, worker = members
    assert (leader.tp_size, leader.pp_size, leader.group_size) == (8, 2, 2)
    assert (worker.tp_size, worker.pp_size, worker.group_size) == (None, None, 2)  # its command line runs Ray only
    assert snapshot.whole_and_ready(members) and not snapshot.whole_and_ready(members[:1])
    # TP=8 x PP=2 is sixteen cards: two nodes of eight is the shape, not a split group.
    assert tp_groups.check(s, LLAMA).ok, tp_groups.check(s, LLAMA).reason
    # Without its worker, the group is not whole: the leader's annotation says two pods.
    alone = snapshot.build(pods[:1], nodes("n0", "n1"))
    verdict = tp_groups.check(alone, LLAMA)
    assert not verdict.ok and "serving/9f3c0d: 1 of 2 ranks present" in verdict.reason


def test_a_plain_deployment_is_read_from_its_engines_arguments_and_kilocards_labels_still_win() -> None:
    s = snapshot.build(placed("plain", {}), nodes("n0"))
    assert s.models() == ["llama-3-405b", "qwen"]  # redis serves no model
    (qwen,) = s.replicas("qwen")
    assert (qwen.group, qwen.rank, qwen.tp_size, qwen.group_size) == ("serving/qwen-7d4b9c8f6d-abcde", 0, 2, None)
    (labelled,) = s.replicas("llama-3-405b")
    assert (labelled.tp_size, labelled.group_size, labelled.group) == (16, 2, "kilocard-fleet/llama-3-405b-0")
    # A replica whose two ranks are one TP=16 group: one of two present is not whole.
    assert not tp_groups.check(s, "llama-3-405b").ok


def test_a_pods_command_line_is_read_once_per_version_and_again_when_it_changes() -> None:
    (pod,) = [p for p in placed("plain", {}) if p["metadata"]["name"].startswith("qwen")]
    first = snapshot.identities([pod])[("serving", "qwen-7d4b9c8f6d-abcde")]
    assert snapshot.identities([copy.deepcopy(pod)])[("serving", "qwen-7d4b9c8f6d-abcde")] is first
    changed = copy.deepcopy(pod)
    changed["metadata"]["resourceVersion"] = "2"
    changed["spec"]["containers"][0]["args"] = [a.replace("qwen,", "qwen-2,") for a in
                                                changed["spec"]["containers"][0]["args"]]
    again = snapshot.identities([changed])[("serving", "qwen-7d4b9c8f6d-abcde")]
    assert again is not first and again.model is not None and again.model.value == "qwen-2"


def test_may_serve_keeps_a_worker_that_names_no_model_and_drops_what_serves_none() -> None:
    lws = placed("lws-vllm", {})
    plain = {p["metadata"]["name"]: p for p in placed("plain", {})}
    assert snapshot.may_serve(lws[1], LLAMA) and snapshot.may_serve(lws[1], "qwen")  # a worker: its peers decide
    assert snapshot.may_serve(lws[0], LLAMA) and not snapshot.may_serve(lws[0], "qwen")
    assert not snapshot.may_serve(plain["redis-0"], None)
    assert snapshot.model_of(lws[1], snapshot.identities(lws)) == LLAMA
    assert snapshot.model_of(lws[1], snapshot.identities(lws[1:])) is None  # alone it names none
