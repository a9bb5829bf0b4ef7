"""Kill 100 pods spread over the 1024-card testbed: kilocard's pod-kill vs chaostoolkit-kubernetes'
`terminate_pods`, on the same testbed in the same run. Prints wall time, apiserver requests
(from the apiserver's own apiserver_request_total) and the ratio.

    .venv/bin/pip install chaostoolkit-kubernetes==0.39.0   # the tool compared with; not a kilocard dependency
    .venv/bin/python bench/pod_kill.py [--pods 100] [--rounds 5] [--settle 3] [--port-base 26443]

Each round: the 7B model is scaled to 200 replicas and Ready; one tool kills `--pods` of them; the
fleet is let come back and settle; then the other tool. kilocard's first round pays for opening its
connections (TLS), as a fresh `kilocard fault` process does; the median is over all rounds. Not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from chaos import ledger, plan
from chaos.agent.client import AgentClient
from chaos.faults import Context
from chaos.kube import Kube, pod_ready
from testbed import fleet
from testbed.cluster import Testbed
from testbed.config import TestbedConfig

MODEL = "llama-2-7b"
NAMESPACE = fleet.DEFAULT_NAMESPACE
SELECTOR = f"kilocard.io/model={MODEL}"


def ready_again(kube: Kube, replicas: int) -> None:
    kube.wait_until("pods", lambda pods: sum(pod_ready(p) for p in pods) == replicas, timeout=300,
                    namespace=NAMESPACE, label_selector=SELECTOR)


def kill_ours(kube: Kube, n: int, run: int) -> None:
    ctx = Context(kube, AgentClient(kube), f"bench-{run}", say=lambda _m: None)
    with tempfile.TemporaryDirectory() as d:
        injection = plan.inject(ctx, ledger.Ledger(ctx.run_id, kube, Path(d)),
                                  {"kind": "pod-kill", "namespace": NAMESPACE, "label_selector": SELECTOR,
                                   "count": n, "seed": run, "grace_seconds": 0})
    assert len(injection.records) == n and not injection.failed


def kill_theirs(kubeconfig: Path, n: int) -> None:
    from chaosk8s.pod.actions import terminate_pods
    from kubernetes.config import kube_config

    os.environ["KUBECONFIG"] = str(kubeconfig)
    # chaosk8s loads the default kubeconfig location, which the client fixes at import time.
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(kubeconfig)
    terminate_pods(label_selector=SELECTOR, ns=NAMESPACE, qty=n, rand=True, mode="fixed", grace_period=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of quiet before each kill")
    parser.add_argument("--replicas", type=int, default=200)
    parser.add_argument("--port-base", type=int, default=26443)
    args = parser.parse_args()
    try:
        import chaosk8s  # noqa: F401
    except ImportError:
        raise SystemExit("install the tool compared with: "
                         ".venv/bin/pip install chaostoolkit-kubernetes==0.39.0") from None

    with tempfile.TemporaryDirectory(prefix="kilocard-bench-") as state:
        tb = Testbed(TestbedConfig(port_base=args.port_base, state_dir=Path(state), remediation=False).validate())
        tb.up(say=lambda _m: None)
        kube = tb.kube()
        try:
            # The fleet first, then the 7B model scaled: 200 one-card pods placed first would leave no
            # node with 8 free cards for the TP=8 replicas (fragmentation; a finding of its own).
            default = fleet.load("default", tb.config.card_resource)
            fleet.deploy(kube, default, say=print)
            fleet.deploy(kube, fleet.scaled(default, {MODEL: args.replicas}), say=print)
            results: dict[str, list[tuple[float, float]]] = {"kilocard": [], "chaostoolkit-kubernetes": []}
            for run in range(args.rounds):
                for name, kill in (("kilocard", lambda run=run: kill_ours(kube, args.pods, run)),
                                   ("chaostoolkit-kubernetes", lambda: kill_theirs(tb.paths.kubeconfig, args.pods))):
                    ready_again(kube, args.replicas)
                    time.sleep(args.settle)  # let the controllers finish reacting to the previous round
                    before = tb.apiserver_requests(("pods",), ("LIST", "DELETE"))
                    started = time.perf_counter()
                    kill()
                    seconds = time.perf_counter() - started
                    calls = tb.apiserver_requests(("pods",), ("LIST", "DELETE")) - before
                    results[name].append((seconds, calls))
                    print(f"round {run + 1} {name:<24} {args.pods} pods killed in {seconds:6.3f} s "
                          f"({calls:.0f} pod LIST+DELETE requests at the apiserver, all clients)")
            ours = statistics.median(s for s, _ in results["kilocard"])
            theirs = statistics.median(s for s, _ in results["chaostoolkit-kubernetes"])
            print(f"\nmedian over {args.rounds} rounds: kilocard {ours:.3f} s, chaostoolkit-kubernetes {theirs:.3f} s; "
                  f"kilocard is {theirs / ours:.1f}x faster (goal >= 10x)")
        finally:
            kube.close()
            tb.down(say=lambda _m: None)


if __name__ == "__main__":
    main()
