"""Kill N pods of one model: kilocard's pod-kill against chaostoolkit-kubernetes' `terminate_pods`
and against the physical-limit proxy (bench/raw_h2.py: the same DELETEs, raw HTTP/2, nothing
decoded), on the same testbed in the same run, cold and warm.

    .venv/bin/pip install chaostoolkit-kubernetes==0.39.0   # the tool compared with; not a kilocard dependency
    .venv/bin/python bench/pod_kill.py [--nodes 128] [--pods 100] [--replicas 200] [--rounds 3] [--json out.json]
    .venv/bin/python bench/pod_kill.py --nodes 1250 --pods 1000 --replicas 1200     # the 10k-card figure

- **cold**: a fresh process. Its imports are not timed (both tools pay them, and they are not
  the cluster's); the clock runs from loading the kubeconfig to the kill's return, so it includes
  opening connections and whatever the tool imports lazily on first use. The raw proxy opens its
  TLS connection inside the clock.
- **warm**: in this process, after a kill of the same kind (connections open, modules loaded).
  `terminate_pods` builds a new API client on every call, so its warm round still connects.

Each measurement is preceded by the model's replicas all Ready again and a quiet `--settle`; the
order of the tools rotates by round. The fleet starts at once (--timing fast): the bench times
the kill, not the recovery. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MODEL = "llama-2-7b"
NAMESPACE = "kilocard-fleet"
SELECTOR = f"kilocard.io/model={MODEL}"
TOOLS = ("kilocard cold", "kilocard warm", "terminate_pods cold", "terminate_pods warm", "raw h2 cold", "raw h2 warm")


def kill_kilocard(kube: object, n: int, seed: int) -> None:
    from chaos import ledger, plan
    from chaos.agent.client import AgentClient
    from chaos.faults import Context

    ctx = Context(kube, AgentClient(kube), f"bench-{seed}", say=lambda _m: None)  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory() as d:
        injection = plan.inject(ctx, ledger.Ledger(ctx.run_id, kube, Path(d)),  # type: ignore[arg-type]
                                {"kind": "pod-kill", "namespace": NAMESPACE, "label_selector": SELECTOR,
                                 "count": n, "seed": seed, "grace_seconds": 0})
    assert len(injection.records) == n and not injection.failed, injection.failed[:1]


def kill_terminate_pods(kubeconfig: str, n: int) -> None:
    from chaosk8s.pod.actions import terminate_pods
    from kubernetes.config import kube_config

    os.environ["KUBECONFIG"] = kubeconfig
    # chaosk8s loads the default kubeconfig location, which the client fixes at import time.
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = kubeconfig
    terminate_pods(label_selector=SELECTOR, ns=NAMESPACE, qty=n, rand=True, mode="fixed", grace_period=0)


def child(tool: str, kubeconfig: str, n: int, seed: int) -> None:
    """A fresh process's one kill: imports first (reported, not timed), then the clock."""
    started = time.perf_counter()
    if tool == "kilocard":
        import chaos.agent.client
        import chaos.faults.pod_kill
        import chaos.ledger
        import chaos.plan  # noqa: F401 - what `kilocard fault` has imported before it connects
        from chaos.kube import Kube

        import_seconds = time.perf_counter() - started
        started = time.perf_counter()
        kube = Kube.from_kubeconfig(kubeconfig)
        kill_kilocard(kube, n, seed)
    else:
        import chaosk8s.pod.actions  # noqa: F401

        import_seconds = time.perf_counter() - started
        started = time.perf_counter()
        kill_terminate_pods(kubeconfig, n)
    print(json.dumps({"seconds": time.perf_counter() - started, "import_seconds": import_seconds}))


