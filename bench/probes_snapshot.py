"""Placement + TP groups + capacity (+ room to reschedule) over the 1024-card testbed: wall time and API calls.

    .venv/bin/python bench/probes_snapshot.py [--port-base 26443] [--repeat 20]

The snapshot is two list calls (pods, nodes); the probes are pure functions over it. Counts the
apiserver's own LIST requests around the measurement. Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from probes import capacity, placement, snapshot, tp_groups
from testbed import fleet
from testbed.cluster import Testbed
from testbed.config import TestbedConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-base", type=int, default=26443)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    demand = capacity.Demand(qps=40, prompt_tokens=1024, output_tokens=256, latency_seconds=2.0)
    with tempfile.TemporaryDirectory(prefix="kilocard-bench-") as state:
        tb = Testbed(TestbedConfig(port_base=args.port_base, state_dir=Path(state), remediation=False).validate())
        tb.up(say=lambda _m: None)
        kube = tb.kube()
        try:
            fleet.deploy(kube, fleet.load("default", tb.config.card_resource), say=print)
            times, calls = [], []
            for _ in range(args.repeat):
                before = tb.apiserver_requests(("pods", "nodes"), ("LIST",), "cluster")
                started = time.perf_counter()
                s = snapshot.fetch(kube)
                verdicts = [placement.anti_affinity(s, m) for m in s.models()]
                verdicts.append(tp_groups.check(s))
                verdicts.append(capacity.fits(s, "llama-3-70b", demand))
                verdicts.append(capacity.room(s, "llama-3-70b"))  # N+1: the loss of each of its nodes
                times.append(time.perf_counter() - started)
                calls.append(tb.apiserver_requests(("pods", "nodes"), ("LIST",), "cluster") - before)
            print(f"{len(s.nodes)} nodes, {sum(n.cards_capacity for n in s.nodes)} cards, {len(s.pods)} replica pods")
            for v in verdicts:
                print(f"  {'ok    ' if v.ok else 'FAILED'} {v.reason}")
            print(f"placement + TP + capacity + room: median {statistics.median(times) * 1000:.0f} ms, "
                  f"max {max(times) * 1000:.0f} ms over {args.repeat} runs (goal <= 200 ms); "
                  f"apiserver LIST pods+nodes per run: median {statistics.median(calls):.0f}, max {max(calls):.0f} "
                  "(goal <= 2; the counter also sees other clients' lists)")
        finally:
            kube.close()
            tb.down(say=lambda _m: None)


if __name__ == "__main__":
    main()
