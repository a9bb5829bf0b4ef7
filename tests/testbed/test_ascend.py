"""The Ascend NPU testbed (`--accelerator ascend`): MindX DL's device-info ConfigMaps, npu-exporter,
ClusterD's public faults, and the two NPU fault kinds through the real control plane.

One private testbed for the module: 4 nodes of 8 Ascend910 chips, two TP=8 replicas of
llama-3-70b (required anti-affinity), so two nodes have 8 free chips to move to.
"""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_api_client import PrometheusConnect

from chaos import landed, ledger, mindx, plan, revert
from chaos.agent.client import AgentClient
from chaos.errors import KubeError, SpecError
from chaos.faults import Context
from chaos.kube import Kube, pod_ready
from probes import capacity, chaostoolkit, placement, snapshot, tp_groups
from testbed import fleet
from testbed.cluster import Testbed
from testbed.config import TestbedConfig
from testbed.remediator import OPT_OUT_LABEL
from tests.testbed import helpers
from tests.testbed.conftest import PORT_BASE
from tests.testbed.helpers import apply_deploy, eventually, query, service_account_kubeconfig, wait_ready
from tests.testbed.test_runner import kilocard_run

pytestmark = [pytest.mark.testbed, pytest.mark.long(320)]  # all, together (a module-scoped fixture)
R = "huawei.com/Ascend910"
BIG = "llama-3-70b"
WINDOW = "5s"
CATALOG = Path(__file__).parents[2] / "experiments"


@pytest.fixture(scope="module")
def ascend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    config = TestbedConfig(nodes=4, port_base=PORT_BASE + 60, state_dir=Path(tmp_path_factory.mktemp("ascend")),
                           accelerator="ascend", card_resource=R, card_product="Ascend910B3")
    tb = Testbed(config.validate())
    tb.up(say=lambda _m: None, timeout=120)
    kube = tb.kube()
    try:
        objects = fleet.scaled(fleet.only(fleet.load("default", R), BIG), {BIG: 2})
        fleet.deploy(kube, objects, timeout=60, say=lambda _m: None)
        yield tb
    finally:
        kube.close()
        tb.down(say=lambda _m: None)


@pytest.fixture
def kube(ascend: Testbed) -> Iterator[Kube]:
    k = ascend.kube()
    yield k
    k.close()


@pytest.fixture
def prom(ascend: Testbed) -> Any:
    return PrometheusConnect(ascend.prometheus_url)


def device_info(kube: Kube, node: str) -> dict[str, Any]:
    return kube.read_config_map(mindx.DEVICE_INFO_NAMESPACE, mindx.device_info_name(node))


def allocatable(kube: Kube, node: str) -> int:
    return int(kube.read_node_raw(node)["status"]["allocatable"][R])


def context(kube: Kube, name: str) -> Context:
    return Context(kube, AgentClient(kube), f"{name}-{uuid.uuid4().hex[:6]}", say=lambda _m: None)


def replicas(kube: Kube) -> list[Any]:
    return wait_ready(kube, fleet.DEFAULT_NAMESPACE, BIG, 2)


def p95(prom: Any, pod: str) -> float:
    promql = (f"histogram_quantile(0.95, sum by (le, pod) (rate(vllm:time_to_first_token_seconds_bucket"
              f'{{namespace="{fleet.DEFAULT_NAMESPACE}",pod="{pod}"}}[{WINDOW}])))')
    return query(prom, promql, "pod").get(pod, 0.0)


def settled(kube: Kube, prom: Any) -> list[Any]:
    """Both replicas Ready on unquarantined nodes, every chip back, and each one's P95 healthy."""
    pods = replicas(kube)
    for n in kube.list_nodes():
        assert eventually(lambda n=n: allocatable(kube, n.metadata.name) == 8 and not kube.read_node(
            n.metadata.name).spec.unschedulable, 60), n.metadata.name
    assert eventually(lambda: all(0 < p95(prom, p.metadata.name) < 0.5 for p in replicas(kube)), 60)
    return pods


