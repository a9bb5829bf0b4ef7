"""Built-in load against the testbed's OpenAI-compatible endpoint: what `kilocard load` measures
from the client is what the replicas' own TTFT histograms say through the real Prometheus, an
experiment's load block runs around the whole run and lands in its journal (kilocard.load), and
what its clients saw is judged (client_errors_within) with its negative twin."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from chaos.vocabulary import epoch
from testbed import fleet
from tests.testbed.helpers import eventually, query
from tests.testbed.test_fleet_simulator import bucket_bounds
from tests.testbed.test_runner import kilocard_run

pytestmark = pytest.mark.testbed
BIG = "llama-3-70b"
QPS = 10  # as much as the fleet's own load (two replicas at a quarter of their 20 requests/s), which it joins


@pytest.fixture(scope="module")
def two_replicas(kube, prom, module_pool):
    """Two 70B replicas whose P95 Prometheus has: each test may be the module's first on its worker
    (a steady state read before the first scrapes finds no series)."""
    p = module_pool(2)
    fleet.deploy(kube, p.fleet(BIG, replicas={BIG: 2}), timeout=60, say=lambda _m: None, prometheus=p.prometheus)
    return p


def test_the_client_s_p95_ttft_agrees_with_prometheus_within_one_bucket(testbed, prom, two_replicas, tmp_path):
    ns = two_replicas.namespace
    p95 = (f"histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket"
           f'{{namespace="{ns}", model_name="{BIG}"}}[1m])))')
    both = f'count(vllm:num_requests_running{{namespace="{ns}", model_name="{BIG}"}})'
    assert eventually(lambda: query(prom, both) == {"value": 2.0} and query(prom, p95), 60), query(prom, both)
    journal = tmp_path / "load.json"
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "load", "--url", f"{testbed.simulator_url}/namespaces/{ns}",
                           "--model", BIG, "--qps", str(QPS), "--prompt-tokens", "512", "--output-tokens", "16",
                           "--duration", "45", "--seed", "7", "--json", "--journal", str(journal)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    found = json.loads(done.stdout)
    server = query(prom, p95)["value"]  # its 1 m window: the load's last minute
    client = found["ttft_seconds"]["p95"]
    print(f"client P95 TTFT {client:.4f} s, Prometheus P95 {server:.4f} s, bucket {bucket_bounds(server)}; "
          f"{json.dumps(found)}")
    assert bucket_bounds(client) == bucket_bounds(server), (client, server)
    assert found["errors"] == {} and found["ok"] == found["requests"]
    assert found["achieved_qps"] == pytest.approx(QPS, rel=0.25)
    assert found["tpot_seconds"]["p50"] == pytest.approx(0.030, rel=0.3)  # the 70B's inter-token latency
    record = json.loads(journal.read_text())["kilocard"]["load"]
    assert len(record["series"]) == 45 and sum(s["sent"] for s in record["series"]) == found["requests"]


def test_an_experiment_s_load_runs_from_before_its_steady_state_until_after_its_revert(testbed, two_replicas,
                                                                                       tmp_path):
    ns = two_replicas.namespace
    slo = {"type": "probe", "name": "slo", "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"},
           "provider": {"type": "python", "module": "probes.chaostoolkit", "func": "slo_under",
                        "arguments": {"model": BIG, "namespace": ns}}}
    code, journal, _ = kilocard_run(testbed, tmp_path, {
        "extensions": [{"name": "kilocard", "load": {
            "url": f"{testbed.simulator_url}/namespaces/{ns}", "model": BIG, "qps": 5, "prompt_tokens": 128,
            "output_tokens": 8, "api": "chat"}}],
        "steady-state-hypothesis": {"title": "within the SLO", "probes": [slo]},
        "method": [{"type": "action", "name": "wait", "provider": {
            "type": "python", "module": "subprocess", "func": "run", "arguments": {"args": ["sleep", "5"]}}}]})
    assert code == 0, journal["kilocard"]["reason"]
    record = journal["kilocard"]["load"]
    assert record["spec"]["model"] == BIG and record["summary"]["errors"] == {}
    assert record["summary"]["ok"] > 0 and record["series"]
    before = journal["steady_states"]["before"]["probes"][0]
    assert record["started_at"] < epoch(before["start"])
    assert record["started_at"] + record["summary"]["seconds"] > epoch(journal["end"])
    assert "load" in journal["kilocard"]["runner_seconds"]


def test_the_clients_error_window_closes_with_a_partition_and_a_budget_shorter_than_it_fails(testbed, kube,
                                                                                            two_replicas, tmp_path):
    # One cause changed between the two probes of one run: the budget against the partition's 12 s.
    ns = two_replicas.namespace
    (node, *_rest) = sorted({p.spec.node_name for p in kube.list_pods(ns, f"kilocard.io/model={BIG}").items})

    def clients(name: str, budget: int) -> dict:
        return {"type": "probe", "name": name, "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"},
                "provider": {"type": "python", "module": "probes.chaostoolkit", "func": "client_errors_within",
                             "arguments": {"budget": budget, "hold": 6}}}

    code, journal, _ = kilocard_run(testbed, tmp_path, {
        "extensions": [{"name": "kilocard", "load": {
            "url": f"{testbed.simulator_url}/namespaces/{ns}", "model": BIG, "qps": 8, "prompt_tokens": 64,
            "output_tokens": 4}}],
        "method": [
            {"type": "action", "name": "partition-one-replica", "pauses": {"after": 12}, "provider": {
                "type": "python", "module": "chaos.actions", "func": "apply_fault",
                "arguments": {"fault": {"kind": "network-partition", "nodes": [node], "ttl_seconds": 120}}}},
            {"type": "action", "name": "heal", "provider": {"type": "python", "module": "chaos.actions",
                                                            "func": "revert_faults"}},
            clients("clients-back-within-20s", 20), clients("clients-back-within-8s", 8)]})
    outputs = {r["activity"]["name"]: r["output"] for r in journal["run"] if r["activity"]["type"] == "probe"}
    within, short = outputs["clients-back-within-20s"], outputs["clients-back-within-8s"]
    print(json.dumps({"within": within, "short": short}))
    assert within["outcome"] == "recovered" and within["verdict"] == "ok", within
    # Half the requests (those sent to the partitioned replica) failed, for the partition's 12 s.
    assert within["errors"].get("http_503", 0) > 20 and 10 <= within["window_end_seconds"] <= 14, within
    assert short["outcome"] == "not_recovered" and 8 < short["last_failure_seconds"] <= 14, short
    assert code == 1 and journal["kilocard"]["reason"].startswith("probe 'clients-back-within-8s' failed: "), \
        journal["kilocard"]["reason"]
