"""R4: the control plane and kilocard's dependencies fail in the middle of an experiment, on a
testbed of the module's own (its apiserver, etcd and Prometheus are stopped and started under the
run): the apiserver, and etcd, killed and started again, an apiserver that answers 429 (a tiny
--max-requests-inflight, the runner as its least-privilege ServiceAccount), Prometheus stopped,
a node agent killed and restarted as its DaemonSet would.

Each time the runner retries (the journal counts them, by cause), the ledger holds every
transition, and every fault is reverted: the cluster is compared field by field with how it was.
A probe that cannot get data says "unknown" and fails; a stop condition that cannot look fires.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from chaos import ledger
from chaos.agent.client import AgentClient
from chaos.kube import Kube, node_ready
from chaos.vocabulary import ISOLATION_TAINT, LEDGER_LABEL
from testbed import fleet, nodes
from testbed import steady as steady_state
from testbed.cluster import Testbed
from testbed.config import TestbedConfig
from tests import figures
from tests.netns.netns import Pair, free_port, start_agent, veth_pair
from tests.testbed.conftest import PORT_BASE
from tests.testbed.helpers import (
    apply_deploy,
    eventually,
    ready_pods,
    service_account_kubeconfig,
    settled,
    steady,
    wait_ready,
)

pytestmark = [pytest.mark.testbed, pytest.mark.long(140)]  # all, together (a module-scoped fixture)
MODEL, NAMESPACE = "llama-3-70b", "kc-control-plane"
RUNNER = ("kilocard-system", "kilocard-runner")
# The controller manager's mirrors of a node's state (its cordon, its Ready condition): the spec
# and the condition are compared; how soon it catches up after a crash of its etcd is not ours.
DERIVED_TAINTS = ("node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready",
                  "node.kubernetes.io/unreachable")


class Stage:
    """The module's testbed: four nodes, two TP=8 replicas (required anti-affinity) on two of
    them, and a fifth node served by the real agent on a veth pair in network namespaces."""

    def __init__(self, tb: Testbed, kube: Kube, pair: Pair, agent_argv: list[str]) -> None:
        self.tb, self.kube, self.pair, self.agent_argv = tb, kube, pair, agent_argv
        self.agent = start_agent(agent_argv)
        used = {p.spec.node_name for p in wait_ready(kube, NAMESPACE, MODEL, 2, timeout=90)}
        self.spare = sorted({n.metadata.name for n in kube.list_nodes()} - used - {REAL})
        self.free = self.spare[0]

    def before(self) -> dict[str, Any]:
        """The cluster as a run finds it: every node Ready, both replicas Ready and serving
        (Prometheus has their P95: an SLO check then has data to lose), every controller caught
        up. An earlier test's control-plane outage (a restart, 429s) can lapse the nodes' leases:
        seconds later the node controller marks the replicas NotReady, until kwok renews them. A
        fingerprint taken then has no Ready replica: waited out, never taken as the start."""
        deadline = time.monotonic() + 120
        while True:
            assert eventually(lambda: all(node_ready(n) for n in self.kube.list_nodes()), 60)
            wait_ready(self.kube, NAMESPACE, MODEL, 2, timeout=60)
            steady_state.wait(self.kube, self.tb.prometheus_url, [NAMESPACE], steady_state.TIMEOUT, say=lambda _m: None)
            found = steady(self.fingerprint, interval=1)
            if found["ready"] == 2:
                return found
            assert time.monotonic() < deadline, f"the stage did not settle: {found['ready']} of 2 replicas Ready"

    def fingerprint(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for n in self.kube.list_nodes_raw():
            taints = [t for t in n["spec"].get("taints") or [] if t["key"] not in DERIVED_TAINTS]
            found[n["metadata"]["name"]] = (n["spec"].get("unschedulable"), taints,
                                            n["metadata"].get("annotations"), n["status"]["allocatable"])
        agents = AgentClient(self.kube)
        found["agents"] = {n: agents.list(agents.endpoint(n)) for n in (self.free, REAL)}
        found["qdisc"] = self.pair.qdisc().split()[:2]
        found["nft"] = self.pair.nft_tables()
        found["markers"] = [c["metadata"]["name"] for c in self.kube.list_config_maps("kilocard-system",
                                                                               f"{LEDGER_LABEL}=true")]
        found["ready"] = len(ready_pods(self.kube, NAMESPACE, MODEL))
        return found


REAL = "real-agent-node"


@pytest.fixture(scope="module")
def stage(tmp_path_factory) -> Iterator[Stage]:
    root = tmp_path_factory.mktemp("control-plane")
    tb = Testbed(TestbedConfig(nodes=4, port_base=PORT_BASE + 140, state_dir=root / "state").validate())
    tb.up(say=lambda _m: None, timeout=180)
    kube = tb.kube()
    try:
        apply_deploy(kube, "namespace.yaml", "rbac-runner.yaml")
        objects = fleet.scaled(fleet.only(fleet.load("default", tb.config.card_resource, namespace=NAMESPACE),
                                          MODEL), {MODEL: 2})
        fleet.deploy(kube, objects, timeout=90, say=lambda _m: None)
        with veth_pair() as pair:
            port = free_port()
            argv = [sys.executable, "-m", "chaos.agent", "--plaintext", "--listen", f"127.0.0.1:{port}", "--token-file",
                    str(tb.paths.agent_token), "--interface", pair.veth_a, "--state-file", str(root / "agent.json")]
            real = nodes.node_manifest(9, tb.config, prefix="real")
            real["metadata"]["name"] = REAL
            real["metadata"]["annotations"][nodes.AGENT_ANNOTATION] = f"http://127.0.0.1:{port}"
            real["spec"]["taints"] = [{"key": "kilocard.io/real-agent", "effect": "NoSchedule"}]
            kube.create_node(real)
            s = Stage(tb, kube, pair, argv)
            try:
                yield s
            finally:
                s.agent.terminate()
                s.agent.wait(timeout=30)
    finally:
        kube.close()
        tb.down(say=lambda _m: None)


def experiment(stage: Stage, pause: float, *, slo_probe: bool = False, stop_condition: bool = False,
               network: bool = True, wide: bool = False) -> dict[str, Any]:
    """Isolate the free node (`wide`: both free nodes) and drop an SBE on one of its cards (the
    simulator's agent), partition the real agent's namespace; hold them `pause` s; then look at the
    replicas' placement (and, with `slo_probe`, their P95 TTFT)."""
    def fault(name: str, spec: dict[str, Any], after: float = 0) -> dict[str, Any]:
        return {"type": "action", "name": name, **({"pauses": {"after": after}} if after else {}),
                "provider": {"type": "python", "module": "chaos.actions", "func": "apply_fault",
                             "arguments": {"fault": {**spec, "ttl_seconds": 300}}}}

    def probe(name: str, func: str, **arguments: Any) -> dict[str, Any]:
        return {"type": "probe", "name": name, "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"},
                "provider": {"type": "python", "module": "probes.chaostoolkit", "func": func,
                             "arguments": {"model": MODEL, "namespace": NAMESPACE, **arguments}}}

    isolated = stage.spare if wide else [stage.free]
    method = [fault("isolate", {"kind": "node-isolate", "nodes": isolated}),
              fault("ecc", {"kind": "gpu-ecc", "nodes": [stage.free], "card": 0, "params": {"type": "sbe"}})]
    if network:
        method.append(fault("partition", {"kind": "network-partition", "nodes": [REAL], "netns": stage.pair.a}))
    method[-1]["pauses"] = {"after": pause}
    method.append(probe("placement", "placement_holds"))
    if slo_probe:
        method.append(probe("ttft", "slo_recovered_within", budget=10, threshold=0.5, hold=3,
                            expect_impact=False, window="10s"))
    steady_state = [probe("spread", "placement_holds")]
    if slo_probe or stop_condition:  # the data is there before Prometheus goes
        steady_state.append(probe("serving", "slo_under", threshold=5.0, window="10s"))
    data: dict[str, Any] = {"title": "a control-plane fault under a run", "description": "R4", "method": method,
                            "steady-state-hypothesis": {"title": "spread", "probes": steady_state}}
    if stop_condition:
        data["controls"] = [{"name": "stop-conditions", "provider": {
            "type": "python", "module": "chaos.stop", "arguments": {"every_seconds": 1, "conditions": [
                {"kind": "slo", "model": MODEL, "namespace": NAMESPACE, "indicator": "ttft_p95", "limit": 5.0,
                 "window": "10s"}]}}}]
    return data


