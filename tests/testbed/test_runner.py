"""`kilocard run` against the real control plane: Chaos Toolkit's traps turned into failures, and
every fault reverted from the ledger whatever chaoslib did. Runs the CLI as a process (chaoslib's
runner owns the main thread's signals), so exit codes are the real ones."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from chaos.vocabulary import ISOLATION_TAINT
from probes import chaostoolkit
from probes.errors import ProbeError
from testbed import fleet
from tests.testbed.helpers import eventually, wait_ready

pytestmark = pytest.mark.testbed
BIG = "llama-3-70b"
KILOCARD = [sys.executable, "-m", "chaos.cli"]


def isolate(node: str) -> dict[str, Any]:
    return {"type": "action", "name": "isolate", "provider": {
        "type": "python", "module": "chaos.actions", "func": "isolate_nodes",
        "arguments": {"nodes": [node], "ttl_seconds": 120}}}


def placement(namespace: str) -> dict[str, Any]:
    return {"type": "probe", "name": "placement", "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"},
            "provider": {"type": "python", "module": "probes.chaostoolkit", "func": "placement_holds",
                         "arguments": {"model": BIG, "namespace": namespace}}}


def kilocard_run(testbed: Any, tmp_path: Path, experiment: dict[str, Any], *extra: str,
                 report: bool = False, env: dict[str, str] | None = None,
                 said: list[subprocess.CompletedProcess[str]] | None = None) -> tuple[int, dict, float]:
    """`kilocard run` of one experiment: (exit code, journal, seconds); what it printed into `said`.
    Its report (tmp_path/reports) only when asked: drawing it costs a second a run."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump({"title": "t", "description": "d", **experiment}))
    journal = tmp_path / "journal.json"
    started = time.monotonic()
    done = subprocess.run([*KILOCARD, "run", str(path), "--kubeconfig", str(testbed.paths.kubeconfig),
                           "--prometheus-url", testbed.prometheus_url, "--ledger-dir", str(tmp_path / "ledger"),
                           "--journal", str(journal), "--reports", str(tmp_path / "reports"),
                           *(() if report else ("--no-report",)), *extra],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})
    seconds = time.monotonic() - started
    assert "Traceback" not in done.stderr, done.stderr
    if said is not None:
        said.append(done)
    return done.returncode, json.loads(journal.read_text()), seconds


def isolated(kube: Any, node: str) -> bool:
    n = kube.read_node(node)
    return bool(n.spec.unschedulable) or any(t.key == ISOLATION_TAINT for t in n.spec.taints or [])


@pytest.fixture
def two_replicas(kube, pool):
    """A 70B model with two replicas on a three-node pool: the third node is free to isolate."""
    p = pool(3)
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 2}), timeout=60, say=lambda _m: None)
    used = {x.spec.node_name for x in wait_ready(kube, p.namespace, BIG, 2)}
    (free,) = set(p.node_names) - used
    return p, free


def test_a_passing_experiment_exits_0_and_reverts_its_fault(kube, testbed, tmp_path, two_replicas):
    """With the guards declared too: checked before the run, then judging the plan the action
    resolves; the fault is parsed once in all (loading, the check, the guards, the action)."""
    p, free = two_replicas
    guarded = {"name": "guards", "provider": {"type": "python", "module": "chaos.guards",
                                              "arguments": {"max_nodes": 1}}}
    code, journal, _ = kilocard_run(testbed, tmp_path, {
        "steady-state-hypothesis": {"title": "spread", "probes": [placement(p.namespace)]},
        "method": [isolate(free)], "controls": [guarded]})
    assert code == 0, journal["kilocard"]["reason"]
    assert journal["kilocard"]["reason"] == "steady state met before and after the method"
    assert [f["state"] for f in journal["kilocard"]["faults"]] == ["reverted"]
    assert journal["kilocard"]["parsed"] == {"method[0] ('isolate'): fault": 1}
    assert not isolated(kube, free)


