"""Holding a node with a taint (node-isolate, node-out-of-service), pure: what each holder adds and
takes away."""

import json

from chaos.faults import node_out_of_service
from chaos.faults._node_hold import hold, release
from chaos.faults.node_isolation import MARK, release_legacy
from chaos.vocabulary import ISOLATION_ANNOTATION, ISOLATION_TAINT


def node(taints=(), cordoned=False, annotations=None, labels=None):
    return {"metadata": {"name": "n", "annotations": dict(annotations or {}), "labels": dict(labels or {})},
            "spec": {"unschedulable": cordoned, "taints": [dict(t) for t in taints]}}


def patched(n, patch):
    """The node after a strategic-merge patch of the kind hold/release make."""
    out = json.loads(json.dumps(n))
    out["spec"].update(patch["spec"])
    for k, v in patch["metadata"]["annotations"].items():
        if v is None:
            out["metadata"]["annotations"].pop(k, None)
        else:
            out["metadata"]["annotations"][k] = v
    return out


FOREIGN = {"key": ISOLATION_TAINT, "value": "ops", "effect": "NoSchedule", "timeAdded": "2026-12-01T00:00:00Z"}


def test_a_foreign_taint_with_our_key_is_neither_duplicated_nor_removed():
    before = node([FOREIGN])
    held = patched(before, hold(before, MARK, "r/1", "NoSchedule"))
    assert held["spec"]["taints"] == [FOREIGN] and held["spec"]["unschedulable"] is True
    assert json.loads(held["metadata"]["annotations"][ISOLATION_ANNOTATION]) == {
        "holders": {"r/1": "NoSchedule"}, "placed": [], "cordoned": True}
    assert patched(held, release(held, MARK, "r/1")) == before


def test_holders_stack_and_the_last_lifts_what_kilocard_placed():
    before = node(cordoned=True)
    a = patched(before, hold(before, MARK, "a/1", "NoSchedule"))
    ab = patched(a, hold(a, MARK, "b/1", "NoExecute"))
    assert hold(ab, MARK, "a/1", "NoSchedule") is None  # idempotent
    b = patched(ab, release(ab, MARK, "a/1"))
    assert [t["effect"] for t in b["spec"]["taints"]] == ["NoExecute"] and b["spec"]["unschedulable"]
    assert release(b, MARK, "a/1") is None  # already reverted
    assert patched(b, release(b, MARK, "b/1")) == before  # cordoned before: stays cordoned


def test_a_cordon_a_remediator_holds_is_left_to_it():
    before = node()
    held = patched(before, hold(before, MARK, "r/1", "NoSchedule"))
    held["metadata"]["labels"]["dgxc.nvidia.com/nvsentinel-state"] = "quarantined"
    after = patched(held, release(held, MARK, "r/1"))
    assert after["spec"]["unschedulable"] is True and after["spec"]["taints"] == []


def test_a_record_of_the_version_before_stacking_is_still_reverted():
    old = node([{"key": ISOLATION_TAINT, "value": "run-1", "effect": "NoSchedule"}, FOREIGN], cordoned=True,
               annotations={"kilocard.io/isolated-by": "run-1"})
    patch = release_legacy(old, "run-1", prior_unschedulable=False)
    assert patch == {"spec": {"taints": [FOREIGN], "unschedulable": False},
                     "metadata": {"annotations": {"kilocard.io/isolated-by": None}}}
    assert release_legacy(node([FOREIGN]), "run-1", False) is None


def test_out_of_service_neither_cordons_nor_removes_an_operators_taint():
    oos = node_out_of_service.MARK
    before = node()
    held = patched(before, hold(before, oos, "r/1", "NoExecute"))
    assert held["spec"]["taints"] == [{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown",
                                       "effect": "NoExecute"}]
    assert "unschedulable" not in hold(before, oos, "r/1", "NoExecute")["spec"]
    assert patched(held, release(held, oos, "r/1")) == before
    operators = node([{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}])
    ours = patched(operators, hold(operators, oos, "r/1", "NoExecute"))
    assert patched(ours, release(ours, oos, "r/1")) == operators
