"""R2 on the real apiserver: 500 broken experiments (tests/unit/test_fuzz_inputs.py's generator),
plus ones only the cluster can tell are wrong (a selector matching nothing, a card the node lacks,
a node that does not exist), through one `kilocard run`: every one exits 2 with its file named,
no traceback, and the audit log shows not one write by kilocard."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from testbed import audit
from tests import figures
from tests.testbed.test_runner import KILOCARD
from tests.unit.test_fuzz_inputs import EXPERIMENTS, broken

pytestmark = pytest.mark.testbed
GENERATED = 500


def write_broken(folder) -> None:
    made: set[str] = set()

    # Hypothesis skips inputs it has tried already: asked for more, it gives at least GENERATED distinct ones.
    @settings(max_examples=2 * GENERATED, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(broken())
    def one(case) -> None:
        name, data, _ = case
        text = data if isinstance(data, str) else yaml.safe_dump(data)
        if len(made) < GENERATED and text not in made:
            made.add(text)
            (folder / f"{len(made):04d}-{name}").write_text(text)

    one()


def cluster_only(folder, pool_nodes: list[str]) -> int:
    """Valid files that only the cluster refuses: what they name is not there."""
    s2 = EXPERIMENTS["s2-isolate-one-card.yaml"]
    fault = next(a for a in s2["method"] if a["provider"]["func"] == "apply_fault")["provider"]["arguments"]["fault"]
    cases = {"nothing-matches": {"nodes_of": {"namespace": "no-such-namespace", "label_selector": "a=b"}},
             "no-such-node": {"nodes": ["no-such-node"]},
             "no-such-card": {"nodes": pool_nodes[:1], "card": 9}}
    for name, change in cases.items():
        data = yaml.safe_load(yaml.safe_dump(s2))
        target = next(a for a in data["method"] if a["provider"]["func"] == "apply_fault")["provider"]["arguments"]
        target["fault"] = {**{k: v for k, v in fault.items() if k != "nodes_of"}, **change}
        (folder / f"cluster-{name}.yaml").write_text(yaml.safe_dump(data))
    return len(cases)


def test_broken_experiments_by_the_hundred_exit_2_and_write_nothing(testbed, pool, tmp_path):
    p = pool(1)
    folder, cluster = tmp_path / "broken", tmp_path / "cluster-only"
    folder.mkdir()
    cluster.mkdir()
    write_broken(folder)
    offline = sorted(folder.iterdir())
    files = len(offline) + cluster_only(cluster, p.node_names)
    assert files >= GENERATED
    since = time.time()

    def run(where: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*KILOCARD, "run", str(where), "--kubeconfig", str(testbed.paths.kubeconfig),
                               "--ledger-dir", str(tmp_path / "ledger"), "--journal", str(tmp_path / "journals"),
                               "--no-report"], capture_output=True, text=True, timeout=900)

    # What can be found without the cluster refuses the whole folder before anything starts, each file named.
    done = run(folder)
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    named = {path for path in offline if str(path) in done.stderr}
    assert named == set(offline), sorted(set(offline) - named)[:5]
    # What only the cluster can find: each file run, and each refused with nothing applied.
    done = run(cluster)
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in out, out[-3000:]
    assert out.count("invalid (exit 2)") == files - len(offline), out[-3000:]
    writes = [w for w in audit.writes(testbed.paths.audit_log, since) if w.user_agent.endswith("(toolkit)")]
    figures.record("fuzz-cluster", {"inputs": files, "exit_2": len(named) + out.count("invalid (exit 2)"),
                                    "api_writes": len(writes), "seconds": round(time.time() - since, 1)})
    assert writes == []
