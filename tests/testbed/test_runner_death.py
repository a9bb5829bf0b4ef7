"""R1: `kilocard run` SIGKILLed at seeded points, every fault kind, then the cluster cleaned by TTL
expiry alone or, separately, by `kilocard recover` from another checkout (no local ledger, another
HOME and working directory): either way nothing of the run is left, compared field by field with
the cluster before the trial.

The kill points: the failpoints (chaos/failpoints.py) for the windows a timer almost never hits
(the ledger written but nothing applied; a fault applied but not yet written down; a revert done
but not yet written down), and a seeded random moment of the run. `KILOCARD_TRIAL_SEED` replays a
schedule; the trial's id names its seed, kind and point.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from chaos import failpoints, ledger
from chaos.agent.client import AgentClient
from chaos.kube import Kube
from chaos.vocabulary import LEDGER_LABEL
from testbed import fleet, nodes
from testbed.remediator import OPT_OUT_LABEL
from tests import figures
from tests.netns.netns import Pair, free_port, start_agent, veth_pair
from tests.testbed.helpers import differences, settled, steady, wait_ready

pytestmark = [pytest.mark.testbed, pytest.mark.long(280)]  # all, together (a module-scoped fixture)
ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("KILOCARD_TRIAL_SEED", "20261201"))
BIG, SMALL = "llama-3-405b", "llama-2-7b-fragile"
CARD = "nvidia.com/gpu"
TTL = 4.0  # the TTL trials' faults: short, so the reaper's and the agents' expiry is what is tested
KINDS = ("pod-kill", "tp-group-kill", "rank-kill", "node-isolate", "node-out-of-service", "node-kubelet-stop",
         "network-policy-partition", "card-isolate", "gpu-ecc", "gpu-xid", "dra-card-isolate",
         "gpu-throttle", "network-bandwidth", "network-loss", "network-partition", "network-delay",
         "network-tcp-reset", "image-pull-failure", "dns-failure", "slow-weights",
         "rank-stall")
REVERTIBLE = set(KINDS) - {"pod-kill", "tp-group-kill", "rank-kill"}
POINTS = (*failpoints.NAMES, "random")
TRIALS = 24  # every kind at least once, every point five to seven times


@dataclass(frozen=True)
class Trial:
    number: int
    kind: str
    point: str  # a failpoint; "random": SIGKILL after `moment` of an undisturbed run's length; "none"
    moment: float
    node: int  # which node of the pool a node or card fault targets
    card: int

    def __str__(self) -> str:
        return f"{self.number:02d}-{self.kind}-{self.point}"


def schedule(seed: int, count: int) -> list[Trial]:
    """Every kind in turn, the points shifted by one each round so a kind meets another point the
    next time; a revert failpoint for a kind with nothing to revert becomes a random moment."""
    rng = random.Random(seed)
    kinds = rng.sample(KINDS, len(KINDS))
    out = []
    for i in range(count):
        kind = kinds[i % len(kinds)]
        point = POINTS[(i % len(kinds) + i // len(kinds)) % len(POINTS)]
        if point == "fault-reverted" and kind not in REVERTIBLE:
            point = "random"
        out.append(Trial(i, kind, point, round(rng.uniform(0.2, 0.95), 3), rng.randrange(4), rng.randrange(8)))
    return out


@dataclass
class Stage:
    """The trials' cluster: a four-node pool with one TP=16 group and two TP=1 replicas, opted out
    of the remediator (its quarantines are not the run's to undo), a DRA driver name of its own,
    and a fifth node whose agent is the real one, on a veth pair in network namespaces."""

    kube: Kube
    agents: AgentClient
    namespace: str
    nodes: list[str]
    real: str  # the node the real agent serves
    pair: Pair
    driver: str
    run_seconds: float = 0.0  # how long an undisturbed trial run takes, start to exit


@pytest.fixture(scope="module")
def stage(testbed, kube, tmp_path_factory):
    from tests.testbed.conftest import Pool  # noqa: PLC0415 - the pool fixture is function-scoped

    name = f"death{os.getpid() % 1000}"
    manifests = []
    for i in range(4):
        m = nodes.node_manifest(i, testbed.config, prefix=name, extra_labels={fleet.POOL_LABEL: name,
                                                                             OPT_OUT_LABEL: "false"})
        m["spec"]["taints"] = [{"key": fleet.POOL_LABEL, "value": name, "effect": "NoSchedule"}]
        manifests.append(m)
    nodes.create_nodes(kube, manifests)
    pool = Pool(name, name, [m["metadata"]["name"] for m in manifests], testbed.config)
    objects = [o for o in pool.fleet(BIG, SMALL, replicas={SMALL: 2}) if o["metadata"]["name"] != f"{BIG}-g1"]
    fleet.deploy(kube, objects, timeout=90, say=lambda _m: None)
    wait_ready(kube, name, BIG, 2, timeout=90)
    wait_ready(kube, name, SMALL, 2, timeout=90)
    with veth_pair() as pair:
        port = free_port()
        agent = start_agent([sys.executable, "-m", "chaos.agent", "--plaintext", "--listen", f"127.0.0.1:{port}",
                             "--token-file", str(testbed.paths.agent_token), "--interface", pair.veth_a,
                             "--state-file", str(tmp_path_factory.mktemp("agent") / "agent.json")])
        real = nodes.node_manifest(9, testbed.config, prefix=f"{name}-real",
                                   extra_labels={fleet.POOL_LABEL: f"{name}-real", OPT_OUT_LABEL: "false"})
        real["metadata"]["annotations"][nodes.AGENT_ANNOTATION] = f"http://127.0.0.1:{port}"
        kube.create_node(real)
        try:
            stage = Stage(kube, AgentClient(kube), name, pool.node_names, real["metadata"]["name"], pair,
                          f"{name}.gpu.kilocard.io")
            steady(lambda: fingerprint(stage))  # the new nodes' labels and annotations, settled
            died = killed_run(testbed, stage, Trial(-1, "network-delay", "none", 0.0, 0, 0), 600,
                              tmp_path_factory.mktemp("calibration") / "run")
            assert died["exit"] == 0, died
            stage.run_seconds = died["after_seconds"]
            yield stage
        finally:
            kube.delete_node(real["metadata"]["name"])
            agent.terminate()
            agent.wait(timeout=30)
            kube.delete_namespace(name)
            nodes.delete_nodes(kube, pool.node_names)


def fault(stage: Stage, trial: Trial, ttl: float) -> dict[str, Any]:
    node = stage.nodes[trial.node]
    ns, kind = stage.namespace, trial.kind
    by_kind: dict[str, dict[str, Any]] = {
        "pod-kill": {"namespace": ns, "label_selector": f"kilocard.io/model={SMALL}", "count": 1, "seed": SEED},
        "tp-group-kill": {"namespace": ns, "label_selector": f"kilocard.io/model={BIG}", "count": 1},
        "rank-kill": {"namespace": ns, "label_selector": f"kilocard.io/model={BIG}", "rank": 1, "count": 1},
        "node-isolate": {"nodes": [node], "effect": "NoExecute"},
        "node-out-of-service": {"nodes": [node]},
        "node-kubelet-stop": {"nodes": [node]},
        "network-policy-partition": {"namespace": ns, "pod_selector": {"kilocard.io/model": SMALL}},
        "card-isolate": {"nodes": [node], "card": trial.card},
        "gpu-ecc": {"nodes": [node], "card": trial.card, "params": {"type": "dbe"}},
        "gpu-xid": {"nodes": [node], "card": trial.card, "params": {"xid": 79}},
        "dra-card-isolate": {"nodes": [node], "cards": [trial.card], "driver": stage.driver, "effect": "NoExecute"},
        "network-bandwidth": {"nodes": [stage.real], "netns": stage.pair.a, "params": {"rate_mbit": 10}},
        "network-loss": {"nodes": [stage.real], "netns": stage.pair.a, "params": {"percent": 20}},
        "network-partition": {"nodes": [stage.real], "netns": stage.pair.a,
                              "params": {"cidrs": [f"{stage.pair.ip_b}/32"]}},
        "network-delay": {"nodes": [node], "params": {"ms": 50}},  # the simulator's: no netem on this kernel
        "network-tcp-reset": {"nodes": [stage.real], "netns": stage.pair.a, "params": {"ports": [29500]}},
        "gpu-throttle": {"nodes": [node], "card": trial.card, "params": {"fraction": 0.6}},
        "image-pull-failure": {"nodes": [stage.real], "netns": stage.pair.a,
                               "params": {"registries": [f"{stage.pair.ip_b}:5000"]}},
        "slow-weights": {"nodes": [node], "params": {"rate_mbps": 300}},
        "dns-failure": {"nodes": [stage.real], "netns": stage.pair.a, "params": {"answer": "reject"}},
        "rank-stall": {"namespace": ns, "label_selector": f"kilocard.io/model={BIG}", "rank": 1, "count": 1},
    }
    spec = {"kind": kind, **by_kind[kind]}
    return spec if kind not in REVERTIBLE else {**spec, "ttl_seconds": ttl}


def experiment(spec: dict[str, Any]) -> dict[str, Any]:
    # The pool's one TP=16 group may go, and a drained node's replicas may find no room: the
    # guards' defaults would refuse that, and refusing is not what is tested here.
    guards = {"name": "kilocard-guards", "provider": {"type": "python", "module": "chaos.guards",
                                                      "arguments": {"min_ready": 0, "room": False}}}
    return {"title": f"runner death: {spec['kind']}", "description": "SIGKILLed on purpose", "controls": [guards],
            "method": [{"type": "action", "name": "fault", "pauses": {"after": 2},
                        "provider": {"type": "python", "module": "chaos.actions", "func": "apply_fault",
                                     "arguments": {"fault": spec}}}]}


def fingerprint(stage: Stage) -> dict[str, Any]:
    """Everything a run may touch, as plain data: the nodes' taints, cordons, labels, annotations
    and allocatable cards; what every agent holds; the qdisc and nft tables in the namespace; the
    NetworkPolicies, DeviceTaintRules and ledger markers; each workload's Ready replicas."""
    kube = stage.kube
    seen: dict[str, Any] = {}
    for n in kube.list_nodes_raw():
        meta = n["metadata"]
        if meta["name"] not in (*stage.nodes, stage.real):
            continue
        seen[f"node/{meta['name']}"] = {
            "labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {},
            "taints": sorted(json.dumps(t, sort_keys=True) for t in (n["spec"].get("taints") or [])
                             if t.get("key") not in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")),
            "unschedulable": bool(n["spec"].get("unschedulable")),
            "ready": any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or []),
            "allocatable": n["status"]["allocatable"].get(CARD)}
        seen[f"agent/{meta['name']}"] = stage.agents.list(stage.agents.endpoint(meta["name"]))
    seen["qdisc"] = stage.pair.qdisc().split()[:2]  # the root qdisc's kind: noqueue, or tbf if one is left
    seen["nft"] = stage.pair.nft_tables()
    seen["network-policies"] = [p["metadata"]["name"] for p in kube.list_network_policies(stage.namespace)]
    seen["device-taint-rules"] = [o["metadata"]["name"] for o in kube.list_objects(
        "resource.k8s.io/v1beta2", "DeviceTaintRule")]
    seen["markers"] = [c["metadata"]["name"] for c in kube.list_config_maps("kilocard-system", f"{LEDGER_LABEL}=true")]
    for kind in ("deployments", "statefulsets"):
        for w in kube.list_raw(kind, f"/apis/apps/v1/namespaces/{stage.namespace}/{kind}"):
            seen[f"{kind}/{w['metadata']['name']}"] = (w["spec"].get("replicas"), w["status"].get("readyReplicas"))
    return seen


def killed_run(testbed, stage: Stage, trial: Trial, ttl: float, tmp: Path) -> dict[str, Any]:
    """Start `kilocard run` with the trial's fault, kill it at the trial's point; say where it died."""
    tmp.mkdir(parents=True)
    path = tmp / "experiment.yaml"
    path.write_text(yaml.safe_dump(experiment(fault(stage, trial, ttl))))
    env = {**os.environ, "KILOCARD_LEDGER": str(tmp / "ledger")}
    if trial.point in failpoints.NAMES:
        env["KILOCARD_FAILPOINT"] = trial.point
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "chaos.cli", "run", str(path), "--kubeconfig",
                             str(testbed.paths.kubeconfig), "--prometheus-url", testbed.prometheus_url,
                             "--ledger-dir", str(tmp / "ledger"), "--journal", str(tmp / "journal.json"),
                             "--no-report"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.wait(timeout=trial.moment * stage.run_seconds if trial.point == "random" else 120)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err
    (book,) = list((tmp / "ledger").glob("*.jsonl")) or [None]
    states = [s["state"] for t in (ledger.transitions(book).values() if book else ()) for s in t]
    return {"trial": str(trial), "killed": proc.returncode == -signal.SIGKILL, "exit": proc.returncode,
            "after_seconds": round(time.monotonic() - started, 2), "ledger": states,
            "run_id": book.stem if book else None, "stderr": err[-500:], "stdout": out[-500:]}


def recover_elsewhere(testbed, tmp: Path) -> subprocess.CompletedProcess[str]:
    """`kilocard recover --all` as another machine would: from its own copy of the code, working
    directory and HOME, with no local ledger: only the kubeconfig and the in-cluster markers."""
    other = tmp / "other-checkout"
    for package in ("chaos", "probes"):
        shutil.copytree(ROOT / package, other / package, ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PATH": os.environ["PATH"], "HOME": str(other / "home"), "KILOCARD_LEDGER": str(other / "ledger"),
           "PYTHONPATH": str(other)}
    return subprocess.run([sys.executable, "-m", "chaos.cli", "recover", "--all", "--kubeconfig",
                           str(testbed.paths.kubeconfig)], cwd=other, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("trial", schedule(SEED, TRIALS), ids=str)
@pytest.mark.parametrize("cleaner", ["ttl", "recover"])
def test_a_killed_runner_leaves_nothing_behind(testbed, stage, tmp_path, trial, cleaner):
    before = fingerprint(stage)
    assert not before["markers"], before["markers"]  # the previous trial left none either
    died = killed_run(testbed, stage, trial, TTL if cleaner == "ttl" else 600, tmp_path / "run")
    left = differences(before, fingerprint(stage))  # what the dead runner left for the cleaner
    recovered = recover_elsewhere(testbed, tmp_path) if cleaner == "recover" else None
    # TTL: nobody reverts; the simulator's reaper (in-cluster markers) and the agents (their own
    # TTL) do once the faults expire. Both: replacements start and a stopped kubelet comes back.
    residue = settled(lambda: fingerprint(stage), before, timeout=60)
    figures.record("runner-death", {**died, "cleaner": cleaner, "left_by_the_kill": sorted(left),
                                    "residue": sorted(residue)})  # before any assertion: a failed trial counts too
    assert died["exit"] != 2, died["stderr"] + died["stdout"]  # the trial's own experiment must be valid
    if trial.point != "random":  # a failpoint is a precise moment: it was reached, and the ledger shows where
        assert died["killed"], died
        states = set(died["ledger"]) - {"recorded"} if trial.point != "fault-reverted" else set(died["ledger"])
        assert states == (set() if trial.point != "fault-reverted" else {"recorded", "applied"}), died
        effect = set(left) - {"markers"}  # the marker is written first; the fault shows once applied
        if trial.kind in REVERTIBLE and trial.point == "fault-applied":
            assert effect, f"the fault's apply returned but the fingerprint shows nothing of it: {sorted(left)}"
        if trial.point == "fault-recorded":
            assert not effect, f"nothing was applied yet, but: {sorted(left)}"
    if recovered is not None:
        assert recovered.returncode == 0, recovered.stderr
    assert not residue, (died, residue)