def test_a_steady_state_not_met_before_the_method_exits_1_with_nothing_applied(kube, testbed, tmp_path,
                                                                               two_replicas):
    p, free = two_replicas
    unmet = {"type": "probe", "name": "marker-file", "tolerance": True,
             "provider": {"type": "python", "module": "os.path", "func": "exists",
                          "arguments": {"path": str(tmp_path / "absent")}}}
    code, journal, _ = kilocard_run(testbed, tmp_path, {
        "steady-state-hypothesis": {"title": "precondition", "probes": [unmet]}, "method": [isolate(free)]})
    # Plain chaos run ends this "completed" and exits 0.
    assert journal["status"] == "completed" and not journal["deviated"]
    assert code == 1 and journal["kilocard"]["reason"].startswith("steady state not met before the method")
    assert journal["kilocard"]["faults"] == [] and not isolated(kube, free)


def test_a_failed_action_exits_1_and_the_fault_before_it_is_reverted(kube, testbed, tmp_path, two_replicas):
    _p, free = two_replicas
    boom = {"type": "action", "name": "boom", "provider": {
        "type": "python", "module": "os", "func": "remove", "arguments": {"path": str(tmp_path / "absent")}}}
    code, journal, _ = kilocard_run(testbed, tmp_path, {"method": [isolate(free), boom]})
    assert journal["status"] == "completed"  # chaoslib itself does not fail the run
    assert code == 1 and journal["kilocard"]["reason"].startswith("action 'boom' failed: ")
    assert "No such file or directory" in journal["kilocard"]["reason"]
    assert [f["state"] for f in journal["kilocard"]["faults"]] == ["reverted"]  # no rollbacks declared
    assert not isolated(kube, free)


def test_a_timed_out_activity_is_cut_short_and_exits_1(kube, testbed, tmp_path, two_replicas):
    _p, free = two_replicas
    hang = {"type": "action", "name": "hang", "timeout": 2, "provider": {
        "type": "python", "module": "subprocess", "func": "run", "arguments": {"args": ["sleep", "60"]}}}
    code, journal, seconds = kilocard_run(testbed, tmp_path, {"method": [isolate(free), hang]})
    assert code == 1 and "'hang' failed" in journal["kilocard"]["reason"], journal["kilocard"]["reason"]
    assert "timed out after 2 s" in journal["kilocard"]["reason"]
    assert seconds < 30  # not the minute the activity asked for
    assert not isolated(kube, free)


def test_a_selector_that_matches_nothing_is_invalid_and_nothing_is_applied(kube, testbed, tmp_path, two_replicas):
    p, free = two_replicas
    nothing = {"type": "action", "name": "kill", "provider": {
        "type": "python", "module": "chaos.actions", "func": "apply_fault", "arguments": {"fault": {
            "kind": "pod-kill", "namespace": p.namespace, "label_selector": "kilocard.io/model=no-such-model"}}}}
    code, journal, _ = kilocard_run(testbed, tmp_path, {"method": [isolate(free), nothing]})
    assert code == 2
    assert "method[1] ('kill'): fault: no targets: the selectors match nothing" in journal["kilocard"]["reason"]
    assert not isolated(kube, free)  # the first action never ran either
    assert not (tmp_path / "ledger").exists() or not any((tmp_path / "ledger").iterdir())


def test_a_guard_refuses_a_run_that_would_leave_a_model_no_ready_replica(kube, testbed, tmp_path, two_replicas):
    p, _free = two_replicas
    before = {x.metadata.uid for x in wait_ready(kube, p.namespace, BIG, 2)}
    kill_all = {"type": "action", "name": "kill-all", "provider": {
        "type": "python", "module": "chaos.actions", "func": "kill_pods",
        "arguments": {"namespace": p.namespace, "label_selector": f"kilocard.io/model={BIG}", "count": 2}}}
    code, journal, _ = kilocard_run(testbed, tmp_path, {"method": [kill_all]})
    assert code == 2
    assert (f"guard: min_ready: model {BIG} in {p.namespace} would keep 0 Ready replicas of 2, under the guard's "
            "min_ready 1") in journal["kilocard"]["reason"]
    assert {x.metadata.uid for x in wait_ready(kube, p.namespace, BIG, 2)} == before  # nothing was killed
    # Declared as the experiment's control, the limit is the experiment's own.
    allowed = {"method": [kill_all], "controls": [{"name": "guards", "provider": {
        "type": "python", "module": "chaos.guards", "arguments": {"min_ready": 0}}}]}
    code, journal, _ = kilocard_run(testbed, tmp_path, allowed)
    assert code == 0, journal["kilocard"]["reason"]


