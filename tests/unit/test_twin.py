"""What plan --twin copies of a cluster (testbed/twin.py), over objects as the API returns them;
the twin itself runs in tests/testbed (test_catalog's S2, test_lws's S1 on LeaderWorkerSet)."""

from __future__ import annotations

from testbed import twin


def statefulset(name: str, labels: dict[str, str], owner: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": "serving", "labels": labels,
                         "ownerReferences": [{"kind": owner, "name": "vllm"}]},
            "spec": {"replicas": 2, "template": {"metadata": {"labels": labels}, "spec": {}}}}


def test_the_statefulsets_lws_made_are_left_to_its_controller_on_the_twin_and_its_groups_counted() -> None:
    lws_label = {"leaderworkerset.sigs.k8s.io/name": "vllm"}
    leaders = statefulset("vllm", lws_label, "LeaderWorkerSet")
    workers = statefulset("vllm-0", {**lws_label, "leaderworkerset.sigs.k8s.io/group-index": "0"}, "Pod")
    own = statefulset("llama-3-405b-g0", {"app": "engine"}, "Nothing")
    assert [twin.made_by_lws(o) for o in (leaders, workers, own)] == [True, True, False]
    group = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
             "metadata": {"name": "vllm", "namespace": "serving"},
             "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2}}}
    assert twin.expected_pods([group, own]) == 2 * 2 + 2
