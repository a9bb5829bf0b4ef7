"""Measure the testbed: build times (from the cache's build records), warm `up` time to all cards
allocatable with the default fleet Ready, and the steady CPU and memory of the running testbed.

    .venv/bin/python bench/testbed_up.py [--nodes 128] [--timing default] [--window 60] [--json out.json]
    .venv/bin/python bench/testbed_up.py --nodes 1250     # 10,000 cards with the large fleet

From 1,000 nodes the fleet is the large one (760 pods), applied while the nodes register, as
`kilocard testbed up --fleet large` does.

The wait is split into the control plane with its nodes, the fleet's own start-up (the slowest
replica's image pull, weight loading and warm-up under --timing) and what is left: applying,
scheduling and kwok's reaction time.

Starts its own testbed in a temporary state folder and stops it at the end. Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from testbed import build, fleet, processes, timing
from testbed.cluster import Testbed
from testbed.config import LARGE, TestbedConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--cards-per-node", type=int, default=8)
    parser.add_argument("--window", type=float, default=60.0, help="seconds of steady-state sampling")
    parser.add_argument("--port-base", type=int, default=26443)
    parser.add_argument("--runs", type=int, default=3, help="how many up/down cycles to time")
    parser.add_argument("--timing", choices=timing.NAMES, default="default", help="the fleet's start-up profile")
    parser.add_argument("--json", type=Path, help="write the figures here (bench/performance.py reads them)")
    args = parser.parse_args()

    print("build (from build.json; 'seconds' is the last build of each component):")
    for record in build.build_records():
        print(f"  {record['component']:<5} {record['version']:<8} {record['seconds']:>7.1f} s  ({record['built_at']})")

    ups: list[float] = []
    with tempfile.TemporaryDirectory(prefix="kilocard-bench-") as state:
        config = TestbedConfig(nodes=args.nodes, cards_per_node=args.cards_per_node, port_base=args.port_base,
                               state_dir=Path(state)).validate()
        tb = Testbed(config)
        objects = timing.stamp(fleet.load("large" if args.nodes >= 1000 else "default", config.card_resource),
                               args.timing)
        early = config.tuning is LARGE
        start_up = timing.slowest_start(objects, args.timing)
        try:  # a bench that fails or is stopped still takes its testbed down
            for run in range(args.runs):
                started = time.monotonic()
                tb.up(say=lambda _m: None, before_nodes=(lambda kube: fleet.apply(kube, objects)) if early else None)
                up_seconds = time.monotonic() - started
                kube = tb.kube()
                fleet.deploy(kube, objects, timeout=300 + start_up, say=lambda _m: None)
                total = time.monotonic() - started
                status = tb.status()
                print(f"run {run + 1}: control plane + {status['nodes']['ready']} nodes in {up_seconds:.1f} s; "
                      f"{status['cards']['allocatable']} cards allocatable and "
                      f"{fleet.expected_pods(objects)} fleet pods "
                      f"Ready in {total:.1f} s = {up_seconds:.1f} s up + {start_up:.1f} s slowest start-up "
                      f"(--timing {args.timing}) + {total - up_seconds - start_up:.1f} s apply, schedule, kwok")
                ups.append(total)
                if run < args.runs - 1:
                    kube.close()
                    tb.down(say=lambda _m: None)

            # Steady state: CPU over a window with the fleet running and kwok heartbeating every node.
            procs = tb.procs()
            before = processes.usage(procs)
            time.sleep(args.window)
            after = processes.usage(procs)
            kube.close()
            print(f"\nsteady state over {args.window:.0f} s ({args.nodes} nodes, "
                  f"{args.nodes * args.cards_per_node} cards, "
                  f"{fleet.expected_pods(objects)} fleet pods):")
            print(f"  {'process':<24} {'cores':>6} {'RSS MiB':>8}")
            cores_total = rss_total = 0.0
            steady = {}
            for p in procs:
                cores = (after[p.name][0] - before[p.name][0]) / args.window
                rss = after[p.name][1] / 2**20
                cores_total += cores
                rss_total += rss
                steady[p.name] = {"cores": cores, "rss_mib": rss}
                print(f"  {p.name:<24} {cores:>6.3f} {rss:>8.0f}")
            print(f"  {'total':<24} {cores_total:>6.3f} {rss_total:>8.0f}")
        finally:
            tb.down(say=lambda _m: None)
    print(f"\nwarm up to {args.nodes * args.cards_per_node} cards with the fleet Ready (--timing {args.timing}): "
          f"median {statistics.median(ups):.1f} s over {len(ups)} runs (goal <= 60 s)")
    if args.json:
        args.json.write_text(json.dumps({
            "nodes": args.nodes, "cards": args.nodes * args.cards_per_node, "pods": fleet.expected_pods(objects),
            "timing": args.timing, "profile": "large" if early else "small", "up_seconds": ups,
            "steady": steady, "cores": cores_total, "rss_mib": rss_total, "window": args.window}, indent=2) + "\n")


if __name__ == "__main__":
    main()