def test_the_nodes_carry_mindx_labels_a_device_plugin_configmap_and_npu_exporter(ascend, kube, prom):
    nodes = kube.list_nodes_raw()
    assert {n["status"]["capacity"][R] for n in nodes} == {"8"}
    labels = nodes[0]["metadata"]["labels"]
    assert labels["accelerator"] == "huawei-Ascend910" and labels["accelerator-type"] == "module-910b-8"
    assert labels["kubernetes.io/arch"] == "arm64" and not any(k.startswith("nvidia.com/") for k in labels)
    for n in nodes:
        cm = device_info(kube, n["metadata"]["name"])
        assert cm["metadata"]["labels"][mindx.DEVICE_INFO_LABEL] == "true"
        text = cm["data"][mindx.DEVICE_INFO_KEY]
        assert mindx.valid(text), text  # ClusterD would accept it
        assert mindx.listed(mindx.device_list_of(text), R) == [f"Ascend910-{i}" for i in range(8)]
        assert cm["data"][mindx.SEPARATED_KEY] == ""
    def mounted() -> list[list[str]]:  # the plugin's record of what it gave each pod: all 8 chips
        return [mindx.separated((p.metadata.annotations or {}).get(mindx.POD_CHIPS_ANNOTATION)) for p in replicas(kube)]

    assert eventually(lambda: mounted() == [[f"Ascend910-{i}" for i in range(8)]] * 2, 10), mounted()
    health = eventually(lambda: query(prom, "count(npu_chip_info_health_status == 1)"), 20)
    assert health == {"value": 32}
    busy = f'count(npu_chip_info_utilization{{namespace="{fleet.DEFAULT_NAMESPACE}"}} > 0)'
    assert eventually(lambda: query(prom, busy) == {"value": 16}, 20), query(prom, busy)  # both replicas' chips
    assert not query(prom, "count(DCGM_FI_DEV_GPU_UTIL)")  # no dcgm-exporter on an Ascend fleet
    kube.get_object("v1", "Service", mindx.CLUSTERD_SERVICE, mindx.CLUSTERD_NAMESPACE)


def test_probes_judge_the_ascend_fleet_without_being_told_its_card(ascend, kube):
    snap = snapshot.fetch(kube)
    assert snap.card_resource == R
    assert sum(n.cards_capacity for n in snap.nodes) == 32
    assert sum(p.cards for p in snap.replicas(BIG)) == 16
    assert placement.anti_affinity(snap, BIG).ok
    assert tp_groups.check(snap, BIG).ok
    assert capacity.fits(snap, BIG, capacity.Demand(1.0, 512, 128, 2.0)).ok
    verdict = capacity.room(snap, BIG)
    assert verdict.ok, verdict.reason
    assert not capacity.room(snap, BIG, tuple(n.name for n in snap.nodes)[:3]).ok  # one node left for two


def _without_stamps(text: str) -> str:
    """A DeviceInfoCfg with its UpdateTime and CheckCode blanked: what must read as it did."""
    return re.sub(r'"CheckCode":"[0-9a-f]+"', '"CheckCode":""', re.sub(r'"UpdateTime":\d+', '"UpdateTime":0', text))


