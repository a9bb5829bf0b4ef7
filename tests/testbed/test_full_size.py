"""README's first command as a newcomer runs it: `kilocard gameday run` with no cluster named and
no testbed running starts the embedded default, the local testbed with the default fleet (128
Ready nodes, 1024 allocatable cards, the whole fleet Running and Ready, TP=8 replicas on distinct
nodes, every TP group whole), straight into the catalog's game day: its first two experiments,
S1 and S2, each with a steady state to meet before its method (the fleet must serve at its steady
state when the testbed says it is Ready, not only have its pods Ready), exit 0, ending with its
report's path; `down` then leaves nothing. A state folder and ports of its own
($KILOCARD_STATE, $KILOCARD_PORT_BASE), so it runs beside everything else. Then, on the same
testbed, `kilocard run` of a folder holding the catalog's S7 and S9 as they are named there: the
models S7 touched settled before S9 starts (S9 right after S7 found every llama-3-70b replica still
starting, and its guard refused it), both verdicts as the catalog expects, exit 0. (Natural and
declared order: tests/unit/test_cli.py. The whole catalog as one folder, 9.6 min here:
bench/catalog.py; README's first command exactly, from a stopped testbed: bench/first_command.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from chaos.kube import Kube, pod_ready
from probes import placement, slo, snapshot, tp_groups
from testbed import build, fleet, steady
from testbed.config import Ports, taken_ports
from tests.testbed.conftest import PORT_BASE
from tests.testbed.test_catalog import CATALOG

pytestmark = pytest.mark.testbed
FIRST_COMMAND_PORTS = PORT_BASE + 100  # beside this worker's own testbed (its first eight ports)


def kilocard(*args: str, env: dict[str, str], timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env=env)


def unsteady(prometheus: str, when: float) -> list[str]:
    """Each model of the default fleet and criterion of the catalog's steady states (testbed.steady)
    not met at `when`, with its figures."""
    prom = slo.connect(prometheus)
    said = []
    models = {o["metadata"].get("labels", {}).get("kilocard.io/model") for o in fleet.load("default", "nvidia.com/gpu")
              if o["kind"] in ("Deployment", "StatefulSet")}
    for model in sorted(models - {None}):  # the endpoint picker serves no model
        for c in steady.criteria():
            ind = slo.indicator(prom, c.indicator, model, fleet.DEFAULT_NAMESPACE, c.window,
                                by=slo.REPLICA if c.per == "replica" else None)
            values = [float(row["value"][1]) for row in prom.custom_query(ind.query, params={"time": when})]
            if not values or max(values) > c.threshold or any(v != v for v in values):
                said.append(f"{model}: {c}: {values or 'no series'}")
    return said


def first_experiments(count: int) -> dict:
    """The catalog's game day cut after its `count`-th experiment, its paths made absolute."""
    catalog = yaml.safe_load((CATALOG / "gamedays" / "catalog.yaml").read_text())
    steps: list[dict] = []
    for step in catalog["steps"]:
        if "experiment" in step:
            if sum("experiment" in s for s in steps) == count:
                break
            step = {**step, "experiment": str(CATALOG / step["experiment"].removeprefix("../"))}
        steps.append(step)
    return {**catalog, "steps": steps}