def fresh(tool: str, kubeconfig: str, n: int, seed: int) -> float:
    out = subprocess.run([sys.executable, __file__, "--child", tool, "--kubeconfig", kubeconfig, "--pods", str(n),
                          "--seed", str(seed)], check=True, capture_output=True, text=True).stdout
    return float(json.loads(out.splitlines()[-1])["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--replicas", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of quiet before each kill")
    parser.add_argument("--port-base", type=int, default=26443)
    parser.add_argument("--json", type=Path, help="write the figures here (bench/performance.py reads them)")
    parser.add_argument("--child", choices=("kilocard", "terminate_pods"), help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.kubeconfig, args.pods, args.seed)
        return
    try:
        import chaosk8s  # noqa: F401
    except ImportError:
        raise SystemExit("install the tool compared with: "
                         ".venv/bin/pip install chaostoolkit-kubernetes==0.39.0") from None
    from bench.raw_h2 import RawH2, delete_pods
    from chaos.vocabulary import ready
    from testbed import fleet
    from testbed.cluster import Testbed
    from testbed.config import TestbedConfig

    with tempfile.TemporaryDirectory(prefix="kilocard-bench-") as state:
        tb = Testbed(TestbedConfig(nodes=args.nodes, port_base=args.port_base, state_dir=Path(state),
                                   remediation=False).validate())
        tb.up(say=lambda _m: None)
        kube = tb.kube()
        kubeconfig = str(tb.paths.kubeconfig)
        c = kube.api_client.configuration
        raw = RawH2(c.host, c.ssl_ca_cert, c.cert_file, c.key_file)
        try:
            # The fleet first, then the 7B model scaled: one-card pods placed first would leave no
            # node with 8 free cards for the TP=8 replicas (fragmentation; a finding of its own).
            base = fleet.load("large" if args.nodes >= 1000 else "default", tb.config.card_resource)
            fleet.deploy(kube, base, say=print)
            fleet.deploy(kube, fleet.scaled(base, {MODEL: args.replicas}), timeout=600, say=print)

            def victims(seed: int) -> list[tuple[str, str, str]]:
                live = [p for p in kube.list_pods_raw(NAMESPACE, SELECTOR) if ready(p)]
                chosen = random.Random(seed).sample(live, args.pods)
                return [(p["metadata"]["namespace"], p["metadata"]["name"], p["metadata"]["uid"]) for p in chosen]

            def raw_kill(cold: bool, seed: int) -> Callable[[], float]:
                pods = victims(seed)  # chosen outside the clock: the proxy only DELETEs

                def go() -> float:
                    seconds, statuses = delete_pods(raw, pods, cold)
                    assert statuses == {200: args.pods}, statuses
                    return seconds
                return go

            def timed(fn: Callable[[], None]) -> Callable[[], float]:
                def go() -> float:
                    started = time.perf_counter()
                    fn()
                    return time.perf_counter() - started
                return go

            def measurer(tool: str, seed: int) -> Callable[[], float]:
                if tool.startswith("raw h2"):
                    return raw_kill(tool.endswith("cold"), seed)
                if tool == "kilocard cold":
                    return lambda: fresh("kilocard", kubeconfig, args.pods, seed)
                if tool == "terminate_pods cold":
                    return lambda: fresh("terminate_pods", kubeconfig, args.pods, seed)
                if tool == "kilocard warm":
                    # Its bulk connection made live before the clock, as the proxy's: the apiserver
                    # drops one idle for 90 s, and reopening it is a cold cost.
                    kube._get("/version", {})
                    return timed(lambda: kill_kilocard(kube, args.pods, seed))
                return timed(lambda: kill_terminate_pods(kubeconfig, args.pods))

            # Warm-up: each in-process tool kills once, unmeasured.
            for warm_up in (lambda: kill_kilocard(kube, args.pods, 999),
                            lambda: kill_terminate_pods(kubeconfig, args.pods)):
                kube.wait_ready("pods", args.replicas, 600, NAMESPACE, SELECTOR)
                warm_up()
            raw.connect()
            results: dict[str, list[tuple[float, float]]] = {t: [] for t in TOOLS}
            for r in range(args.rounds):
                seed = 1000 + r
                order = TOOLS[r % len(TOOLS):] + TOOLS[:r % len(TOOLS)]
                for tool in order:
                    kube.wait_ready("pods", args.replicas, 600, NAMESPACE, SELECTOR)
                    time.sleep(args.settle)  # let the controllers finish reacting to the previous kill
                    measure = measurer(tool, seed)
                    # GETs too: a tool that reads each killed pod back pays a request per pod.
                    before = tb.apiserver_requests(("pods",), ("LIST", "GET", "DELETE"))
                    seconds = measure()
                    calls = tb.apiserver_requests(("pods",), ("LIST", "GET", "DELETE")) - before
                    results[tool].append((seconds, calls))
                    print(f"round {r + 1} {tool:<20} {args.pods} pods killed in {seconds:7.3f} s "
                          f"({calls:.0f} pod LIST+GET+DELETE requests at the apiserver, all clients)", flush=True)
        finally:
            raw.close()
            kube.close()
            tb.down(say=lambda _m: None)

    def stats(tool: str) -> dict[str, float]:
        seconds = [s for s, _ in results[tool]]
        return {"median": statistics.median(seconds), "min": min(seconds), "max": max(seconds),
                "requests": statistics.median(c for _, c in results[tool])}

    figures = {tool: stats(tool) for tool in TOOLS}
    ratios = {}
    print(f"\n{args.pods} pods of {args.replicas} on {args.nodes * 8} cards, "
          f"median (min-max) over {args.rounds} rounds:")
    for tool in TOOLS:
        f = figures[tool]
        print(f"  {tool:<20} {f['median']:7.3f} s ({f['min']:.3f}-{f['max']:.3f})  {f['requests']:.0f} requests")
    for when in ("cold", "warm"):
        ours = figures[f"kilocard {when}"]["median"]
        ratios[f"terminate_pods / kilocard, {when}"] = figures[f"terminate_pods {when}"]["median"] / ours
        ratios[f"kilocard / raw h2, {when}"] = ours / figures[f"raw h2 {when}"]["median"]
    for name, value in ratios.items():
        goal = "goal >= 10" if name.startswith("terminate") else "goal <= 1.5"
        print(f"  {name:<34} {value:6.2f}x ({goal})")
    if args.json:
        args.json.write_text(json.dumps({"pods": args.pods, "replicas": args.replicas, "nodes": args.nodes,
                                         "rounds": args.rounds, "runs": results, "figures": figures,
                                         "ratios": ratios}, indent=2) + "\n")


if __name__ == "__main__":
    main()