@pytest.mark.long(120)
def test_a_guard_refuses_mid_run_an_action_the_cluster_has_made_unsafe_since_the_plan(kube, pool, testbed, tmp_path):
    """The negative twin of the guards' control: one cause changed between the pre-run check and
    the action. Killing replica A leaves B Ready when the run starts (allowed); while the first
    action pauses, B is lost behind the run's back, so the kill the second action resolves would
    leave no Ready replica: refused mid-run, nothing of it applied, exit 3 with the guard's reason,
    and the first action's fault reverted."""
    import threading

    from testbed import timing

    p = pool(3)  # replicas take their default start-up: B's replacement is not Ready when A's kill is judged
    fleet.deploy(kube, timing.stamp(p.fleet(BIG, replicas={BIG: 2}), "default"), timeout=90, say=lambda _m: None)
    a, b = sorted(wait_ready(kube, p.namespace, BIG, 2, timeout=90), key=lambda x: x.metadata.name)
    (free,) = set(p.node_names) - {a.spec.node_name, b.spec.node_name}
    first = {**isolate(free), "pauses": {"after": 8}}
    kill_a = {"type": "action", "name": "kill-a", "provider": {
        "type": "python", "module": "chaos.actions", "func": "apply_fault", "arguments": {"fault": {
            "kind": "pod-kill", "namespace": p.namespace, "field_selector": f"metadata.name={a.metadata.name}"}}}}
    guarded = {"controls": [{"name": "guards", "provider": {"type": "python", "module": "chaos.guards",
                                                             "arguments": {"min_ready": 1}}}]}

    def lose_b_once_the_run_is_under_way() -> None:
        deadline = time.monotonic() + 60
        while not isolated(kube, free) and time.monotonic() < deadline:
            time.sleep(0.2)
        kube.delete_pod(p.namespace, b.metadata.name, grace_seconds=0)

    behind = threading.Thread(target=lose_b_once_the_run_is_under_way, daemon=True)
    behind.start()
    code, journal, _ = kilocard_run(testbed, tmp_path, {"method": [first, kill_a], **guarded})
    behind.join()
    reason = journal["kilocard"]["reason"]
    assert code == 3, reason
    assert reason.startswith("refused mid-run by a guard: activity 'kill-a': guard: min_ready: "
                             f"model {BIG} in {p.namespace} would keep 0 Ready replicas"), reason
    assert [f["kind"] for f in journal["kilocard"]["faults"]] == ["node-isolate"]  # nothing of the kill
    assert [f["state"] for f in journal["kilocard"]["faults"]] == ["reverted"] and not isolated(kube, free)
    assert kube.read_pod(p.namespace, a.metadata.name).metadata.uid == a.metadata.uid  # A was never killed


def test_a_namespace_that_has_not_opted_in_is_refused(kube, testbed, tmp_path, two_replicas):
    p, _free = two_replicas
    kube.core.patch_namespace(p.namespace, {"metadata": {"labels": {"kilocard.io/chaos": None}}})
    kill_one = {"type": "action", "name": "kill", "provider": {
        "type": "python", "module": "chaos.actions", "func": "kill_pods",
        "arguments": {"namespace": p.namespace, "label_selector": f"kilocard.io/model={BIG}"}}}
    code, journal, _ = kilocard_run(testbed, tmp_path, {"method": [kill_one]})
    assert code == 2
    assert (f"guard: namespace {p.namespace} has not opted in to chaos (label it kilocard.io/chaos=enabled)"
            in journal["kilocard"]["reason"])
    assert len(wait_ready(kube, p.namespace, BIG, 2)) == 2


