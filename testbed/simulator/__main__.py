"""The fleet simulator process: `python -m testbed.simulator --kubeconfig ... --port ...`.

Loop: (1) two watch threads keep the world's nodes and pods current (plain JSON: decoding
typed models was most of the simulator's CPU under pod churn); (2) a ticker advances the
load model once per `--tick` seconds and reaps expired faults; (3) an actuator applies what faults
ask of the cluster (a node's allocatable cards, deleting the pod of an isolated card, on Ascend the
device plugin's ConfigMaps: testbed/simulator/ascend.py, which also follows them and ClusterD's
public faults), and on NVIDIA the DRA driver publishes each node's ResourceSlice with its cards'
XIDs as device taints (testbed/simulator/dra.py; `--dra-health off`: it never taints); (4) the
HTTP server answers Prometheus and agent calls; (5) as the fake nodes' agent, a reaper reverts
faults whose in-cluster ledger markers have expired (a node isolation left by a dead runner).
SIGTERM stops it; its faults die with it (they live only in the model), so nothing is left behind
in the cluster but the allocatable it restores and the slices (untainted, owned by their nodes).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from chaos import revert
from chaos.agent.client import AgentClient
from chaos.errors import KubeError, NotFound
from chaos.faults import Context
from chaos.kube import Kube
from testbed.simulator import ascend, dra
from testbed.simulator.dcgm import FIELD_SETS
from testbed.simulator.engine import LoadProfile
from testbed.simulator.server import Server
from testbed.simulator.world import World
from testbed.stages import LOST_LABEL

REAP_SECONDS = 2.0


def follow_nodes(kube: Kube, world: World, resource: str, stop: threading.Event) -> None:
    def upsert(node: dict[str, Any]) -> None:
        meta, labels = node["metadata"], node["metadata"].get("labels") or {}
        world.upsert_node(meta["name"], int((node.get("status", {}).get("capacity") or {}).get(resource, 0)),
                          labels.get(LOST_LABEL) == "true", meta.get("uid", ""), labels.get(dra.HEALTH_LABEL) != "off")

    for kind, obj in kube.events("nodes", stop=stop, raw=True):
        if kind == "SYNC":
            names = {n["metadata"]["name"] for n in obj}
            for name in set(world.node_cards) - names:
                world.remove_node(name)
            for n in obj:
                upsert(n)
        elif kind == "DELETED":
            world.remove_node(obj["metadata"]["name"])
        else:
            upsert(obj)


def follow_pods(kube: Kube, world: World, stop: threading.Event) -> None:
    # Every pod: a serving stack's carry no label of kilocard's (the world reads their command lines).
    for kind, obj in kube.events("pods", stop=stop, raw=True):
        if kind == "SYNC":
            uids = {p["metadata"]["uid"] for p in obj}
            for uid in (set(world.pods) | set(world.stack_pods)) - uids:
                world.remove_pod(uid)
            for p in obj:
                world.upsert_pod(p)
        elif kind == "DELETED":
            world.remove_pod(obj["metadata"]["uid"])
        else:
            world.upsert_pod(obj)


def actuate(kube: Kube, world: World, resource: str, device_lists: dict[str, dict[str, str]]) -> None:
    actions = world.take_actions()
    published = set()
    for action, a, b in actions:
        try:
            if action == "device-info":
                if a not in published:  # once per node and tick, whatever asked for it
                    published.add(a)
                    ascend.publish(kube, world, a, device_lists)
            elif action == "annotate":
                kube.patch_pod(a, b[0], {"metadata": {"annotations": b[1]}})
            elif action == "allocatable":
                kube.patch_node_status(a, {"status": {"allocatable": {resource: str(b)}}})
            elif action == "delete-pod":
                kube.delete_pod(a, b, grace_seconds=0)
            elif action == "labels":
                kube.patch_node(a, {"metadata": {"labels": b}})
        except NotFound:
            pass  # the node or pod has gone: nothing left to do
        except KubeError as exc:
            print(f"simulator: {action} {a}: {exc}", file=sys.stderr, flush=True)


def reap_expired(kube: Kube, token: str, stop: threading.Event) -> None:
    ctx = Context(kube, AgentClient(kube, token), "reaper", say=lambda _m: None)
    while not stop.wait(REAP_SECONDS):
        reverted, left = revert.recover(ctx, None, expired_only=True)
        for r in reverted:
            print(f"simulator: reaped expired {r.kind} {r.target} of {r.run_id}", flush=True)
        for r in left:
            print(f"simulator: could not reap {r.kind} {r.target} of {r.run_id}: {r.error}", file=sys.stderr,
                  flush=True)


def run_forever(target: Any, stop: threading.Event, *args: Any) -> threading.Thread:
    def loop() -> None:
        while not stop.is_set():
            try:
                target(*args, stop)
            except Exception as exc:  # noqa: BLE001 - a watch that broke is restarted
                print(f"simulator: {target.__name__}: {exc}", file=sys.stderr, flush=True)
                stop.wait(1.0)

    thread = threading.Thread(target=loop, name=target.__name__, daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.simulator")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-file", type=Path, required=True)
    parser.add_argument("--card-resource", required=True)
    parser.add_argument("--accelerator", choices=("nvidia", "ascend"), default="nvidia",
                        help="ascend: MindX DL's device plugin ConfigMaps, ClusterD's intake, npu-exporter")
    parser.add_argument("--card-product", default="NVIDIA H100 80GB HBM3")
    parser.add_argument("--tick", type=float, default=1.0)
    parser.add_argument("--utilisation", type=float, default=0.25)
    parser.add_argument("--spike-factor", type=float, default=1.0)
    parser.add_argument("--spike-minutes", type=int, default=5)
    parser.add_argument("--negotiate", action="store_true",
                        help="serve OpenMetrics when asked (vllm: becomes vllm_ with prometheus_client >= 0.23)")
    parser.add_argument("--hostname-label", choices=("Hostname", "hostname"), default="Hostname",
                        help="dcgm-exporter's host label: 'Hostname' up to 4.5.3-4.8.2, 'hostname' after")
    parser.add_argument("--dcgm-fields", choices=sorted(FIELD_SETS), default="all",
                        help="every default dcgm-exporter counter, or only the health ones (large testbeds)")
    parser.add_argument("--dra-health", choices=("on", "off"), default="on",
                        help="nvidia: whether the DRA driver taints a card's device on an XID (off: it never does)")
    args = parser.parse_args(argv)

    world = World(args.card_resource, args.card_product.replace("-", " "),
                  LoadProfile(args.utilisation, args.spike_factor, args.spike_minutes), args.accelerator)
    kube = Kube.from_kubeconfig(args.kubeconfig)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    run_forever(follow_nodes, stop, kube, world, args.card_resource)
    run_forever(follow_pods, stop, kube, world)
    device_lists: dict[str, dict[str, str]] = {}  # node -> the device list its ConfigMap last showed
    if args.accelerator == "ascend":
        run_forever(ascend.follow_device_info, stop, kube, world, device_lists)
        run_forever(ascend.follow_public_faults, stop, kube, world)
    token = args.token_file.read_text().strip()
    server = Server(("127.0.0.1", args.port), world, token, args.negotiate, args.hostname_label,
                    args.dcgm_fields)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    run_forever(reap_expired, stop, kube, token)
    driver = dra.Driver(args.dra_health == "on") if args.accelerator == "nvidia" else None
    while not stop.wait(max(0.05, args.tick - (time.monotonic() % args.tick))):
        world.tick()
        actuate(kube, world, args.card_resource, device_lists)
        if driver:
            driver.sync(kube, world, time.time())
    server.shutdown()
    # Faults end with the simulator: give back isolated cards (and untaint reset ones) before leaving.
    with world.lock:
        for fault in list(world.faults.values()):
            world.delete_fault(fault.node, fault.id)
    actuate(kube, world, args.card_resource, device_lists)
    if driver:
        driver.sync(kube, world, time.time())
    return 0


if __name__ == "__main__":
    sys.exit(main())