def test_npu_isolate_drops_allocatable_moves_the_replica_and_reverts_the_configmap_exactly(ascend, kube, prom,
                                                                                           tmp_path):
    victim, healthy = settled(kube, prom)
    node = victim.spec.node_name
    before = device_info(kube, node)
    ctx = context(kube, "isolate")
    book = ledger.Ledger(ctx.run_id, kube, tmp_path / "ledger")
    fault = plan.inject(ctx, book, {"kind": "npu-isolate", "nodes": [node], "cards": [3], "ttl_seconds": 300})
    try:
        assert eventually(lambda: allocatable(kube, node) == 7, 15)
        text = device_info(kube, node)["data"][mindx.DEVICE_INFO_KEY]
        listed = mindx.device_list_of(text)
        assert mindx.listed(listed, R, "-Unhealthy") == ["Ascend910-3"] and "Ascend910-3" not in listed[R]
        assert mindx.valid(text)
        assert device_info(kube, node)["data"][mindx.SEPARATED_KEY] == "Ascend910-3"
        # The plugin evicts nothing; the remediator (ClusterD's role) moves the replica off the chip,
        # and no node with 7 chips can take a TP=8 replica: it lands on one with 8 free.
        pods = kube.wait_until("pods", lambda items: sum(pod_ready(p) for p in items) == 2 and victim.metadata.uid
                               not in {p.metadata.uid for p in items}, timeout=60,
                               namespace=fleet.DEFAULT_NAMESPACE, label_selector=f"kilocard.io/model={BIG}")
        moved = next(p for p in pods if p.metadata.uid != healthy.metadata.uid)
        assert moved.spec.node_name not in (node, healthy.spec.node_name)
        assert allocatable(kube, moved.spec.node_name) == 8
    finally:
        assert revert.revert(ctx, book, fault.records) == []
    assert eventually(lambda: allocatable(kube, node) == 8, 15)
    assert eventually(lambda: mindx.listed(mindx.device_list_of(
        device_info(kube, node)["data"][mindx.DEVICE_INFO_KEY]), R, "-Unhealthy") == [], 15)
    after = device_info(kube, node)
    assert after["data"][mindx.SEPARATED_KEY] == before["data"][mindx.SEPARATED_KEY]
    assert set(after["data"]) == set(before["data"])
    assert _without_stamps(after["data"][mindx.DEVICE_INFO_KEY]) == _without_stamps(
        before["data"][mindx.DEVICE_INFO_KEY])
    assert after["metadata"].get("annotations") == before["metadata"].get("annotations")
    assert after["metadata"]["labels"] == before["metadata"]["labels"]


def _slo(ascend: Testbed, applied_at: float, budget: float) -> dict[str, Any]:
    """The worst replica's P95 TTFT from the fault, as the Chaos Toolkit probe judges it: with the
    pods' readiness beside the series (a drained replica's series vanishes with its pod)."""
    cfg = {"kilocard_kubeconfig": str(ascend.paths.kubeconfig), "kilocard_prometheus_url": ascend.prometheus_url}
    return chaostoolkit.slo_recovered_within(BIG, budget, threshold=0.5, hold=5, namespace=fleet.DEFAULT_NAMESPACE,
                                             window=WINDOW, fault_at=applied_at, configuration=cfg)


def test_an_npu_fault_through_clusterd_slows_its_group_about_3x_and_remediation_brings_the_slo_back(
        ascend, kube, prom, tmp_path):
    victim, healthy = settled(kube, prom)
    node = victim.spec.node_name
    baseline = p95(prom, victim.metadata.name)
    ctx = context(kube, "npu")
    book = ledger.Ledger(ctx.run_id, kube, tmp_path / "ledger")
    fault = plan.inject(ctx, book, {"kind": "npu-fault", "nodes": [node], "cards": [3], "ttl_seconds": 300})
    (record,) = fault.records
    try:
        assert record.undo["via"] == "clusterd"  # ClusterD's Service is there: no agent on this path
        (cm,) = kube.list_config_maps(mindx.CLUSTERD_NAMESPACE, f"{mindx.PUBLIC_FAULT_LABEL}=true")
        message = json.loads(cm["data"][mindx.PUBLIC_FAULT_KEY])
        assert message["faults"][0]["influence"] == [{"nodeName": node, "deviceIds": [3]}]
        assert message["faults"][0]["faultCode"] == "220001001" and message["faults"][0]["assertion"] == "occur"
        assert eventually(lambda: query(prom, f'npu_chip_info_health_status{{node="{node}",id="3"}}') ==
                          {"value": 0}, 15)
        # A pass needs a breach first (expect_impact): the sick chip slowed its group past the SLO
        # before the remediator moved the replica (the slowdown itself is measured in the test below,
        # where nothing moves it).
        verdict = _slo(ascend, record.applied_at, 90)
        assert verdict["ok"], verdict["reason"]
        assert verdict["worst"] == victim.metadata.name and verdict["peak"] > 2 * baseline
        assert p95(prom, healthy.metadata.name) < 0.5
        # The replica moved off the unhealthy chip at once; after the remediator's grace the node
        # is quarantined too, as for an ECC error.
        assert eventually(lambda: kube.read_node(node).spec.unschedulable, 30)
        assert victim.metadata.uid not in {p.metadata.uid for p in replicas(kube)}
    finally:
        assert revert.revert(ctx, book, fault.records) == []
    assert kube.list_config_maps(mindx.CLUSTERD_NAMESPACE, f"{mindx.PUBLIC_FAULT_LABEL}=true") == []
    assert eventually(lambda: query(prom, f'npu_chip_info_health_status{{node="{node}",id="3"}}') == {"value": 1}, 15)
    settled(kube, prom)  # the remediator lifted its quarantine once the chip was healthy


