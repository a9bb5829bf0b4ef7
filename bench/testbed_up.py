"""Measure the testbed: build times (from the cache's build records), warm `up` time to all cards
allocatable with the fleet Ready, and the steady CPU and memory of the running testbed.

    .venv/bin/python bench/testbed_up.py [--nodes 128] [--timing default] [--window 60] [--json out.json]
    .venv/bin/python bench/testbed_up.py --nodes 1250     # 10,000 cards with the large fleet
    .venv/bin/python bench/testbed_up.py --accelerator ascend   # the same on Ascend NPUs (MindX DL's parts)

Each run is what a user types, in a fresh process: `kilocard testbed up --nodes N --fleet F`
(from 1,000 nodes the large fleet, which that command applies while the nodes register), timed
from the process's start to its exit, and split as the command reports it: the control plane
with its nodes, then the fleet until every pod is Ready (the slowest replica's start-up under
--timing is part of it). After the last run the testbed's processes are sampled over --window
seconds. Starts its own testbed in a temporary state folder and stops it at the end. Not a test.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testbed import accelerators, build, fleet, processes, timing  # noqa: E402
from testbed.cluster import Testbed  # noqa: E402
from testbed.config import TestbedConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--cards-per-node", type=int, default=8)
    parser.add_argument("--accelerator", choices=sorted(accelerators.PROFILES), default="nvidia",
                        help="whose cards: ascend adds the device plugin's ConfigMaps and npu-exporter")
    parser.add_argument("--window", type=float, default=60.0, help="seconds of steady-state sampling")
    parser.add_argument("--port-base", type=int, default=26443)
    parser.add_argument("--runs", type=int, default=3, help="how many up/down cycles to time")
    parser.add_argument("--timing", choices=timing.NAMES, default="default", help="the fleet's start-up profile")
    parser.add_argument("--json", type=Path, help="write the figures here (bench/performance.py reads them)")
    args = parser.parse_args()

    print("build (from build.json; 'seconds' is the last build of each component):")
    for record in build.build_records():
        print(f"  {record['component']:<5} {record['version']:<8} {record['seconds']:>7.1f} s  ({record['built_at']})")
    name = "large" if args.nodes >= 1000 else "default"
    accelerator = accelerators.named(args.accelerator)
    config = TestbedConfig(nodes=args.nodes, cards_per_node=args.cards_per_node, port_base=args.port_base,
                           state_dir=Path("/nonexistent"), accelerator=accelerator.name,
                           card_resource=accelerator.card_resource, card_product=accelerator.card_product).validate()
    objects = timing.stamp(fleet.load(name, config.card_resource), args.timing)
    pods, start_up = fleet.expected_pods(objects), timing.slowest_start(objects, args.timing)
    ups: list[float] = []
    splits: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="kilocard-bench-") as state:
        cli = [sys.executable, "-m", "chaos.cli", "testbed"]
        where = ["--state-dir", state]
        try:
            for run in range(args.runs):
                started = time.monotonic()
                done = subprocess.run([*cli, "up", "--nodes", str(args.nodes), "--cards-per-node",
                                       str(args.cards_per_node), "--accelerator", args.accelerator, "--port-base",
                                       str(args.port_base), "--fleet", name, "--timing", args.timing, *where],
                                      capture_output=True, text=True)
                if done.returncode:
                    raise SystemExit(f"testbed up failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
                total = time.monotonic() - started
                nodes_s = float(re.search(r"testbed up in ([\d.]+) s", done.stdout).group(1))  # type: ignore[union-attr]
                fleet_s = float(re.search(r"fleet Ready in ([\d.]+) s", done.stdout).group(1))  # type: ignore[union-attr]
                print(f"run {run + 1}: {total:.1f} s to {pods} fleet pods Ready on {args.nodes * args.cards_per_node} "
                      f"cards: control plane + nodes {nodes_s:.1f} s, then the fleet {fleet_s:.1f} s "
                      f"(its slowest start-up under --timing {args.timing}: {start_up:.1f} s)", flush=True)
                ups.append(total)
                splits.append((nodes_s, fleet_s))
                if run < args.runs - 1:
                    subprocess.run([*cli, "down", *where], capture_output=True, check=True)
            tb = Testbed.from_state(Path(state))
            assert tb is not None and tb.running()
            profile = "large" if tb.config.large else "small"
            # Steady state: CPU over a window with the fleet running and kwok heartbeating every node.
            procs = tb.procs()
            before = processes.usage(procs)
            time.sleep(args.window)
            after = processes.usage(procs)
        finally:
            subprocess.run([*cli, "down", *where], capture_output=True)
    print(f"\nsteady state over {args.window:.0f} s ({args.nodes * args.cards_per_node} cards, {pods} fleet pods, "
          f"profile {profile}):")
    print(f"  {'process':<24} {'cores':>6} {'RSS MiB':>8}")
    steady = {p.name: {"cores": (after[p.name][0] - before[p.name][0]) / args.window,
                       "rss_mib": after[p.name][1] / 2**20} for p in procs}
    for process, v in steady.items():
        print(f"  {process:<24} {v['cores']:>6.3f} {v['rss_mib']:>8.0f}")
    cores, rss = sum(v["cores"] for v in steady.values()), sum(v["rss_mib"] for v in steady.values())
    print(f"  {'total':<24} {cores:>6.3f} {rss:>8.0f}")
    print(f"\nwarm up to {args.nodes * args.cards_per_node} cards with the fleet Ready (--timing {args.timing}): "
          f"median {statistics.median(ups):.1f} s over {len(ups)} runs (goal <= 60 s at 10,000 cards)")
    if args.json:
        args.json.write_text(json.dumps({
            "nodes": args.nodes, "cards": args.nodes * args.cards_per_node, "pods": pods, "timing": args.timing,
            "accelerator": args.accelerator,
            "profile": profile, "up_seconds": ups, "splits": splits, "steady": steady, "cores": cores,
            "rss_mib": rss, "window": args.window}, indent=2) + "\n")


if __name__ == "__main__":
    main()
