"""What an experiment costs the apiserver, and whether its verdict holds at scale: S1 and S3
through `kilocard run` on a testbed of --nodes, with each one's verdict and its apiserver reads
per experiment-minute, against a polling equivalent: chaostoolkit-kubernetes' `pods_in_phase`
and `all_pods_healthy` on the fleet's namespace once a second for as long as the experiment ran.

    .venv/bin/pip install chaostoolkit-kubernetes==0.39.0   # the polling equivalent
    .venv/bin/python bench/api_load.py [--nodes 128] [--runs 3] [--json out.json]
    .venv/bin/python bench/api_load.py --nodes 1250             # 10,000 cards, the large fleet

Requests come from the apiserver's own apiserver_request_total: reads (GET, LIST, WATCH) of pods,
nodes, configmaps, events and namespaces, all clients, less the testbed's idle rate measured
just before (the controllers and kwok keep their watches open; leases are not counted). Writes
are left out: the fault's own DELETEs and the controllers' reactions are what is under test, not
overhead. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testbed import fleet, timing  # noqa: E402
from testbed.cluster import Testbed  # noqa: E402
from testbed.config import TestbedConfig  # noqa: E402

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
SCENARIOS = ("s1-kill-one-replica.yaml", "s3-ecc-one-tp-member.yaml")
RESOURCES = ("pods", "nodes", "configmaps", "events", "namespaces")
READS = ("GET", "LIST", "WATCH")


def reads(tb: Testbed) -> float:
    return tb.apiserver_requests(RESOURCES, READS) + tb.apiserver_requests(("pods",), READS, subresource="log")


def settle(tb: Testbed, expected: int) -> None:
    """Every fleet pod Ready again, then a quiet moment for the controllers."""
    kube = tb.kube()
    try:
        kube.wait_ready("pods", expected, 600, fleet.DEFAULT_NAMESPACE)
    finally:
        kube.close()
    time.sleep(10)


def poll(kubeconfig: str, seconds: float) -> int:
    """chaostoolkit-kubernetes' probes once a second, as an experiment polling for health would."""
    from chaosk8s.pod.probes import all_pods_healthy, pods_in_phase
    from kubernetes.config import kube_config

    os.environ["KUBECONFIG"] = kubeconfig
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = kubeconfig
    calls, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        for probe in (lambda: pods_in_phase("kilocard.io/model=llama-3-70b", "Running", fleet.DEFAULT_NAMESPACE),
                      lambda: all_pods_healthy(fleet.DEFAULT_NAMESPACE, raise_on_any_unhealthy=False)):
            try:
                probe()
            except Exception:  # noqa: BLE001 - an unhealthy fleet is an answer, not an error here
                pass
            calls += 1
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle baseline before each run")
    parser.add_argument("--port-base", type=int, default=26443)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    try:
        import chaosk8s  # noqa: F401
    except ImportError:
        raise SystemExit("install the polling equivalent: "
                         ".venv/bin/pip install chaostoolkit-kubernetes==0.39.0") from None

    results: dict[str, list[dict[str, float | str]]] = {s: [] for s in (*SCENARIOS, "polling")}
    with tempfile.TemporaryDirectory(prefix="kilocard-bench-") as state:
        tb = Testbed(TestbedConfig(nodes=args.nodes, port_base=args.port_base, state_dir=Path(state)).validate())
        tb.up(say=lambda _m: None)
        try:
            objects = timing.stamp(fleet.load("large" if args.nodes >= 1000 else "default", tb.config.card_resource),
                                   "default")
            kube = tb.kube()
            fleet.deploy(kube, objects, timeout=600, say=print)
            kube.close()
            expected = fleet.expected_pods(objects)

            def idle_rate() -> float:
                before = reads(tb)
                time.sleep(args.idle)
                return (reads(tb) - before) / args.idle

            for run in range(args.runs):
                for scenario in SCENARIOS:
                    settle(tb, expected)
                    baseline = idle_rate()
                    journal = Path(state) / f"{scenario}-{run}.json"
                    before, started = reads(tb), time.monotonic()
                    done = subprocess.run(
                        [sys.executable, "-m", "chaos.cli", "run", str(EXPERIMENTS / scenario), "--kubeconfig",
                         str(tb.paths.kubeconfig), "--prometheus-url", tb.prometheus_url, "--journal", str(journal),
                         "--ledger-dir", str(Path(state) / "ledger"), "--no-report"],
                        capture_output=True, text=True, timeout=1200)
                    wall = time.monotonic() - started
                    own = reads(tb) - before - baseline * wall
                    verdict = json.loads(journal.read_text())["kilocard"]["verdict"] if journal.is_file() else "none"
                    results[scenario].append({"verdict": verdict, "exit": done.returncode, "seconds": wall,
                                              "reads_per_minute": own / wall * 60})
                    print(f"run {run + 1} {scenario:<28} {verdict:<8} exit {done.returncode} {wall:6.1f} s "
                          f"{own / wall * 60:7.1f} reads/min (idle {baseline * 60:.0f}/min subtracted)", flush=True)
                settle(tb, expected)
                baseline = idle_rate()
                seconds = statistics.median(float(r["seconds"]) for r in results[SCENARIOS[0]])
                before, started = reads(tb), time.monotonic()
                calls = poll(str(tb.paths.kubeconfig), seconds)
                wall = time.monotonic() - started
                own = reads(tb) - before - baseline * wall
                results["polling"].append({"verdict": "-", "exit": 0, "seconds": wall,
                                           "reads_per_minute": own / wall * 60, "probe_calls": calls})
                print(f"run {run + 1} {'polling at 1 s':<28} {'-':<8} {calls} probe calls {wall:6.1f} s "
                      f"{own / wall * 60:7.1f} reads/min", flush=True)
        finally:
            tb.down(say=lambda _m: None)

    polling = statistics.median(float(r["reads_per_minute"]) for r in results["polling"])
    summary = {}
    print(f"\n{args.nodes} nodes ({args.nodes * 8} cards), median over {args.runs} runs:")
    for scenario in SCENARIOS:
        rows = results[scenario]
        rate = statistics.median(float(r["reads_per_minute"]) for r in rows)
        summary[scenario] = {"verdicts": sorted({str(r["verdict"]) for r in rows}), "reads_per_minute": rate,
                             "min": min(float(r["reads_per_minute"]) for r in rows),
                             "max": max(float(r["reads_per_minute"]) for r in rows),
                             "seconds": statistics.median(float(r["seconds"]) for r in rows),
                             "share_of_polling": rate / polling if polling else float("nan")}
        print(f"  {scenario:<28} verdicts {'/'.join(summary[scenario]['verdicts']):<8} {rate:7.1f} reads/min = "
              f"{rate / polling:.3f} of polling's {polling:.1f} (goal <= 0.1)")
    if args.json:
        args.json.write_text(json.dumps({"nodes": args.nodes, "runs": results, "summary": summary,
                                         "polling_reads_per_minute": polling}, indent=2) + "\n")


if __name__ == "__main__":
    main()