def run_with(stage: Stage, tmp: Path, data: dict[str, Any], during: Callable[[], None] | None = None,
             kubeconfig: Path | None = None) -> tuple[int, dict[str, Any]]:
    """`kilocard run`; `during` runs in a thread once the run's last fault is applied (the ledger
    file says so). Returns the exit code and the journal."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "experiment.yaml").write_text(yaml.safe_dump(data))
    proc = subprocess.Popen(
        [sys.executable, "-m", "chaos.cli", "run", str(tmp / "experiment.yaml"), "--kubeconfig",
         str(kubeconfig or stage.tb.paths.kubeconfig), "--prometheus-url", stage.tb.prometheus_url,
         "--ledger-dir", str(tmp / "ledger"), "--journal", str(tmp / "journal.json"), "--no-report"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker = None
    if during is not None:
        faults = sum(1 for a in data["method"] if a["type"] == "action")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            books = list((tmp / "ledger").glob("*.jsonl"))
            if books and sum(s["state"] == "applied" for t in ledger.transitions(books[0]).values()
                             for s in t) >= faults:
                break
            time.sleep(0.1)
        worker = threading.Thread(target=during)
        worker.start()
    out, err = proc.communicate(timeout=300)
    if worker is not None:
        worker.join(timeout=120)
    assert "Traceback" not in err, err
    return proc.returncode, json.loads((tmp / "journal.json").read_text())


def outage(stage: Stage, component: str, seconds: float, after: float,
           window: dict[str, float]) -> Callable[[], None]:
    """Crash `component` `after` s (SIGKILL: down at once, not after a graceful drain) and start
    it `seconds` later; `window` gets when it went down and when it was started again."""
    def go() -> None:
        time.sleep(after)
        stage.tb.stop_component(component, grace=0)
        window["down"] = time.time()
        time.sleep(seconds)
        window["restarted"] = time.time()
        stage.tb.start_component(component)
    return go


def when(run: dict[str, Any], end: str) -> float:
    return dt.datetime.fromisoformat(run[end]).timestamp()


def measured(fault: str, code: int, journal: dict[str, Any], **extra: Any) -> None:
    """The figure for docs/reliability.md (recorded before any assertion): the exit, the runner's
    retries by cause, its faults and how many of them the ledger says were reverted."""
    faults = journal["kilocard"]["faults"]
    figures.record("control-plane", {"fault": fault, "exit": code, "retries": journal["kilocard"]["api_retries"],
                                     "faults": len(faults), "reverted": sum(f["state"] == "reverted" for f in faults),
                                     **extra})


def without_prometheus(stage: Stage, tmp: Path, **shape: Any) -> tuple[int, dict[str, Any]]:
    """A run whose Prometheus is stopped once its faults are applied (started again after)."""
    try:
        return run_with(stage, tmp, experiment(stage, network=False, **shape),
                        during=lambda: stage.tb.stop_component("prometheus"))
    finally:
        stage.tb.start_component("prometheus")


def reverted_in_order(journal: dict[str, Any]) -> None:
    """The ledger holds every transition of every fault: recorded, applied, reverted."""
    faults = journal["kilocard"]["faults"]
    assert faults and all(f["state"] == "reverted" for f in faults), faults
    for f in faults:
        assert [t["state"] for t in f["transitions"]] == ["recorded", "applied", "reverted"], f
    assert journal["kilocard"]["left"] == []


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
def test_a_restart_under_the_run_is_ridden_out_and_every_fault_reverted(stage, tmp_path, component):
    before = stage.before()
    window: dict[str, float] = {}
    # Down from 1 s to 5 s after the faults: the pause ends at 2 s, so the placement probe's
    # LISTs and then the revert go to a control plane that is not there.
    code, journal = run_with(stage, tmp_path, experiment(stage, pause=2),
                             during=outage(stage, component, 4, 1.0, window))
    (placed,) = [r for r in journal["run"] if r["activity"]["name"] == "placement"]
    waited = round(when(placed, "end") - when(placed, "start"), 1)
    measured(f"{component} killed, started again 4 s later", code, journal, probe_waited_seconds=waited)
    assert code == 0, journal["kilocard"]["reason"]
    # The outage met the run: its probe asked while the component was down.
    assert window["down"] <= when(placed, "start") <= window["restarted"], (window, placed)
    if component == "kube-apiserver":
        # It got its answer only once the apiserver was back (its absence as retried connections).
        assert window["restarted"] <= when(placed, "end"), (window, placed)
        assert journal["kilocard"]["api_retries"].get("connection", 0) > 0, journal["kilocard"]["api_retries"]
    # With etcd down the snapshot's lists (resourceVersion=0) are served from the apiserver's watch
    # cache, which no write can have changed meanwhile: the answer may come during the outage.
    reverted_in_order(journal)
    assert settled(stage.fingerprint, before, timeout=60) == {}


def test_429s_from_a_tiny_max_requests_inflight_are_retried_as_the_runner_service_account(stage, tmp_path):
    before = stage.before()
    kubeconfig = service_account_kubeconfig(stage.tb, stage.kube, *RUNNER, tmp_path / "runner.kubeconfig")
    # One request in flight at a time for everyone but system:masters (the testbed's own
    # components): the runner, and a neighbour with the same account that keeps asking without
    # retrying, as a busy cluster's other clients would.
    tiny = ("--enable-priority-and-fairness=false", "--max-requests-inflight=1", "--max-mutating-requests-inflight=1")
    stage.tb.stop_component("kube-apiserver")
    stage.tb.start_component("kube-apiserver", tiny)
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    busy, answers = threading.Event(), collections.Counter()

    def neighbour() -> None:
        with requests.Session() as http:
            while not busy.is_set():
                reply = http.get(f"https://127.0.0.1:{stage.tb.config.ports.apiserver}/api/v1/nodes",
                                 headers={"Authorization": f"Bearer {token}"}, verify=str(stage.tb.pki.ca_cert))
                answers[reply.status_code] += 1
                time.sleep(0.02)
    crowd = [threading.Thread(target=neighbour) for _ in range(2)]
    for t in crowd:
        t.start()
    try:  # both free nodes at once: the runner's own batched calls meet the limit too
        code, journal = run_with(stage, tmp_path, experiment(stage, pause=2, wide=True), kubeconfig=kubeconfig)
    finally:
        busy.set()
        for t in crowd:
            t.join(timeout=60)
        stage.tb.stop_component("kube-apiserver")
        stage.tb.start_component("kube-apiserver")
    retries = journal["kilocard"]["api_retries"]
    measured("429s (max-requests-inflight 1, runner ServiceAccount)", code, journal,
             neighbour_refused=answers[429], neighbour_answered=answers[200])
    assert answers[429] > 0, answers  # the limit bit
    assert code == 0, journal["kilocard"]["reason"]
    assert retries.get("429", 0) > 0, retries
    reverted_in_order(journal)
    assert settled(stage.fingerprint, before, timeout=60) == {}


def test_prometheus_stopped_makes_the_slo_probe_unknown_never_a_pass(stage, tmp_path):
    before = stage.before()
    code, journal = without_prometheus(stage, tmp_path, pause=1, slo_probe=True)
    (ttft,) = [r for r in journal["run"] if r["activity"]["name"] == "ttft"]
    measured("Prometheus stopped (SLO probe)", code, journal, probe=ttft["output"]["outcome"])
    assert code == 1
    assert ttft["output"]["outcome"] == "unknown" and ttft["output"]["verdict"] != "ok", ttft["output"]
    assert "no data" in ttft["output"]["reason"] or "query" in ttft["output"]["reason"], ttft["output"]["reason"]
    reverted_in_order(journal)
    assert settled(stage.fingerprint, before, timeout=60) == {}


def test_prometheus_stopped_fires_the_slo_stop_condition(stage, tmp_path):
    before = stage.before()
    code, journal = without_prometheus(stage, tmp_path, pause=20, stop_condition=True)
    measured("Prometheus stopped (stop condition)", code, journal)
    assert code == 3, journal["kilocard"]["reason"]
    assert "no data" in journal["kilocard"]["reason"] and "treats that as a breach" in journal["kilocard"]["reason"]
    reverted_in_order(journal)
    assert settled(stage.fingerprint, before, timeout=60) == {}


def test_a_node_agent_killed_and_restarted_under_the_run_still_has_its_fault_reverted(stage, tmp_path):
    before = stage.before()

    def kill_then_restart() -> None:
        time.sleep(3)  # the pause ends at 6 s: the runner's revert finds the agent down
        stage.agent.send_signal(signal.SIGKILL)
        stage.agent.wait()
        time.sleep(8)  # a DaemonSet's pod comes back in seconds; the revert outwaits it
        stage.agent = start_agent(stage.agent_argv)

    code, journal = run_with(stage, tmp_path, experiment(stage, pause=6), during=kill_then_restart)
    waited = round(journal["kilocard"]["runner_seconds"]["revert"], 1)
    measured("node agent SIGKILLed, back after 8 s", code, journal, revert_waited_seconds=waited)
    assert code == 0, journal["kilocard"]["reason"]
    # The revert found the agent down and waited for it (seconds, not the usual tens of ms). The
    # restarted agent had already reverted its predecessor's fault from its state file, so what
    # the runner's DELETE proves is that it outwaited the restart and closed its ledger.
    assert waited > 2, journal["kilocard"]["runner_seconds"]
    reverted_in_order(journal)
    assert settled(stage.fingerprint, before, timeout=60) == {}
    assert "kilocard" not in stage.pair.nft_tables()
    assert not [t for t in (stage.kube.read_node(stage.free).spec.taints or []) if t.key == ISOLATION_TAINT]
