"""plan.execute_one with a kind that applies to every target at once (pod-kill's DELETEs): each
target's outcome lands on its own record, a failed call fails every target, and evictions still
go one by one."""

from chaos import ledger, plan
from chaos.errors import KubeError, NotFound
from chaos.faults import Context, pod_kill


class FakeKube:
    """Records the bulk call; `outcomes` is what the apiserver said per pod."""

    def __init__(self, outcomes=None, error=None):
        self.outcomes, self.error, self.bulk, self.single, self.listed = outcomes, error, [], [], []

    def delete_pods(self, pods, grace_seconds=None):
        if self.error:
            raise self.error
        self.bulk.append((pods, grace_seconds))
        return self.outcomes

    def evict_pod(self, namespace, name, uid=None, grace_seconds=None):
        self.single.append(name)

    def list_pods_raw(self, namespace, label_selector, field_selector, metadata_only=False):
        self.listed.append((namespace, label_selector, field_selector, metadata_only))
        return []  # the read-back after the kill: every pod is gone

    def batch(self, fn, items):
        return [fn(x) for x in items]


def planned(kube, mode="delete", n=3):
    _module, spec = plan.parse({"kind": "pod-kill", "namespace": "ns", "label_selector": "a=b", "mode": mode,
                                "grace_seconds": 0}, "fault")
    records = [ledger.Record(run_id="r1", fault_id=f"f{i}", kind="pod-kill", expires_at="", undo={"fault_id": f"f{i}"},
                             target={"namespace": "ns", "name": f"p{i}", "uid": f"u{i}", "node": "n"})
               for i in range(n)]
    return Context(kube, None, "r1", say=lambda _m: None), plan.Planned("fault", pod_kill, spec, records)


def test_every_delete_goes_in_one_call_and_each_outcome_lands_on_its_record(tmp_path):
    kube = FakeKube([None, NotFound("gone already", status=404), KubeError("refused", status=403)])
    ctx, fault = planned(kube)
    done = plan.execute_one(ctx, ledger.Ledger("r1", None, tmp_path), fault)
    assert kube.bulk == [([("ns", "p0", "u0"), ("ns", "p1", "u1"), ("ns", "p2", "u2")], 0)]
    assert [r.state for r in done.records] == ["reverted", "reverted", "failed"]  # already gone counts as done
    assert "refused" in done.records[2].error
    # Read back with the query that chose them, once, metadata only; the failed target is not looked at.
    assert kube.listed == [("ns", "a=b", None, True)]
    assert [r.landed.get("status") for r in done.records] == ["confirmed", "confirmed", None]
    assert all(r.applied_at for r in done.records[:2]) and not done.records[2].applied_at
    # The ledger on disk has the outcome of each target, after the record of all of them.
    history = ledger.transitions(tmp_path / "r1.jsonl")
    assert [[t["state"] for t in history[f"f{i}"]] for i in range(3)] == [
        ["recorded", "reverted"], ["recorded", "reverted"], ["recorded", "failed"]]


def test_a_bulk_call_that_raised_fails_every_target_it_may_have_touched(tmp_path):
    ctx, fault = planned(FakeKube(error=RuntimeError("connection pool broke")))
    done = plan.execute_one(ctx, ledger.Ledger("r1", None, tmp_path), fault)
    assert {r.state for r in done.records} == {"failed"}
    assert all("unexpected RuntimeError: connection pool broke" in r.error for r in done.records)


def test_evictions_go_one_by_one(tmp_path):
    kube = FakeKube()
    ctx, fault = planned(kube, mode="evict")
    done = plan.execute_one(ctx, ledger.Ledger("r1", None, tmp_path), fault)
    assert kube.bulk == [] and kube.single == ["p0", "p1", "p2"]
    assert {r.state for r in done.records} == {"reverted"}
