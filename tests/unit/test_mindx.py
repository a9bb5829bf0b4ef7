"""MindX DL's formats (chaos.mindx) against the public examples; npu-isolate's holds and npu-fault's
paths, as pure logic."""

import json

import pytest

from chaos import mindx, plan
from chaos.errors import SpecError
from chaos.faults import npu_isolation
from chaos.vocabulary import card_resource_of

R = "huawei.com/Ascend910"
# MindCluster docs (common_operations.md, "Fault Information"): an A3 node's DeviceInfo and the
# CheckCode its plugin wrote.
DOC_FAULTS = (
    '[{"fault_type":"CardNetworkUnhealthy","npu_name":"Ascend910-0","large_model_fault_level":"PreSeparateNPU",'
    '"fault_level":"PreSeparateNPU","fault_handling":"PreSeparateNPU","fault_code":"81078603",'
    '"fault_time_and_level_map":{"81078603":{"fault_time":1744168468259,"fault_level":"PreSeparateNPU"}}},'
    '{"fault_type":"CardUnhealthy","npu_name":"Ascend910-4","large_model_fault_level":"SeparateNPU",'
    '"fault_level":"SeparateNPU","fault_handling":"SeparateNPU","fault_code":"A8028801,A4028801,80E18402,80E18401",'
    '"fault_time_and_level_map":{"80E18401":{"fault_time":1744167455784,"fault_level":"NotHandleFault"},'
    '"80E18402":{"fault_time":1744167455784,"fault_level":"SeparateNPU"},'
    '"A4028801":{"fault_time":1744167455784,"fault_level":"NotHandleFault"},'
    '"A8028801":{"fault_time":1744167455784,"fault_level":"SeparateNPU"}}}]')
DOC_INFO = {"DeviceList": {
    R: "Ascend910-0,Ascend910-1,Ascend910-2,Ascend910-3,Ascend910-5,Ascend910-6,Ascend910-7",
    f"{R}-Fault": DOC_FAULTS, f"{R}-NetworkUnhealthy": "Ascend910-0", f"{R}-Recovering": "",
    f"{R}-Unhealthy": "Ascend910-4"}, "UpdateTime": 1744182144}


def test_check_code_reproduces_the_plugins_own():
    assert mindx.check_code(DOC_INFO) == "a550811fdfafb5717555526816af2ca4ac6c3e102f5907574048578e0c8fcc73"
    fixture = {"DeviceList": {R: ",".join(f"Ascend910-{i}" for i in range(8)), f"{R}-NetworkUnhealthy": ""},
               "UpdateTime": 1720679215}  # MindCluster tests/st/spec/910ax8.py
    assert mindx.check_code(fixture) == "0c1aaed0a363a68edfa245b38dad622e9ac6e3a73751217ca7b6198fa6b14a9e"


def test_a_rendered_device_info_carries_a_valid_check_code_and_a_tampered_one_does_not():
    info = mindx.DeviceInfo(R, healthy=("Ascend910-0", "Ascend910-1"), unhealthy=("Ascend910-2",),
                            faults=(mindx.ChipFault("Ascend910-2", "SeparateNPU", ("80E18402",), times_ms=(1,)),))
    text = info.render(1700000000)
    assert mindx.valid(text)
    data = json.loads(text)
    assert list(data) == ["DeviceInfo", "SuperPodID", "ServerIndex", "CheckCode"]  # Go's struct order
    assert mindx.listed(mindx.device_list_of(text), R, "-Unhealthy") == ["Ascend910-2"]
    assert json.loads(data["DeviceInfo"]["DeviceList"][f"{R}-Fault"])[0]["fault_code"] == "80E18402"
    assert not mindx.valid(text.replace("Ascend910-1", "Ascend910-7"))
    assert mindx.go_json({"a": "<&>"}) == '{"a":"\\u003c\\u0026\\u003e"}'


def test_chip_names_parse_as_the_plugin_parses_them():
    assert mindx.chip_name(R, 3) == "Ascend910-3"
    assert mindx.chip_index("Ascend910-12") == 12 and mindx.chip_index("bogus") is None
    assert mindx.separated(" Ascend910-0, ,Ascend910-4 ") == ["Ascend910-0", "Ascend910-4"]
    assert mindx.separated(None) == []
    assert mindx.public_level("220001001") == "SeparateNPU" and mindx.public_level("100000001") is None


def cm(value=None, annotation=None):
    data = {} if value is None else {mindx.SEPARATED_KEY: value}
    return {"metadata": {"annotations": {} if annotation is None else {npu_isolation.ANNOTATION: annotation}},
            "data": data}


def applied(before, patch):
    """The ConfigMap after a strategic-merge patch of data and annotations (None deletes)."""
    data = dict(before["data"])
    for k, v in patch.get("data", {}).items():
        data.pop(k) if v is None else data.__setitem__(k, v)
    notes = dict(before["metadata"]["annotations"])
    for k, v in patch.get("metadata", {}).get("annotations", {}).items():
        notes.pop(k) if v is None else notes.__setitem__(k, v)
    return {"metadata": {"annotations": notes}, "data": data}