def test_without_remediation_an_npu_fault_through_the_agent_never_recovers(ascend, kube, prom, tmp_path):
    victim, _ = settled(kube, prom)
    node = victim.spec.node_name
    baseline = p95(prom, victim.metadata.name)
    kube.patch_node(node, {"metadata": {"labels": {OPT_OUT_LABEL: "false"}}})
    ctx = context(kube, "npu-off")
    book = ledger.Ledger(ctx.run_id, kube, tmp_path / "ledger")
    fault = plan.inject(ctx, book, {"kind": "npu-fault", "via": "agent", "nodes": [node], "cards": [0],
                                    "ttl_seconds": 300})
    (record,) = fault.records
    try:
        assert record.undo["agent_id"] and eventually(lambda: allocatable(kube, node) == 7, 15)
        verdict = _slo(ascend, record.applied_at, 30)
        slowed = p95(prom, victim.metadata.name)  # over the last 5 s, the fault 30 s old: its steady state
        assert 2.5 <= slowed / baseline <= 4, (baseline, slowed)  # about 3x, as ECC does to a GPU group
        assert not verdict["ok"] and "not recovered" in verdict["reason"], verdict["reason"]
        assert not kube.read_node(node).spec.unschedulable
        assert kube.read_pod(victim.metadata.namespace, victim.metadata.name).metadata.deletion_timestamp is None
    finally:
        assert revert.revert(ctx, book, fault.records) == []
        kube.patch_node(node, {"metadata": {"labels": {OPT_OUT_LABEL: None}}})
    assert eventually(lambda: allocatable(kube, node) == 8, 15)


def test_a_public_fault_code_clusterd_would_discard_is_refused_before_anything_is_written(ascend, kube):
    ctx = context(kube, "bad")
    node = kube.list_nodes()[0].metadata.name
    bad = {"kind": "npu-fault", "nodes": [node], "cards": [0], "code": "100000001", "ttl_seconds": 60}
    with pytest.raises(SpecError, match=r"^f\.code: ClusterD's default publicFaultCode does not list 100000001.*"
                                        r"\(via auto: ClusterD runs here\)$"):
        plan.plan(ctx, [(bad, "f")])
    with pytest.raises(SpecError, match=r"^f\.cards: node .* has cards 0-7 \(huawei.com/Ascend910\), got 8$"):
        plan.plan(ctx, [({"kind": "npu-isolate", "nodes": [node], "cards": [8], "ttl_seconds": 60}, "f")])
    assert kube.list_config_maps(mindx.CLUSTERD_NAMESPACE, f"{mindx.PUBLIC_FAULT_LABEL}=true") == []
    assert device_info(kube, node)["data"][mindx.SEPARATED_KEY] == ""


def on_ascend(name: str, fault: dict[str, Any]) -> dict[str, Any]:
    """A catalog scenario with only its fault's kind (and that kind's own parameters) changed."""
    scenario = yaml.safe_load((CATALOG / name).read_text())
    (action,) = [a for a in scenario["method"] if a["type"] == "action"]
    given = action["provider"]["arguments"]["fault"]
    action["provider"]["arguments"]["fault"] = {**{k: v for k, v in given.items() if k != "params"}, **fault}
    return scenario


@pytest.mark.parametrize(("name", "fault"), [("s2-isolate-one-card.yaml", {"kind": "npu-isolate"}),
                                             ("s3-ecc-one-tp-member.yaml", {"kind": "npu-fault"})])
