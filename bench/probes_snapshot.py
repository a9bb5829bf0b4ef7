"""Placement + TP groups + capacity + room over the testbed's fleet: wall time and apiserver
requests, and recovery tracking's watches, at --nodes (128: the 1,024-card default fleet; 1250:
10,000 cards and the large fleet).

    .venv/bin/python bench/probes_snapshot.py [--nodes 128] [--repeat 20] [--json out.json]

The snapshot is two lists (pods, nodes) sent at once and read from the apiserver's watch cache
(resourceVersion=0), then, as in a run, read from the run's follower (chaos.follower: two LISTs
and two watches once, then memory); the probes are pure functions over it. Requests are the apiserver's own
apiserver_request_total for LIST of pods and nodes around each measurement (all clients: the
testbed's controllers list rarely, so a stray one shows as a max above 2). Recovery tracking
follows every fleet pod for --follow seconds; its LIST and WATCH requests are counted the same
way. Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chaos.follower import Follower  # noqa: E402
from probes import capacity, placement, recovery, snapshot, tp_groups  # noqa: E402
from testbed import fleet  # noqa: E402
from testbed.cluster import Testbed  # noqa: E402
from testbed.config import TestbedConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--port-base", type=int, default=26443)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--follow", type=float, default=60.0, help="seconds of recovery tracking to count")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    demand = capacity.Demand(qps=40, prompt_tokens=1024, output_tokens=256, latency_seconds=2.0)
    with tempfile.TemporaryDirectory(prefix="kilocard-bench-") as state:
        tb = Testbed(TestbedConfig(nodes=args.nodes, port_base=args.port_base, state_dir=Path(state),
                                   remediation=False).validate())
        tb.up(say=lambda _m: None)
        kube = tb.kube()
        try:
            fleet.deploy(kube, fleet.load("large" if args.nodes >= 1000 else "default", tb.config.card_resource),
                         timeout=600, say=print)
            time.sleep(5)

            def measure() -> tuple[list[float], list[float], snapshot.ClusterSnapshot, list[Any]]:
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
                return times, calls, s, verdicts

            times, calls, s, verdicts = measure()
            # The same with the run's follower: its two LISTs and two watches once, then memory.
            started = time.perf_counter()
            follower = Follower(kube).start()
            follow_start = time.perf_counter() - started
            try:
                followed_times, followed_calls, _s, followed_verdicts = measure()
            finally:
                follower.stop()
            assert [v.ok for v in followed_verdicts] == [v.ok for v in verdicts]
            print(f"{len(s.nodes)} nodes, {sum(n.cards_capacity for n in s.nodes)} cards, {len(s.pods)} replica pods")
            for v in verdicts:
                print(f"  {'ok    ' if v.ok else 'FAILED'} {v.reason[:150]}")
            before = {verb: tb.apiserver_requests(("pods",), (verb,)) for verb in ("LIST", "WATCH")}
            with recovery.Recorder(kube, fleet.DEFAULT_NAMESPACE, s.models()):
                time.sleep(args.follow)
            followed = {verb: tb.apiserver_requests(("pods",), (verb,)) - before[verb] for verb in before}
        finally:
            kube.close()
            tb.down(say=lambda _m: None)
    figures = {"nodes": args.nodes, "cards": args.nodes * 8, "pods": len(s.pods),
               "seconds": {"median": statistics.median(times), "min": min(times), "max": max(times)},
               "requests": {"median": statistics.median(calls), "min": min(calls), "max": max(calls)},
               "followed": {"start_seconds": follow_start,
                            "seconds": {"median": statistics.median(followed_times), "min": min(followed_times),
                                        "max": max(followed_times)},
                            "requests": {"median": statistics.median(followed_calls), "min": min(followed_calls),
                                         "max": max(followed_calls)}},
               "recovery_tracking": {"seconds": args.follow, **followed}}
    print(f"placement + TP + capacity + room: median {figures['seconds']['median'] * 1000:.0f} ms "
          f"({min(times) * 1000:.0f}-{max(times) * 1000:.0f}) over {args.repeat} runs (goal <= 500 ms at 10k cards); "
          f"LIST pods+nodes per run: median {statistics.median(calls):.0f}, max {max(calls):.0f} (goal 2-4)")
    print(f"with the run's follower (started in {follow_start * 1000:.0f} ms: 2 LISTs, 2 watches): median "
          f"{statistics.median(followed_times) * 1000:.0f} ms ({min(followed_times) * 1000:.0f}-"
          f"{max(followed_times) * 1000:.0f}), LIST pods+nodes per run: median {statistics.median(followed_calls):.0f}")
    print(f"recovery tracking of {len(s.pods)} pods for {args.follow:.0f} s: {followed['LIST']:.0f} pod LIST, "
          f"{followed['WATCH']:.0f} pod WATCH requests (all clients)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
