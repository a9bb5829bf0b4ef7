"""The README's main command at full size: `kilocard gameday run` with no cluster named starts the
embedded default, the local testbed with the default fleet (128 Ready nodes, 1024 allocatable
cards, the whole fleet Running and Ready, TP=8 replicas on distinct nodes, every TP group whole),
runs the game day on it and ends with its report's path; `down` then leaves nothing. Its plan is
the catalog's game day cut to S7, the catalog's quickest, so the default ports (6443 on) must be
free. Then, on the same testbed, `kilocard run` of a folder holding the catalog's S7 and S9 as
they are named there: the models S7 touched settled before S9 starts (S9 right after S7 found
every llama-3-70b replica still starting, and its guard refused it), both verdicts as the catalog
expects, exit 0. (Natural and declared order: tests/unit/test_cli.py. The whole catalog as one
folder, 9.6 min here: bench/catalog.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from chaos.kube import Kube, pod_ready
from probes import placement, snapshot, tp_groups
from testbed import build, fleet
from testbed.config import TestbedConfig, taken_ports
from tests.testbed.test_catalog import CATALOG

pytestmark = pytest.mark.testbed


def kilocard(*args: str, env: dict[str, str], timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env=env)


@pytest.mark.long(170)
def test_no_cluster_named_starts_the_thousand_card_testbed_and_a_catalog_folder_runs_on_it_settled(tmp_path):
    if taken_ports(TestbedConfig().ports):
        pytest.skip(f"the default testbed's ports are taken: {', '.join(taken_ports(TestbedConfig().ports))}")
    # No cluster named: no $KUBECONFIG, no ~/.kube/config (a HOME of its own), not in a pod.
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update(HOME=str(tmp_path / "home"), KILOCARD_STATE=str(tmp_path / "state"),
               KILOCARD_CACHE=str(build.cache_dir()))
    catalog = yaml.safe_load((CATALOG / "gamedays" / "catalog.yaml").read_text())
    (s7,) = [s for s in catalog["steps"] if str(s.get("experiment", "")).endswith("s7-kill-every-replica.yaml")]
    plan = tmp_path / "gamedays" / "s7.yaml"
    plan.parent.mkdir()
    plan.write_text(yaml.safe_dump({**catalog, "steps": [{**s7, "experiment": str(CATALOG / s7["experiment"][3:])}]}))
    try:
        run = kilocard("gameday", "run", str(plan), "--testbed", "--journal", str(tmp_path / "journals"),
                       "--reports", str(tmp_path / "reports"), env=env)  # as README's first command asks
        assert "starting the local testbed with the default fleet" in run.stdout + run.stderr, run.stdout
        assert run.returncode == 0, run.stdout + run.stderr
        last = run.stdout.strip().splitlines()[-1]
        assert last.startswith("report ") and last.endswith("index.html") and Path(last[7:]).is_file(), last
        (journal,) = (tmp_path / "journals").glob("step-1-s7-*.json")
        k = json.loads(journal.read_text())["kilocard"]
        assert k["verdict"] == "aborted" and k["reason"].startswith("as expected (aborted): stop condition fired")
        status = json.loads(kilocard("testbed", "status", "--json", env=env).stdout)
        assert status["nodes"] == {"total": 128, "ready": 128}
        assert status["cards"]["allocatable"] == 1024 and all(p["healthy"] for p in status["processes"])
        kube = Kube.from_kubeconfig(tmp_path / "state" / "kubeconfig")
        try:
            expected = fleet.expected_pods(fleet.load("default", "nvidia.com/gpu"))
            # S7 killed every llama-3-70b replica: the replacements come back (25 s start-up).
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
    assert taken_ports(TestbedConfig().ports) == []