def test_the_catalogs_s2_and_s3_give_the_same_verdicts_on_the_ascend_fleet(ascend, kube, prom, tmp_path, name,
                                                                           fault):
    settled(kube, prom)
    code, journal, _ = kilocard_run(ascend, tmp_path, on_ascend(name, fault))
    assert code == 0 and journal["kilocard"]["verdict"] == "passed", journal["kilocard"]["reason"]
    (applied,) = journal["kilocard"]["faults"]
    assert applied["kind"] == fault["kind"] and applied["state"] == "reverted"
    assert journal["kilocard"]["snapshots"]  # the run followed the cluster, as on the GPU fleet


def test_s3_on_the_ascend_fleet_fails_without_remediation(ascend, kube, prom, tmp_path):
    settled(kube, prom)
    names = [n.metadata.name for n in kube.list_nodes()]
    for n in names:  # every node opted out: the remediator neither moves pods nor quarantines
        kube.patch_node(n, {"metadata": {"labels": {OPT_OUT_LABEL: "false"}}})
    try:
        code, journal, _ = kilocard_run(ascend, tmp_path, on_ascend("s3-ecc-one-tp-member.yaml", {"kind": "npu-fault"}),
                                        "--var", "budget_seconds:int=30")
    finally:
        for n in names:
            kube.patch_node(n, {"metadata": {"labels": {OPT_OUT_LABEL: None}}})
    assert code == 1, journal["kilocard"]["reason"]
    assert journal["kilocard"]["reason"].startswith("probe 'node-quarantined-within-budget' failed: ")
    ttft = next(r for r in journal["run"] if r["activity"]["name"] == "ttft-breached-then-recovered")["output"]
    assert ttft["outcome"] == "not_recovered" and ttft["breach_after"] is not None, ttft["reason"]


@pytest.mark.parametrize("fault", [{"kind": "npu-isolate", "cards": [5]}, {"kind": "npu-fault", "cards": [5]}])
def test_a_dead_runners_npu_fault_is_reverted_by_the_reaper_at_its_ttl(ascend, kube, prom, tmp_path, fault):
    """The runner records and applies, then is never heard from again: the in-cluster reaper (the
    simulator's, on the testbed) reverts it from the ledger once its TTL is past."""
    node = settled(kube, prom)[0].spec.node_name
    before = device_info(kube, node)
    ctx = context(kube, "dead")
    planned = plan.inject(ctx, ledger.Ledger(ctx.run_id, kube, tmp_path / "ledger"),
                          {**fault, "nodes": [node], "ttl_seconds": 6})
    assert eventually(lambda: allocatable(kube, node) == 7, 15)  # it landed
    assert eventually(lambda: allocatable(kube, node) == 8, 30)  # and went at its TTL, no runner left
    assert eventually(lambda: not [r for r in ledger.read_cluster(kube, ctx.run_id) if r.open], 15)
    after = device_info(kube, node)
    assert after["data"][mindx.SEPARATED_KEY] == before["data"][mindx.SEPARATED_KEY]
    assert after["metadata"].get("annotations") == before["metadata"].get("annotations")
    assert kube.list_config_maps(mindx.CLUSTERD_NAMESPACE, f"{mindx.PUBLIC_FAULT_LABEL}=true") == []
    assert [r.state for r in planned.records] == ["applied"]  # the runner itself never reverted it


