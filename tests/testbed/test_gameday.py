"""Game days on the real apiserver: the manifests `gameday schedule` prints are admitted (server-side
dry run), the game day's ServiceAccount can do what its plan needs and nothing more (with a ServiceAccount token),
and `gameday run` waits on its ConfigMap gate until the facilitator annotates it, and starts
nothing once the control ConfigMap says abort."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

from chaos.errors import KubeError, NotFound
from chaos.gameday import gates
from chaos.kube import Kube
from tests.testbed.helpers import service_account_kubeconfig
from tests.testbed.test_runner import KILOCARD

pytestmark = pytest.mark.testbed
NOOP = {"title": "a check that changes nothing", "description": "d",
        "method": [{"type": "probe", "name": "python", "provider": {"type": "python", "module": "platform",
                                                                     "func": "python_version"}}]}


@pytest.fixture
def day_namespace(kube):
    """A namespace of the game day's own, with its gate and control ConfigMaps."""
    ns = f"gameday-{uuid.uuid4().hex[:6]}"
    kube.create_namespace(ns)
    for name in ("gates", "control", "other"):
        kube.create_config_map(ns, {"metadata": {"name": name}})
    yield ns
    kube.delete_namespace(ns)


def plan(tmp_path: Path, ns: str, *steps: dict) -> Path:
    (tmp_path / "noop.yaml").write_text(yaml.safe_dump(NOOP))
    path = tmp_path / "gamedays" / "drill.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump({"title": "drill", "control": {"namespace": ns, "name": "control"},
                                    "steps": list(steps)}))
    return path


GATE = {"approve": "the on-call agrees", "timeout": 60, "via": "configmap"}


def test_a_scheduled_game_day_is_admitted_and_its_account_can_do_what_it_needs_and_nothing_more(
        kube, testbed, tmp_path, day_namespace):
    ns = day_namespace
    path = plan(tmp_path, ns, {"experiment": "../noop.yaml"},
                {**GATE, "configmap": {"namespace": ns, "name": "gates"}})
    manifests = {}
    for storage in ("pvc", "configmap"):
        done = subprocess.run([*KILOCARD, "gameday", "schedule", str(path), "--cron", "0 3 * * mon-fri",
                               "--namespace", ns, "--storage", storage], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        manifests[storage] = list(yaml.safe_load_all(done.stdout))
        for doc in manifests[storage]:
            kube.apply(doc, dry_run=True)  # admitted as kubectl apply --dry-run=server would be
    assert {d["kind"] for d in manifests["pvc"]} >= {"CronJob", "PersistentVolumeClaim", "ServiceAccount"}
    with pytest.raises(NotFound):
        kube.get_object("batch/v1", "CronJob", "gameday-drill", ns)  # a dry run stores nothing
    (cron,) = [d for d in manifests["configmap"] if d["kind"] == "CronJob"]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    account = next(d for d in manifests["configmap"] if d["kind"] == "ServiceAccount")["metadata"]["name"]
    rbac = [d for d in manifests["configmap"] if d["kind"] in ("ServiceAccount", "Role", "RoleBinding",
                                                              "ClusterRole", "ClusterRoleBinding")]
    for doc in rbac:
        kube.apply(doc)
    # As the CronJob's pod authenticates: a TokenRequest token of its ServiceAccount.
    as_day = Kube.from_kubeconfig(service_account_kubeconfig(testbed, kube, ns, account, tmp_path / "day.kubeconfig"))
    summary = f"{account}-summary"
    allowed = {
        "read its gate": lambda: as_day.read_config_map(ns, "gates"),
        "say it waits at its gate": lambda: as_day.patch_config_map(
            ns, "gates", {"metadata": {"annotations": {gates.WAITING: "step-2"}}}),
        "watch its gate": lambda: list(as_day.watch_config_map(ns, "gates", "0", 1)),
        "read its control": lambda: as_day.read_config_map(ns, "control"),
        "watch its control": lambda: list(as_day.watch_config_map(ns, "control", "0", 1)),
        "keep its summary": lambda: as_day.create_config_map(ns, {"metadata": {"name": summary}, "data": {}}),
        "update its summary": lambda: as_day.patch_config_map(ns, summary, {"data": {"gameday.json": "{}"}}),
        "list the pods it may kill": lambda: as_day.list_pods_raw(None),
    }
    refused = {
        "read another ConfigMap": lambda: as_day.read_config_map(ns, "other"),
        "throw its own abort switch": lambda: as_day.patch_config_map(
            ns, "control", {"metadata": {"annotations": {gates.ABORT: "true"}}}),
        "read a Secret": lambda: as_day.read_secret(ns, "anything"),
        "create a workload": lambda: as_day.apply({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": "x", "namespace": ns}, "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "i"}]}}}}),
        "schedule itself more": lambda: as_day.apply({**cron, "metadata": {**cron["metadata"], "name": "more"}}),
        "delete its namespace": lambda: as_day.delete_namespace(ns),
    }
    try:
        for call in allowed.values():
            call()  # raises on a 403
        for what, call in refused.items():
            with pytest.raises(KubeError) as caught:
                call()
            assert caught.value.status == 403, (what, caught.value)
    finally:
        as_day.close()
        for doc in rbac:
            if doc["kind"].startswith("Cluster"):
                kube.delete_object(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])


def gameday(testbed, tmp_path: Path, path: Path) -> subprocess.Popen:
    return subprocess.Popen([*KILOCARD, "gameday", "run", str(path), "--kubeconfig", str(testbed.paths.kubeconfig),
                             "--ledger-dir", str(tmp_path / "ledger"), "--journal", str(tmp_path / "journals"),
                             "--reports", str(tmp_path / "reports")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def annotations(kube, ns: str, name: str) -> dict:
    return kube.read_config_map(ns, name)["metadata"].get("annotations") or {}


def test_a_game_day_waits_at_its_configmap_gate_and_stops_at_abort_all(kube, testbed, tmp_path, day_namespace):
    ns = day_namespace
    path = plan(tmp_path, ns, {**GATE, "configmap": {"namespace": ns, "name": "gates"}},
                {"experiment": "../noop.yaml", "name": "the drill"})
    run = gameday(testbed, tmp_path, path)
    deadline = time.monotonic() + 60
    while annotations(kube, ns, "gates").get(gates.WAITING) != "step-1":
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.2)
    time.sleep(1)
    assert run.poll() is None  # still waiting: nobody answered
    kube.patch_config_map(ns, "gates", {"metadata": {"annotations": {gates.APPROVED: "step-1",
                                                                     gates.APPROVED_BY: "alice"}}})
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0 and "Traceback" not in err, out + err
    (day,) = [json.loads(p.read_text()) for p in (tmp_path / "journals").glob("gameday-drill-*.json")]
    approved, drill = day["steps"]
    assert approved["status"] == "approved" and "alice" in approved["by"], approved
    assert drill["status"] == "ran" and drill["exit_code"] == 0 and Path(drill["journal"]).is_file()
    assert out.strip().splitlines()[-1].startswith("report ")  # the game day's page, last
    # Abort-all, thrown in the cluster: the next game day starts nothing.
    kube.patch_config_map(ns, "control", {"metadata": {"annotations": {gates.ABORT: "true"}}})
    run = gameday(testbed, tmp_path, path)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 3, out + err
    days = sorted((tmp_path / "journals").glob("gameday-drill-*.json"))
    statuses = [s["status"] for s in json.loads(days[-1].read_text())["steps"]]
    assert "ran" not in statuses and "approved" not in statuses, statuses
