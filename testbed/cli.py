"""`kilocard testbed build | up | down | status`."""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from chaos.output import emit, output_flag
from chaos.vocabulary import DEFAULT_PORT_BASE, PORT_BASE_VARIABLE, configured_port_base
from testbed import accelerators, build, fleet, timing
from testbed.cluster import Testbed
from testbed.config import (
    LARGE_FROM_NODES,
    MAX_CARDS_PER_NODE,
    MAX_NODES,
    PROFILES,
    TestbedConfig,
    default_state_dir,
)

console = Console(highlight=False, soft_wrap=True)


def _say(message: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {message}")


def _int_in(low: int, high: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer from {low} to {high}, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer from {low} to {high}, got {value}")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="testbed_command", required=True, parser_class=type(parser))

    b = sub.add_parser("build", help="build the testbed's binaries (etcd, Kubernetes, kwok) from Go modules (cached)")
    b.add_argument("--force", action="store_true", help="rebuild even when cached")
    b.add_argument("--all", action="store_true",
                   help="also the tools only the tests use (helm, LeaderWorkerSet, prom-label-proxy, KServe), "
                        "which are otherwise built the first time a test needs one")
    b.set_defaults(handler=cmd_build)

    up = sub.add_parser("up", help="start the testbed (no-op when running)")
    up.add_argument("--nodes", type=_int_in(1, MAX_NODES), default=128,
                    help=f"kwok GPU nodes (1 to {MAX_NODES}; default %(default)s)")
    up.add_argument("--cards-per-node", type=_int_in(1, MAX_CARDS_PER_NODE), default=8,
                    help=f"cards on each node (1 to {MAX_CARDS_PER_NODE}; default %(default)s)")
    up.add_argument("--accelerator", choices=sorted(accelerators.PROFILES), default=accelerators.NVIDIA.name,
                    help="whose cards to fake: nvidia (device plugin, dcgm-exporter) or ascend (huawei.com/Ascend910, "
                         "MindX DL's device-info ConfigMaps, ClusterD's public faults, npu-exporter)")
    up.add_argument("--card-resource", help="extended resource of a card (default: the accelerator's)")
    up.add_argument("--card-product", help="card product label value (default: the accelerator's)")
    up.add_argument("--port-base", type=_int_in(1024, 65535 - 16),
                    help="apiserver port; etcd, controllers, kwok, the simulator and Prometheus take the next "
                         f"seven (default ${PORT_BASE_VARIABLE}, else {DEFAULT_PORT_BASE})")
    up.add_argument("--fleet", choices=fleet.names(), help="deploy a sample fleet and wait until it is Ready")
    up.add_argument("--timing", choices=timing.NAMES, default="default",
                    help="how long the --fleet's replicas take to start and stop: fast (at once), default "
                         f"(production's timeline {timing.DEFAULT_FACTOR:g}x faster) or production")
    up.add_argument("--not-ready-toleration-seconds", type=_int_in(1, 3600), default=15,
                    help="seconds a pod tolerates its node NotReady before the taint manager evicts it "
                         "(default %(default)s; Kubernetes' own is 300)")
    up.add_argument("--unreachable-toleration-seconds", type=_int_in(1, 3600), default=15,
                    help="the same for an unreachable node (default %(default)s; Kubernetes' own is 300)")
    up.add_argument("--no-remediation", action="store_true",
                    help="do not run the reference remediator (ECC/XID -> quarantine)")
    up.add_argument("--no-dra-health", action="store_true",
                    help="the fake DRA driver publishes its ResourceSlices and never taints a card's device")
    up.add_argument("--scrape-interval", type=float, default=None,
                    help="Prometheus scrape interval of the engines' metrics, seconds (default: the profile's)")
    up.add_argument("--profile", choices=PROFILES, default="auto",
                    help="lease, scrape and remediation intervals: small (1 s scrapes, 5 s lease renewals), "
                         f"large (production's 10 s renewals, fewer series), or auto (large from "
                         f"{LARGE_FROM_NODES} nodes)")
    up.add_argument("--utilisation", type=float, default=0.25,
                    help="default load per replica, as a fraction of its healthy service rate")
    up.add_argument("--spike-factor", type=float, default=1.0,
                    help="load multiplier during the first 5 minutes of every hour (top-of-hour batch jobs)")
    up.add_argument("--openmetrics", action="store_true",
                    help="let Prometheus negotiate OpenMetrics: vLLM series are then stored as vllm_...")
    up.add_argument("--timeout", type=_int_in(10, 3600), default=300, help="seconds to wait for readiness")
    up.set_defaults(handler=cmd_up)

    down = sub.add_parser("down", help="stop the testbed; no process is left behind")
    down.set_defaults(handler=cmd_down)

    status = sub.add_parser("status", help="endpoints, nodes, cards and process health")
    output_flag(status)
    status.set_defaults(handler=cmd_status)

    for p in (up, down, status):
        p.add_argument("--state-dir", type=Path, default=default_state_dir(),
                       help="state folder (kubeconfig, logs, pids); default %(default)s")


def cmd_build(args: argparse.Namespace) -> int:
    started = time.monotonic()
    build.build(build.COMPONENTS + (build.TOOLS if args.all else ()), force=args.force, say=_say)
    _say(f"binaries ready in {build.cache_dir() / 'bin'} ({time.monotonic() - started:.0f} s)")
    return 0


def cmd_up(args: argparse.Namespace, say: Any = _say) -> int:
    existing = Testbed.from_state(args.state_dir)

    def manifests(card_resource: str) -> list[dict[str, Any]]:
        return timing.stamp(fleet.load(args.fleet, card_resource), args.timing) if args.fleet else []

    if existing is not None and existing.running():
        testbed = existing
        say(f"testbed already running (kubeconfig {testbed.paths.kubeconfig}); nothing to start")
        objects = manifests(testbed.config.card_resource)  # the running testbed's cards, not the flag's
    else:
        config = TestbedConfig(
            nodes=args.nodes, cards_per_node=args.cards_per_node, accelerator=args.accelerator,
            card_resource=args.card_resource or accelerators.named(args.accelerator).card_resource,
            card_product=args.card_product or accelerators.named(args.accelerator).card_product,
            port_base=configured_port_base() if args.port_base is None else args.port_base, state_dir=args.state_dir,
            not_ready_toleration_seconds=args.not_ready_toleration_seconds,
            unreachable_toleration_seconds=args.unreachable_toleration_seconds,
            remediation=not args.no_remediation, dra_health=not args.no_dra_health,
            scrape_seconds=args.scrape_interval,
            profile=args.profile,
            utilisation=args.utilisation, spike_factor=args.spike_factor, openmetrics=args.openmetrics,
        ).validate()
        testbed = Testbed(config)
        objects = manifests(config.card_resource)
        testbed.check_ports()  # before a possibly long build
        build.build(say=say)
        # A large testbed's fleet goes in while its nodes register, as replicas start on a growing
        # cluster's first Ready nodes; a small one's waits for every node, so that the scheduler
        # sees the whole cluster (the catalog's placement findings depend on where replicas land).
        early = objects if config.large else []
        testbed.up(say=say, timeout=args.timeout,
                   before_nodes=(lambda kube: fleet.apply(kube, early)) if early else None)
    if objects:
        kube = testbed.kube()
        try:
            # --timeout is the wait beyond the replicas' own start-up time.
            fleet.deploy(kube, objects, timeout=args.timeout + timing.slowest_start(objects, args.timing), say=say,
                         prometheus=testbed.prometheus_url)
        finally:
            kube.close()
    say(f"export KUBECONFIG={testbed.paths.kubeconfig}")
    return 0


def embedded_default(say: Any = _say) -> Path:
    """`kilocard testbed up --fleet default`, for a command that named no cluster; the kubeconfig."""
    parser = argparse.ArgumentParser(prog="kilocard testbed")
    add_arguments(parser)
    args = parser.parse_args(["up", "--fleet", "default"])
    cmd_up(args, say)
    return Path(args.state_dir) / "kubeconfig"


def cmd_down(args: argparse.Namespace) -> int:
    testbed = Testbed.from_state(args.state_dir)
    if testbed is None:
        _say(f"no testbed running (state folder {args.state_dir})")
        return 0
    testbed.down(say=_say)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    testbed = Testbed.from_state(args.state_dir)
    if testbed is None:
        if not emit({"running": False, "state_dir": str(args.state_dir)}, args.output):
            _say(f"no testbed running (state folder {args.state_dir})")
        return 1
    status = testbed.status()
    if emit(status, args.output):
        return 0 if status["running"] else 1
    table = Table("process", "pid", "state", "cpu s", "rss MiB")
    for p in status["processes"]:
        state = "[green]healthy[/]" if p["healthy"] else ("[yellow]unhealthy[/]" if p["alive"] else "[red]dead[/]")
        table.add_row(p["name"], str(p["pid"]), state, str(p["cpu_seconds"]), str(p["rss_mib"]))
    console.print(table)
    for name, url in status["endpoints"].items():
        console.print(f"{name}: {url}")
    console.print(f"kubeconfig: {status['kubeconfig']}")
    if status["running"]:
        n, c = status["nodes"], status["cards"]
        console.print(f"nodes: {n['ready']}/{n['total']} Ready; cards ({c['resource']}): "
                      f"{c['allocatable']} allocatable of {c['capacity']}")
    else:
        console.print("[red]testbed not running[/]: some processes are dead; 'kilocard testbed down' clears it")
    return 0 if status["running"] else 1



def twin_up(real: Any, namespaces: list[str], card_resource: str | None, port_base: int, timing_name: str,
            say: Any = _say) -> Testbed:
    """plan --twin's testbed: the real cluster's nodes and the namespaces' workloads, copied into a
    fresh testbed in a temporary state folder (testbed/twin.py); `twin_down` removes it."""
    from testbed import twin

    captured = twin.capture(real, namespaces, card_resource)
    state = Path(tempfile.mkdtemp(prefix="kilocard-twin-"))
    try:
        return twin.start(captured, state, port_base, captured["card_resource"], timing_name, say)
    except BaseException:
        shutil.rmtree(state, ignore_errors=True)
        raise


def twin_down(tb: Testbed) -> None:
    tb.down(say=lambda _m: None)
    shutil.rmtree(tb.paths.root, ignore_errors=True)