def test_the_npu_kinds_run_and_reap_with_deploy_ascends_least_privilege(ascend, kube, prom, tmp_path):
    apply_deploy(kube, "namespace.yaml", "rbac-runner.yaml", "rbac-reaper.yaml", "ascend/rbac.yaml")
    runner = Kube.from_kubeconfig(service_account_kubeconfig(ascend, kube, "kilocard-system", "kilocard-runner",
                                                              tmp_path / "runner.kubeconfig"))
    reaper = Kube.from_kubeconfig(service_account_kubeconfig(ascend, kube, "kilocard-system", "kilocard-reaper",
                                                              tmp_path / "reaper.kubeconfig"))
    try:
        node = settled(kube, prom)[0].spec.node_name
        ctx = Context(runner, AgentClient(runner), f"rbac-{uuid.uuid4().hex[:6]}", say=lambda _m: None)
        book = ledger.Ledger(ctx.run_id, runner, tmp_path / "ledger")
        records = [r for raw in ({"kind": "npu-isolate", "nodes": [node], "card": 6, "ttl_seconds": 120},
                                 {"kind": "npu-fault", "nodes": [node], "card": 7, "ttl_seconds": 120})
                   for r in plan.inject(ctx, book, raw).records]
        assert [r.state for r in records] == ["applied", "applied"] and records[1].undo["via"] == "clusterd"
        assert eventually(lambda: allocatable(kube, node) == 6, 15)
        # The reaper, with its own account, reverts both from the cluster's ledger alone.
        reaped, left = revert.recover(Context(reaper, AgentClient(reaper), "reaper", say=lambda _m: None), None,
                                      ctx.run_id)
        assert left == [] and sorted(r.kind for r in reaped) == ["npu-fault", "npu-isolate"]
        assert eventually(lambda: allocatable(kube, node) == 8, 15)
        assert device_info(kube, node)["data"][mindx.SEPARATED_KEY] == ""
        # Everything else stays refused: other namespaces' ConfigMaps, deleting the plugin's own.
        refused = {
            "create a ConfigMap in default": lambda: runner.create_config_map("default", {"metadata": {"name": "x"}}),
            "delete the device plugin's ConfigMap": lambda: runner.delete_config_map(
                mindx.DEVICE_INFO_NAMESPACE, mindx.device_info_name(node)),
            "reaper creating a public fault elsewhere": lambda: reaper.create_config_map(
                "kube-system", {"metadata": {"name": "x"}}),
        }
        for what, attempt in refused.items():
            with pytest.raises(KubeError) as caught:
                attempt()
            assert caught.value.status == 403, what
    finally:
        runner.close()
        reaper.close()


NPU_LANDED = [
    ("npu-isolate", {}, "separated"),
    ("npu-fault", {"via": "clusterd"}, "public fault"),
    ("npu-fault", {"via": "agent", "code": "80E18402"}, "fake node"),
]


@pytest.mark.parametrize(("kind", "fields", "undone"), NPU_LANDED, ids=[f"{k}-{u}" for k, _f, u in NPU_LANDED])
def test_an_npu_fault_is_confirmed_by_the_plugins_report_and_a_mismatch_once_undone_by_hand(ascend, kube, prom,
                                                                                          tmp_path, kind, fields,
                                                                                          undone):
    busy = {p.spec.node_name for p in settled(kube, prom)}
    node = next(n.metadata.name for n in kube.list_nodes() if n.metadata.name not in busy)
    kube.patch_node(node, {"metadata": {"labels": {OPT_OUT_LABEL: "false"}}})  # the remediator leaves it be
    ctx = context(kube, "landed")
    book = ledger.Ledger(ctx.run_id, kube, tmp_path / "ledger")
    fault = plan.inject(ctx, book, {"kind": kind, "nodes": [node], "card": 5, "ttl_seconds": 120, **fields})
    try:
        (record,) = fault.records
        named = "card 5" if undone == "fake node" else "Ascend910-5"
        assert record.landed["status"] == "confirmed" and named in record.landed["evidence"], record.landed
        if undone == "separated":  # someone empties ManuallySeparateNPU: the plugin reports the chip healthy
            kube.patch_config_map(mindx.DEVICE_INFO_NAMESPACE, mindx.device_info_name(node),
                                  {"data": {mindx.SEPARATED_KEY: ""}})
        elif undone == "public fault":
            kube.delete_config_map(record.undo["namespace"], record.undo["name"])
        else:
            endpoint, token = helpers.agent(kube, node)
            request = urllib.request.Request(
                f"{endpoint.rsplit('/nodes/', 1)[0]}/sim/v1/sabotage/{node}/{record.undo['agent_id']}", method="POST",
                data=b"{}", headers={"Authorization": f"Bearer {token}"})
            urllib.request.urlopen(request, timeout=10).close()
        # The plugin rewrites its report a moment later: the read-back says so once it has.
        assert eventually(lambda: landed.verify(ctx, fault.module, fault.spec, record.target, record.undo,
                                                landed.Options(within_seconds=0))["status"] == "mismatch", 15)
    finally:
        assert revert.revert(ctx, book, fault.records) == []
        kube.patch_node(node, {"metadata": {"labels": {OPT_OUT_LABEL: None}}})
    assert eventually(lambda: allocatable(kube, node) == 8, 30)