def test_isolation_appends_and_its_revert_restores_the_key_exactly():
    for before in (cm(""), cm("Ascend910-5"), cm(None), cm("Ascend910-5,Ascend910-1")):
        after = applied(before, npu_isolation.hold(before, "run/a", "Ascend910-3"))
        assert mindx.separated(after["data"][mindx.SEPARATED_KEY])[-1] == "Ascend910-3"
        assert npu_isolation.hold(after, "run/a", "Ascend910-3") is None  # idempotent
        assert applied(after, npu_isolation.release(after, "run/a", )) == before
        assert npu_isolation.release(before, "run/a") is None


def test_a_chip_someone_else_separated_stays_and_stacked_runs_release_apart():
    before = cm("Ascend910-3")
    after = applied(before, npu_isolation.hold(before, "run/a", "Ascend910-3"))
    assert after["data"][mindx.SEPARATED_KEY] == "Ascend910-3"
    assert applied(after, npu_isolation.release(after, "run/a")) == before  # not ours to remove

    empty = cm("")
    one = applied(empty, npu_isolation.hold(empty, "run/a", "Ascend910-3"))
    two = applied(one, npu_isolation.hold(one, "run/b", "Ascend910-3"))
    three = applied(two, npu_isolation.hold(two, "run/b2", "Ascend910-6"))
    left = applied(three, npu_isolation.release(three, "run/a"))
    assert mindx.separated(left["data"][mindx.SEPARATED_KEY]) == ["Ascend910-3", "Ascend910-6"]  # b still holds 3
    left = applied(left, npu_isolation.release(left, "run/b"))
    assert mindx.separated(left["data"][mindx.SEPARATED_KEY]) == ["Ascend910-6"]
    assert applied(left, npu_isolation.release(left, "run/b2")) == empty


def node(capacity):
    return {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "8", "pods": "110", **capacity}}}


def test_the_card_resource_comes_from_the_nodes_whoever_made_the_card():
    assert card_resource_of([node({R: "16"})]) == R
    assert card_resource_of([node({"amd.com/gpu": "8", "rdma/hca": "100"})]) == "amd.com/gpu"
    assert card_resource_of([node({"example.com/widget": "2"})]) == "example.com/widget"
    assert card_resource_of([node({"hugepages-2Mi": "0"}), node({})]) == ""
    assert card_resource_of([node({"a.com/gpu": "1"}), node({"b.com/gpu": "1"}), node({"b.com/gpu": "1"})]) \
        == "b.com/gpu"


def test_a_rewrite_without_our_annotation_still_lets_the_revert_take_back_only_its_own_name():
    rewritten = cm("Ascend910-1,Ascend910-3,Ascend910-6")  # the plugin's write: our annotation gone
    assert applied(rewritten, npu_isolation.forget(rewritten, "Ascend910-3"))["data"] == {
        mindx.SEPARATED_KEY: "Ascend910-1,Ascend910-6"}
    assert npu_isolation.forget(cm("Ascend910-1"), "Ascend910-3") is None


NPU = {"kind": "npu-fault", "nodes": ["n"], "card": 3, "ttl_seconds": 60}


@pytest.mark.parametrize(("extra", "message"), [
    ({"via": "clusterd", "level": "RestartNPU"}, r"^f\.level: only for the agent path"),
    ({"via": "clusterd", "speed": 0.5}, r"^f\.speed: only for the agent path"),
    ({"via": "agent", "reporter": "pingmesh"}, r"^f\.reporter: only for the clusterd path"),
    ({"via": "clusterd", "code": "100000001"}, r"^f\.code: ClusterD's default publicFaultCode does not list"),
    ({"via": "clusterd", "code": "80E18402"}, r"^f\.code: expected ClusterD's 9-digit fault code"),
    ({"via": "clusterd", "reporter": "nagios"}, r"^f\.reporter: ClusterD's default publicFaultResource does not"),
    ({"via": "agent", "code": "0x80e18402"}, r"^f\.code: expected a fault code of 1-16 upper-case hex digits"),
    ({"via": "agent", "card": 2000}, r"^f\.card: expected an integer from 0 to 1023"),
])
def test_npu_fault_refuses_what_its_path_would_drop_or_discard(extra, message):
    with pytest.raises(SpecError, match=message):
        plan.parse({**NPU, **extra}, "f")


def test_npu_fault_accepts_a_cluster_configured_otherwise_and_leaves_auto_to_the_cluster():
    _module, spec = plan.parse({**NPU, "via": "clusterd", "code": "100000001", "reporter": "nagios",
                                "allow_unlisted": True}, "f")
    assert spec.code == "100000001"
    _module, auto = plan.parse({**NPU, "level": "RestartNPU"}, "f")  # checked once the path is known
    assert auto.via == "auto" and auto.params["level"] == "RestartNPU"