def test_a_stop_condition_aborts_the_run_reverts_and_exits_3(kube, pool, testbed, tmp_path):
    from testbed import timing

    p = pool(3)  # replicas take their default start-up: "no Ready replica" lasts long enough to see
    fleet.deploy(kube, timing.stamp(p.fleet(BIG, replicas={BIG: 2}), "default"), timeout=90, say=lambda _m: None)
    used = {x.spec.node_name for x in wait_ready(kube, p.namespace, BIG, 2, timeout=90)}
    (free,) = set(p.node_names) - used
    kill_all = {"type": "action", "name": "kill-all", "pauses": {"after": 90}, "provider": {
        "type": "python", "module": "chaos.actions", "func": "kill_pods",
        "arguments": {"namespace": p.namespace, "label_selector": f"kilocard.io/model={BIG}", "count": 2}}}
    code, journal, seconds = kilocard_run(testbed, tmp_path, {
        "method": [isolate(free), kill_all],
        "controls": [{"name": "guards", "provider": {"type": "python", "module": "chaos.guards",
                                                      "arguments": {"min_ready": 0}}},
                     {"name": "stop", "provider": {"type": "python", "module": "chaos.stop", "arguments": {
                         "every_seconds": 0.5,
                         "conditions": [{"kind": "zero-ready", "model": BIG, "namespace": p.namespace}]}}}]})
    assert code == 3, journal["kilocard"]["reason"]
    assert journal["kilocard"]["reason"] == (f"stop condition fired: zero-ready {BIG} in {p.namespace}: "
                                             "no Ready replica left")
    assert seconds < 60  # cut short, not the 90 s pause
    assert [f["state"] for f in journal["kilocard"]["faults"] if f["kind"] == "node-isolate"] == ["reverted"]
    assert not isolated(kube, free)


def test_the_unhealthy_and_slo_stop_conditions_fire_on_what_they_watch(kube, testbed, tmp_path, two_replicas):
    p, _free = two_replicas

    def stopped_by(condition: dict[str, Any], method: list[dict[str, Any]], name: str) -> dict[str, Any]:
        method[-1]["pauses"] = {"after": 60}
        code, journal, seconds = kilocard_run(testbed, tmp_path / name, {"method": method, "controls": [
            {"name": "stop", "provider": {"type": "python", "module": "chaos.stop", "arguments": {
                "every_seconds": 0.5, "conditions": [{"model": BIG, "namespace": p.namespace, **condition}]}}}]})
        assert code == 3 and seconds < 45, (name, journal["kilocard"]["reason"])
        assert {f["state"] for f in journal["kilocard"]["faults"]} <= {"reverted"}, journal["kilocard"]["faults"]
        return journal["kilocard"]

    # Every node of the pool cordoned, then a replica killed: its replacement stays Pending.
    cordon = {"type": "action", "name": "cordon-pool", "provider": {
        "type": "python", "module": "chaos.actions", "func": "isolate_nodes",
        "arguments": {"node_selector": f"kilocard.io/pool={p.name}", "count": 3, "ttl_seconds": 120}}}
    kill = {"type": "action", "name": "kill-one", "provider": {
        "type": "python", "module": "chaos.actions", "func": "kill_pods",
        "arguments": {"namespace": p.namespace, "label_selector": f"kilocard.io/model={BIG}", "count": 1}}}
    k = stopped_by({"kind": "unhealthy", "max": 0}, [cordon, kill], "unhealthy")
    assert k["reason"].startswith(f"stop condition fired: unhealthy {BIG} in {p.namespace} > 0: 1 not Ready"), k

    assert not any(isolated(kube, n) for n in p.node_names)
    wait_ready(kube, p.namespace, BIG, 2)
    # The condition's 5 s window must hold a measure of both replicas (the replacement included)
    # before the fault, or it fires on "no series": the cause under test is the sick card alone.
    cfg = {"kilocard_kubeconfig": str(testbed.paths.kubeconfig), "kilocard_prometheus_url": testbed.prometheus_url}

    def measured() -> bool:
        try:
            return chaostoolkit.slo_under(BIG, threshold=0.5, namespace=p.namespace, window="5s",
                                          configuration=cfg)["verdict"] == "ok"
        except ProbeError:  # a fresh pool's series not scraped yet: no such metric so far
            return False

    assert eventually(measured, 90)
    # One card at a quarter speed: the sick replica's P95 passes the hard limit.
    sick = wait_ready(kube, p.namespace, BIG, 2)[0].spec.node_name
    ecc = {"type": "action", "name": "ecc", "provider": {
        "type": "python", "module": "chaos.actions", "func": "inject_ecc",
        "arguments": {"nodes": [sick], "cards": [0], "speed": 0.25, "ttl_seconds": 120}}}
    k = stopped_by({"kind": "slo", "limit": 0.5, "window": "5s"}, [ecc], "slo")
    # A measured breach, on the sick replica: not "no series" (missing data fires too, for another reason).
    assert re.match(rf"stop condition fired: slo ttft_p95 {BIG} in {p.namespace} > 0.5: {BIG}-\S+ at \d", k["reason"]), k


