"""Tracking the recovery of a 100-pod kill: kilocard's watch-based recorder vs a polling loop in
the style of chaostoolkit-kubernetes `pods_in_phase` (list the pods every second), on the same
testbed in the same run. Precision is measured against the apiserver's audit log (microsecond
stage timestamps of each replacement's Ready status write: its last status write, as kwok writes
its IP and Running before it); API requests are the tracker's own, read from the apiserver's
apiserver_request_total (namespace-scoped pod LIST and WATCH: every other client of the testbed
lists and watches cluster-wide; the kill's own list is subtracted).

    .venv/bin/python bench/recovery_tracking.py [--pods 100] [--interval 1.0] [--port-base 26443]

Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from chaos import ledger, plan
from chaos.agent.client import AgentClient
from chaos.faults import Context
from chaos.kube import Kube, pod_ready
from probes import recovery
from testbed import audit, fleet
from testbed.cluster import Testbed
from testbed.config import TestbedConfig

MODEL = "llama-2-7b"
NS = fleet.DEFAULT_NAMESPACE
SELECTOR = f"kilocard.io/model={MODEL}"


def kill(kube: Kube, n: int, tag: str) -> float:
    ctx = Context(kube, AgentClient(kube), f"bench-{tag}", say=lambda _m: None)
    with tempfile.TemporaryDirectory() as d:
        fault_at = time.time()
        plan.inject(ctx, ledger.Ledger(ctx.run_id, kube, Path(d)),
                      {"kind": "pod-kill", "namespace": NS, "label_selector": SELECTOR, "count": n, "grace_seconds": 0})
    return fault_at


def errors(seen_ready: dict[str, float], writes: list[audit.Write], fault_at: float) -> list[float]:
    out = []
    for pod, at in seen_ready.items():
        truth = audit.last(writes, "patch", pod, "status", after=fault_at - 1)
        if truth is not None:
            out.append(at - truth.at)
    return out


def namespaced_pod_reads(tb: Testbed) -> float:
    return tb.apiserver_requests(("pods",), ("LIST", "WATCH"), "namespace")


def track_by_watch(kube: Kube, tb: Testbed, n: int, replicas: int) -> tuple[list[float], float]:
    before = namespaced_pod_reads(tb)
    with recovery.Recorder(kube, NS, [MODEL]) as rec:
        fault_at = kill(kube, n, "watch")
        while sum(e.phase == "ready" for e in rec.events) < n:  # in-process: no API call
            time.sleep(0.05)
    ready = {e.pod: e.at for e in rec.events if e.phase == "ready"}
    return errors(ready, audit.pod_writes(tb.paths.audit_log, NS), fault_at), namespaced_pod_reads(tb) - before - 1


def track_by_polling(kube: Kube, tb: Testbed, n: int, replicas: int, interval: float) -> tuple[list[float], float]:
    before = {p.metadata.name for p in kube.list_pods(NS, SELECTOR).items}
    reads = namespaced_pod_reads(tb)
    fault_at = kill(kube, n, "poll")
    seen_ready: dict[str, float] = {}
    polls = 0
    while True:
        pods = kube.list_pods(NS, SELECTOR).items
        polls += 1
        now = time.time()
        for p in pods:
            if p.metadata.name not in before and pod_ready(p):
                seen_ready.setdefault(p.metadata.name, now)
        if sum(pod_ready(p) for p in pods) == replicas and len(pods) == replicas:
            break
        time.sleep(interval)
    assert polls > 0
    return errors(seen_ready, audit.pod_writes(tb.paths.audit_log, NS), fault_at), namespaced_pod_reads(tb) - reads - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--replicas", type=int, default=200)
    parser.add_argument("--interval", type=float, default=1.0, help="polling period of the poller")
    parser.add_argument("--port-base", type=int, default=26443)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kilocard-bench-") as state:
        tb = Testbed(TestbedConfig(port_base=args.port_base, state_dir=Path(state), remediation=False).validate())
        tb.up(say=lambda _m: None)
        kube = tb.kube()
        try:
            fleet.deploy(kube, fleet.scaled(fleet.load("default", tb.config.card_resource), {MODEL: args.replicas}),
                         say=print)
            results = {}
            for name, track in (("watch (kilocard)", lambda: track_by_watch(kube, tb, args.pods, args.replicas)),
                                (f"polling every {args.interval:g} s",
                                 lambda: track_by_polling(kube, tb, args.pods, args.replicas, args.interval))):
                time.sleep(2)
                errs, requests = track()
                results[name] = (errs, requests)
                absolute = [abs(e) for e in errs]
                print(f"{name:<22} {len(errs)} Ready times: error vs audit log mean {statistics.mean(absolute):.3f} s, "
                      f"max {max(absolute):.3f} s; {requests:.0f} pod LIST/WATCH requests (apiserver_request_total)")
            (w, wr), (p, pr) = results.values()
            gain = statistics.mean(abs(e) for e in p) / max(statistics.mean(abs(e) for e in w), 1e-6)
            print(f"\nwatch is {gain:.0f}x "
                  f"more precise (mean error) with {wr:.0f} requests vs {pr:.0f}")
        finally:
            kube.close()
            tb.down(say=lambda _m: None)


if __name__ == "__main__":
    main()
