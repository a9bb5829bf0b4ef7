"""The catalog's single-model scenarios against the testbed's llama-3-70b deployed as each serving
stack deploys it (testbed.stacks: no kilocard label on any pod), each on a fresh pool of three
nodes with two replicas, the experiment unchanged but for `--var namespace=...`. Prints the stack
x scenario table docs/stacks.md shows (verdict, exit code, seconds) and keeps each journal under
--out. The KServe row runs KServe's real controller (testbed.kserve): an InferenceService in
RawDeployment mode as KServe's LLM page writes one; the LeaderWorkerSet rows LWS's (testbed.lws): a
LeaderWorkerSet of two one-pod groups as LWS's vLLM or SGLang example writes it. Their pods are
made by the controller and its webhook.
The cross-node scenarios (S4, S6, S10: a TP=16 group over two machines) run on a fleet of both
real controllers, as a team running both would have it (CROSS): llama-3-405b as LWS's vLLM
example (TP 8 x PP 2, two groups over four machines) and llama-3-70b as a KServe InferenceService
(two single-machine replicas), on one rack of six machines (tests/testbed/test_lws.py runs S1 and
S5 on LWS's example). Not a test: about 40 minutes on 2 cores for every row.

    .venv/bin/python bench/stacks.py [--port-base 29443] [--out reports/stacks] [--stack KServe] [--scenario S1]
                                     [--var ttft_budget_seconds:int=50]
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chaos.kube import Kube, node_ready  # noqa: E402 - after the path: run as a script from anywhere
from testbed import fleet, kserve, lws, nodes, stacks, timing  # noqa: E402
from testbed.cluster import Testbed  # noqa: E402
from testbed.config import TestbedConfig  # noqa: E402

CATALOG = ROOT / "experiments"
KILOCARD = [sys.executable, "-m", "chaos.cli"]
MODEL = "llama-3-70b"
WEIGHTS = "meta-llama/Llama-3.1-70B-Instruct"
# The rows whose pods LWS's real controller makes, from LWS's example for each engine.
LWS = {"LeaderWorkerSet (vLLM)": "vllm", "LeaderWorkerSet (SGLang)": "sglang"}
KSERVE = "KServe"  # the row whose pods KServe's real controller makes
CROSS = "LWS + KServe, cross-node"
BIG, BIG_WEIGHTS = "llama-3-405b", "meta-llama/Llama-3.1-405B-Instruct"
STACKS = [*stacks.SHAPES, KSERVE, *LWS, CROSS]
# Scenario -> (file, the exit code and verdict the catalog's own tests want on kilocard's fleet).
SCENARIOS = {
    "S1": ("s1-kill-one-replica.yaml", 0, "passed"),
    "S2": ("s2-isolate-one-card.yaml", 0, "passed"),
    "S3": ("s3-ecc-one-tp-member.yaml", 0, "passed"),
    "S7": ("s7-kill-every-replica.yaml", 0, "aborted"),
    "S9": ("s9-stalled-rank.yaml", 0, "aborted"),
}
# The cross-node row's scenarios, and the run's own variables ({rack}: the pool's rack label).
CROSS_SCENARIOS = {
    "S4": ("s4-top-of-hour-congestion.yaml", 0, "passed", ["--var", "rack={rack}"]),
    "S6": ("s6-tp16-vs-tp8-network.yaml", 0, "passed", []),
    "S10": ("s10-tp16-tcp-resets.yaml", 0, "passed", []),
}
RACK_LABEL = "kilocard.io/rack"
_POOLS = itertools.count()


def pool(kube: Kube, config: TestbedConfig, size: int) -> tuple[str, list[str]]:
    """`size` fresh 8-card nodes labelled and tainted as one pool (its name is its namespace's)."""
    name = f"stack{next(_POOLS)}"
    manifests = []
    for i in range(size):
        m = nodes.node_manifest(i, config, prefix=name, extra_labels={fleet.POOL_LABEL: name})
        m["spec"]["taints"] = [{"key": fleet.POOL_LABEL, "value": name, "effect": "NoSchedule"}]
        manifests.append(m)
    nodes.create_nodes(kube, manifests)
    kube.wait_until("nodes", lambda items: sum(node_ready(n) and not any(
        t.key == "node.kubernetes.io/not-ready" for t in (n.spec.taints or [])) for n in items) == size,
        timeout=60, label_selector=f"{fleet.POOL_LABEL}={name}")
    return name, [m["metadata"]["name"] for m in manifests]


def serving(tb: Testbed, namespace: str, replicas: dict[str, int]) -> None:
    """Until Prometheus has every replica's P95 TTFT (the steady state's first look needs it)."""
    from prometheus_api_client import PrometheusConnect

    from probes import metric_names, slo
    prom = PrometheusConnect(tb.prometheus_url)
    deadline = time.monotonic() + 60

    def every() -> bool:
        try:
            return all(len(slo.values(prom, slo.indicator(prom, "ttft_p95", model, namespace, "10s", by="pod"))) >= n
                       for model, n in replicas.items())
        except metric_names.MetricNotFound:
            return False
    while time.monotonic() < deadline:
        if every():
            return
        time.sleep(1)
    raise TimeoutError(f"{namespace}: no P95 TTFT for every replica within 60 s")


def settled(kube: Kube, namespace: str, seconds: float = 30.0) -> None:
    """Until every pod has been Ready `seconds` (S9's hung-group probe judges a replica only after
    its window: a fresh replica is "settling", and the steady state cannot be judged)."""
    import datetime as dt

    since = [c["lastTransitionTime"] for p in kube.list_pods_raw(namespace)
             for c in p["status"].get("conditions") or [] if c["type"] == "Ready" and c["status"] == "True"]
    last = max(dt.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in since)
    time.sleep(max(0.0, last + seconds - time.time()))


def one(tb: Testbed, kube: Kube, stack: str, scenario: str, out: Path, extra: list[str]) -> dict[str, object]:
    file, want_code, want_verdict, own = (*SCENARIOS[scenario], []) if stack != CROSS else CROSS_SCENARIOS[scenario]
    name, made = pool(kube, tb.config, 6 if stack == CROSS else 3)
    here = out / stack.replace(" ", "-").replace(",", "") / scenario
    here.mkdir(parents=True, exist_ok=True)
    served = {MODEL: 2}
    try:
        objects = fleet.pinned(fleet.only(fleet.load("default", tb.config.card_resource, namespace=name), MODEL), name)
        if stack == CROSS:
            for node in made:
                kube.patch_node(node, {"metadata": {"labels": {RACK_LABEL: f"rack-{name}"}}})
            fleet.apply(kube, [o for o in objects if o["kind"] == "Namespace"])
            kube.apply(lws.example("vllm", name, name, BIG, BIG_WEIGHTS, cards=8, pods=2, replicas=2,
                                   card_resource=tb.config.card_resource))
            kube.apply(kserve.inference_service(name, name, MODEL, WEIGHTS, cards=8, replicas=2,
                                                card_resource=tb.config.card_resource))
            kube.wait_ready("pods", 6, timeout=180, namespace=name)
            served = {MODEL: 2, BIG: 2}  # a group serves (and is measured) as one replica
        elif stack in LWS:
            fleet.apply(kube, [o for o in objects if o["kind"] == "Namespace"])
            kube.apply(lws.example(LWS[stack], name, name, MODEL, WEIGHTS, cards=8, pods=1, replicas=2,
                                   card_resource=tb.config.card_resource))
            kube.wait_ready("pods", 2, timeout=120, namespace=name)
        elif stack == KSERVE:
            fleet.apply(kube, [o for o in objects if o["kind"] == "Namespace"])
            kube.apply(kserve.inference_service(name, name, MODEL, WEIGHTS, cards=8, replicas=2,
                                                card_resource=tb.config.card_resource))
            kube.wait_ready("pods", 2, timeout=120, namespace=name)
        else:
            objects = stacks.shaped(timing.stamp(fleet.scaled(objects, {MODEL: 2}), "default"), stack)
            fleet.deploy(kube, objects, timeout=120, say=lambda _m: None)
        assert not any(k.startswith(stacks.KILOCARD) for p in kube.list_pods_raw(name)
                       for k in p["metadata"].get("labels") or {}), "a kilocard label on a stack's pod"
        serving(tb, name, served)
        settled(kube, name)
        started = time.monotonic()
        given = [a.format(rack=f"rack-{name}") for a in own]
        done = subprocess.run([*KILOCARD, "run", str(CATALOG / file), "--var", f"namespace={name}", *given, *extra,
                               "--kubeconfig", str(tb.paths.kubeconfig), "--prometheus-url", tb.prometheus_url,
                               "--ledger-dir", str(here / "ledger"), "--journal", str(here / "journal.json"),
                               "--reports", str(here / "reports")], capture_output=True, text=True, timeout=900)
        seconds = time.monotonic() - started
        (here / "output.txt").write_text(done.stdout + done.stderr)
        journal = json.loads((here / "journal.json").read_text())["kilocard"] if (here / "journal.json").is_file() \
            else {"verdict": "?", "reason": (done.stderr.strip().splitlines() or ["?"])[-1]}
        as_wanted = done.returncode == want_code and journal["verdict"] == want_verdict
        return {"stack": stack, "scenario": scenario, "exit": done.returncode, "verdict": journal["verdict"],
                "as_wanted": as_wanted, "seconds": round(seconds), "reason": journal["reason"]}
    finally:
        kube.delete_namespace(name)
        nodes.delete_nodes(kube, made)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-base", type=int, default=29443)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "stacks")
    parser.add_argument("--stack", action="append", choices=STACKS)
    parser.add_argument("--scenario", action="append", choices=[*SCENARIOS, *CROSS_SCENARIOS],
                        help="of the single-model scenarios, or (for the cross-node row) S4, S6, S10")
    parser.add_argument("--var", action="append", default=[], metavar="NAME[:TYPE]=VALUE",
                        help="passed to every run (a twin: the table is the catalog unchanged)")
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="kilocard-stacks-"))
    tb = Testbed(TestbedConfig(nodes=1, port_base=args.port_base, state_dir=state).validate())
    tb.up(say=lambda _m: None, timeout=180)
    kube = tb.kube()
    rows = []
    controllers = [c(tb, kube).start() for c, rows in ((lws.Controller, {*LWS, CROSS}),
                                                        (kserve.Controller, {KSERVE, CROSS}))
                   if rows & set(args.stack or STACKS)]
    try:
        for stack in args.stack or STACKS:
            ours = CROSS_SCENARIOS if stack == CROSS else SCENARIOS
            for scenario in [s for s in args.scenario or ours if s in ours]:
                row = one(tb, kube, stack, scenario, args.out, [w for v in args.var for w in ("--var", v)])
                rows.append(row)
                mark = "as the catalog wants" if row["as_wanted"] else "NOT AS WANTED"
                print(f"{stack:<24} {scenario:<4} {row['verdict']:<8} exit {row['exit']} ({mark}) {row['seconds']:4} s"
                      f"  {str(row['reason'])[:140]}", flush=True)
    finally:
        for controller in controllers:
            controller.stop()
        kube.close()
        tb.down(say=lambda _m: None)
    (args.out / "table.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"\n{sum(bool(r['as_wanted']) for r in rows)} of {len(rows)} as the catalog wants")
    return 0 if all(r["as_wanted"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