def test_errors_only_the_cluster_can_find_write_nothing_as_the_audit_log_shows(kube, testbed, tmp_path,
                                                                               two_replicas):
    from testbed import audit

    p, free = two_replicas
    since = time.time()
    bad = {
        "no targets": ({"kind": "pod-kill", "namespace": p.namespace, "label_selector": "kilocard.io/model=nope"},
                       "no targets: the selectors match nothing"),
        "no such node": ({"kind": "node-isolate", "nodes": ["gpu-that-is-not"], "ttl_seconds": 60},
                         "nodes: no such node: gpu-that-is-not"),
        "card out of range": ({"kind": "gpu-ecc", "nodes": [free], "card": 9, "ttl_seconds": 60},
                              f"card: node {free} has cards 0-7"),
        "guard": ({"kind": "pod-kill", "namespace": p.namespace, "label_selector": f"kilocard.io/model={BIG}",
                   "percent": 100}, "guard: min_ready"),
        # Each blast-radius limit, on this cluster's figures (4 nodes of the testbed's own, 3 of the pool).
        "max_pods": ({"kind": "pod-kill", "namespace": p.namespace, "label_selector": f"kilocard.io/model={BIG}",
                      "count": 2}, "guard: blast radius: the run would disrupt 2 pods, over the guard's max_pods 1",
                     {"max_pods": 1, "min_ready": 0}),
        "max_nodes": ({"kind": "node-isolate", "node_selector": "kilocard.io/testbed=true", "percent": 100,
                       "ttl_seconds": 60},
                      "nodes, over the guard's max_nodes 4"),  # how many: the testbed's 4 and the pools there
        "max_cards": ({"kind": "card-isolate", "nodes_of": {"namespace": p.namespace,
                                                            "label_selector": f"kilocard.io/model={BIG}"},
                       "percent": 100, "card": 0, "ttl_seconds": 60},
                      "guard: blast radius: the run would disrupt 16 cards, over the guard's max_cards 8",
                      {"max_cards": 8, "min_ready": 0, "room": False}),
    }
    for name, (fault, message, *limits) in bad.items():
        action = {"type": "action", "name": "bad", "provider": {
            "type": "python", "module": "chaos.actions", "func": "apply_fault", "arguments": {"fault": fault}}}
        guarded = {"controls": [{"name": "guards", "provider": {"type": "python", "module": "chaos.guards",
                                                                "arguments": limits[0]}}]} if limits else {}
        code, journal, _ = kilocard_run(testbed, tmp_path / name.replace(" ", "-"),
                                        {"method": [isolate(free), action], **guarded})
        assert code == 2 and message in journal["kilocard"]["reason"], (name, journal["kilocard"]["reason"])
    corpus = Path(__file__).parents[1] / "experiments" / "invalid"
    done = subprocess.run([*KILOCARD, "run", str(corpus), "--kubeconfig", str(testbed.paths.kubeconfig),
                           "--ledger-dir", str(tmp_path / "ledger"), "--journal", str(tmp_path / "journals"),
                           "--no-report"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr
    # Every file is checked before any runs: the folder is refused at once, each broken file named.
    assert all(str(path) in done.stderr for path in corpus.glob("*.yaml")), done.stderr[-2000:]
    assert not (tmp_path / "journals").exists()
    ours = [w for w in audit.writes(testbed.paths.audit_log, since) if w.user_agent.endswith("(toolkit)")]
    assert ours == []
    # The audit log does see kilocard's writes: a valid run of the same fault leaves them there.
    # Run quiet (one line: its verdict) and verbose (Chaos Toolkit's own log on stderr).
    said: list[subprocess.CompletedProcess[str]] = []
    code, _journal, _ = kilocard_run(testbed, tmp_path / "valid", {"method": [isolate(free)]}, "-q", said=said)
    assert code == 0
    lines = said[0].stdout.splitlines()
    assert lines[0].startswith(f"{tmp_path / 'valid' / 'experiment.yaml'}: passed (exit 0): "), lines
    assert [line.split()[0] for line in lines[1:]] == ["journal"], lines  # no live view, no summary table
    code, _journal, _ = kilocard_run(testbed, tmp_path / "verbose", {"method": [isolate(free)]}, "-v", said=said)
    assert code == 0 and " chaostoolkit INFO Running experiment: t" in said[1].stderr, said[1].stderr
    ours = [w for w in audit.writes(testbed.paths.audit_log, since) if w.user_agent.endswith("(toolkit)")]
    assert any(w.resource == "nodes" and w.name == free and w.verb == "patch" for w in ours), ours


def test_a_context_outside_the_allowlist_is_refused(kube, testbed, tmp_path, two_replicas):
    _p, free = two_replicas
    guarded = {"method": [isolate(free)], "controls": [{"name": "guards", "provider": {
        "type": "python", "module": "chaos.guards", "arguments": {"contexts": ["staging"]}}}]}
    code, journal, _ = kilocard_run(testbed, tmp_path, guarded)
    assert code == 2
    assert "guard: context: kilocard-testbed is not one of the guard's contexts staging" in journal["kilocard"]["reason"]
    assert not isolated(kube, free)


def test_plan_of_an_experiment_shows_targets_and_blast_radius_and_changes_nothing(kube, testbed, tmp_path,
                                                                                  two_replicas):
    p, free = two_replicas
    before = {x.metadata.uid for x in wait_ready(kube, p.namespace, BIG, 2)}
    kill_one = {"type": "action", "name": "kill-one", "provider": {
        "type": "python", "module": "chaos.actions", "func": "kill_pods",
        "arguments": {"namespace": "${ns}", "label_selector": f"kilocard.io/model={BIG}", "seed": 1}}}
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump({"title": "t", "description": "d", "method": [isolate(free), kill_one]}))
    done = subprocess.run([*KILOCARD, "plan", "-e", str(path), "--var", f"ns={p.namespace}",
                           "--kubeconfig", str(testbed.paths.kubeconfig)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "method[0] ('isolate'): fault: node-isolate on 1 target(s), ttl 120 s" in done.stdout
    assert "blast radius: 1 pods, 1 nodes, 8 cards" in done.stdout
    assert f"{p.namespace}/{BIG}: 2 Ready replicas now, 1 once the faults land" in done.stdout
    assert {x.metadata.uid for x in wait_ready(kube, p.namespace, BIG, 2)} == before and not isolated(kube, free)


def test_a_link_limit_that_comes_and_goes_three_times_is_applied_and_reverted_three_times(kube, testbed, tmp_path,
                                                                                           two_replicas):
    """A flapping link: the same fault on the same node in three windows that do not overlap is
    one plan, each window applied at its time and reverted at its end, though two of that kind
    cannot hold one node at once (one root qdisc); windows that overlap are refused before
    anything is applied."""
    from chaos.agent.client import AgentClient

    p, free = two_replicas
    limit = {"kind": "network-bandwidth", "nodes": [free], "params": {"rate_mbit": 100}, "ttl_seconds": 60}

    def flapping(*windows: tuple[float, float]) -> dict[str, Any]:
        return {"method": [{"type": "action", "name": "flap", "provider": {
            "type": "python", "module": "chaos.actions", "func": "replay_timeline",
            "arguments": {"timeline": [{"at": at, "for": hold, "fault": limit} for at, hold in windows],
                          "observe": 1}}}]}

    code, journal, _ = kilocard_run(testbed, tmp_path / "overlapping", flapping((0, 4), (6, 3), (8, 3)))
    assert code == 2, journal["kilocard"]["reason"]
    assert f"{free} {{}} cannot stack with method[0] ('flap'): fault[1] of this plan" in journal["kilocard"]["reason"]
    assert not journal["kilocard"].get("faults")  # refused before anything was applied

    code, journal, _ = kilocard_run(testbed, tmp_path / "flapping", flapping((0, 3), (5, 3), (10, 3)))
    assert code == 0, journal["kilocard"]["reason"]
    played = journal["run"][0]["output"]
    print(json.dumps(played))
    faults = sorted(journal["kilocard"]["faults"], key=lambda f: f["applied_at"])
    assert [(f["kind"], f["target"]["node"], f["state"]) for f in faults] == [("network-bandwidth", free, "reverted")] * 3
    # Each window reverted before the next was applied, each at its time.
    for i, (at, until) in enumerate([(0, 3), (5, 8), (10, 13)]):
        assert at <= played[i]["applied_after"] < at + 1.5 and until <= played[i]["reverted_after"] < until + 1.5, played
        if i:
            assert played[i - 1]["reverted_after"] < played[i]["applied_after"], played
    agents = AgentClient(kube)
    assert agents.list(agents.endpoint(free)) == []
