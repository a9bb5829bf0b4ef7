"""Target picks: the same run picks the same targets when planned and when applied."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from chaos import plan
from chaos.faults import node_isolation, pod_kill
from chaos.targets import NodeSelection, select_nodes


class Listing:
    """The two LISTs target selection makes, over fixed objects."""

    def __init__(self, nodes: int) -> None:
        self.nodes = [{"metadata": {"name": f"gpu-{i:03d}"}} for i in range(nodes)]
        self.pods = [{"metadata": {"namespace": "fleet", "name": f"p-{i:03d}", "uid": str(i), "labels": {}},
                      "spec": {"nodeName": f"gpu-{i:03d}"}, "status": {"phase": "Running"}} for i in range(nodes)]

    def list_nodes_raw(self, selector: str | None = None) -> list[dict[str, Any]]:
        return self.nodes

    def list_pods_raw(self, namespace: str | None, label_selector: str | None = None,
                      field_selector: str | None = None) -> list[dict[str, Any]]:
        return self.pods


def ctx(run_id: str) -> Any:
    return SimpleNamespace(kube=Listing(64), run_id=run_id)


def test_an_unseeded_pick_is_the_same_for_the_same_run_and_differs_across_runs() -> None:
    _, spec = plan.parse({"kind": "pod-kill", "namespace": "fleet", "label_selector": "a=b", "count": 3}, "f")
    planned = pod_kill.targets(ctx("run-1"), spec, "f")
    assert pod_kill.targets(ctx("run-1"), spec, "f") == planned
    picks = {tuple(t["name"] for t in pod_kill.targets(ctx(f"run-{i}"), spec, "f")) for i in range(8)}
    assert len(picks) > 1  # not one fixed pick: the run id seeds it


def test_a_seed_of_its_own_wins_over_the_run_id() -> None:
    selection = NodeSelection(None, "pool=gpu", 2, None, 7)
    assert select_nodes(Listing(64), selection, "f", "run-1") == select_nodes(Listing(64), selection, "f", "run-2")
    _, spec = plan.parse({"kind": "node-isolate", "node_selector": "pool=gpu", "count": 2, "seed": 7,
                          "ttl_seconds": 60}, "f")
    assert [t["node"] for t in node_isolation.targets(ctx("run-9"), spec, "f")] == \
        select_nodes(Listing(64), selection, "f", "run-1")


def test_a_replica_and_a_rank_pick_the_machine_under_one_rank_on_kilocards_fleet_and_on_lws() -> None:
    from pathlib import Path

    import yaml

    from chaos.targets import of_replica

    def labelled(name: str, group: str, index: int, node: str) -> dict[str, Any]:
        return {"metadata": {"namespace": "fleet", "name": name, "uid": name,
                             "labels": {"kilocard.io/model": "m", "kilocard.io/tp-group": group,
                                        "apps.kubernetes.io/pod-index": str(index)}}, "spec": {"nodeName": node}}

    # Groups in the order of their first pod name, numbers as numbers (g2 before g10).
    fleet = [labelled(f"m-g{g}-{r}", f"m-g{g}", r, f"n{g}{r}") for g in (10, 2) for r in (0, 1)]
    assert [p["spec"]["nodeName"] for p in of_replica(fleet, 0, 1)] == ["n21"]
    assert [p["spec"]["nodeName"] for p in of_replica(fleet, 1, None)] == ["n100", "n101"]
    assert sorted(p["spec"]["nodeName"] for p in of_replica(fleet, None, 0)) == ["n100", "n20"]
    assert of_replica(fleet, 2, 1) == [] and of_replica(fleet, None, None) == fleet
    # LWS's pods as its controller and webhook label them: group by group-key, rank by worker-index.
    lws = yaml.safe_load((Path(__file__).parent / "stacks" / "lws-vllm.yaml").read_text())
    for pod in lws:
        pod["metadata"]["uid"] = pod["metadata"]["name"]
        pod["spec"]["nodeName"] = f"on-{pod['metadata']['name']}"
    assert [p["metadata"]["name"] for p in of_replica(lws, 0, 1)] == ["vllm-1-1"]
    assert [p["metadata"]["name"] for p in of_replica(lws, 0, 0)] == ["vllm-1"]