@pytest.mark.long(330)
def test_readmes_first_command_from_no_testbed_passes_the_catalogs_first_experiments_and_a_folder_runs_settled(
        tmp_path):
    ports = Ports(FIRST_COMMAND_PORTS)
    if taken_ports(ports):
        pytest.skip(f"the ports of this test's testbed are taken: {', '.join(taken_ports(ports))}")
    # No cluster named: no $KUBECONFIG, no ~/.kube/config (a HOME of its own), not in a pod.
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update(HOME=str(tmp_path / "home"), KILOCARD_STATE=str(tmp_path / "state"),
               KILOCARD_PORT_BASE=str(FIRST_COMMAND_PORTS), KILOCARD_CACHE=str(build.cache_dir()))
    plan = tmp_path / "gamedays" / "first.yaml"
    plan.parent.mkdir()
    plan.write_text(yaml.safe_dump(first_experiments(2)))
    try:
        run = kilocard("gameday", "run", str(plan), "--testbed", "--journal", str(tmp_path / "journals"),
                       "--reports", str(tmp_path / "reports"), env=env, timeout=900)  # as README's first command
        assert "starting the local testbed with the default fleet" in run.stdout + run.stderr, run.stdout
        assert run.returncode == 0, run.stdout + run.stderr
        last = run.stdout.strip().splitlines()[-1]
        assert last.startswith("report ") and last.endswith("index.html") and Path(last[7:]).is_file(), last
        first_started = None
        for step, name in ((1, "s1-"), (3, "s2-")):  # step 2 is the pause between them
            (journal,) = (tmp_path / "journals").glob(f"step-{step}-{name}*.json")
            ran = json.loads(journal.read_text())
            k = ran["kilocard"]
            assert k["verdict"] == "passed" and k["reason"] == "steady state met before and after the method", k
            first_started = first_started or datetime.fromisoformat(ran["start"]).timestamp()
        # When the game day began, right after the testbed said its fleet was Ready, every model
        # served at the catalog's steady state: the indicators over the windows ending then.
        assert not (found := unsteady(f"http://127.0.0.1:{ports.prometheus}", first_started)), found
        status = json.loads(kilocard("testbed", "status", "--json", env=env).stdout)
        assert status["nodes"] == {"total": 128, "ready": 128}
        assert status["cards"]["allocatable"] == 1024 and all(p["healthy"] for p in status["processes"])
        kube = Kube.from_kubeconfig(tmp_path / "state" / "kubeconfig")
        try:
            expected = fleet.expected_pods(fleet.load("default", "nvidia.com/gpu"))
            # S1 killed a replica and S2 drove one off an isolated card: both are back, whole.
            kube.wait_until("pods", lambda pods: len(pods) == expected and all(
                p.status.phase == "Running" and pod_ready(p) for p in pods), timeout=120,
                namespace=fleet.DEFAULT_NAMESPACE)
            snap = snapshot.fetch(kube, namespace=fleet.DEFAULT_NAMESPACE)
        finally:
            kube.close()
        big = placement.anti_affinity(snap, "llama-3-70b", namespace=fleet.DEFAULT_NAMESPACE)
        assert big.ok and len({p.node for p in snap.replicas("llama-3-70b")}) == 8, big.reason
        for model in snap.models():
            assert tp_groups.check(snap, model).ok, model
        folder = tmp_path / "folder"
        folder.mkdir()
        for path in CATALOG.glob("s[0-9]*.yaml"):
            if path.name.startswith(("s7-", "s9-")):
                (folder / path.name).symlink_to(path)
        run = kilocard("run", str(folder), "-q", "--journal", str(tmp_path / "folder-journals"),
                       "--reports", str(tmp_path / "reports"), env=env, timeout=900)
        lines = run.stdout.splitlines()
        verdicts = [line for line in lines if " (exit " in line]
        assert [Path(line.split(": ", 1)[0]).name[:3] for line in verdicts] == ["s7-", "s9-"], run.stdout
        assert all(": passed (exit 0): " in line for line in verdicts), verdicts  # S7 and S9 as they expect
        after_s7 = lines[lines.index(verdicts[0]) + 1:lines.index(verdicts[1])]
        assert any(line.startswith("settle: ") and "kilocard-fleet/llama-3-70b whole again" in line
                   for line in after_s7), after_s7
        assert run.returncode == 0, run.stdout + run.stderr
    finally:
        down = kilocard("testbed", "down", env=env)
    assert down.returncode == 0, down.stderr
    assert taken_ports(ports) == []
