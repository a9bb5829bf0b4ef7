"""The fleet simulator's DRA driver for GPUs, in the format of NVIDIA's (kubernetes-sigs/
dra-driver-nvidia-gpu, formerly NVIDIA/k8s-dra-driver-gpu: its gpu-kubelet-plugin), so that a probe
of device taints judges the testbed as it judges a cluster running that driver.

- **Slices.** One ResourceSlice (resource.k8s.io/v1) per node, as the plugin publishes it when it
  starts: driver `gpu.nvidia.com`, the node's name as the pool, one device per card named
  `gpu-<minor>` (here the card's index) with the plugin's attributes (type, uuid, productName,
  driverVersion), owned by the Node, so the garbage collector removes it with the node.
- **Health.** The plugin's NVML health monitor, with KEP-5055 device taints: a card that shows an
  XID (an xid fault's, or an ecc fault's 63) gets `gpu.nvidia.com/xid=<xid>` on its device,
  NoSchedule, or None (informational) for the XIDs the driver skips as application errors. One
  taint per key: a later XID replaces the value, the effect only escalates. The taint comes
  REACTION_SECONDS after the card shows the XID (NVML's event, then the plugin's republish), and
  goes when the card is reset (its last card fault reverted). The real plugin keeps it until it
  restarts (clearing it on recovery is upstream's issue #1455); here the reset clears it, so one
  node serves test after test.
- **Off.** The driver's health checks sit behind its NVMLDeviceHealthCheck feature gate, off by
  default: a driver made with `health=False`, or a node labelled `kilocard.io/dra-health=off`,
  publishes slices and taints nothing, the negative twin of a probe that expects the taint. A
  lost node's plugin died with its kubelet: its slice stays as it was.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

from chaos.errors import KubeError
from chaos.kube import Kube
from chaos.vocabulary import DRA_DRIVER
from testbed.simulator.dcgm import DRIVER_VERSION
from testbed.simulator.world import World

DRIVER = DRA_DRIVER
API_VERSION = "resource.k8s.io/v1"
SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"
TAINT_KEY = f"{DRIVER}/xid"
# The XIDs the driver skips as application errors (the GPU stays healthy): an informational taint.
INFORMATIONAL_XIDS = (13, 31, 43, 45, 68, 109)
EFFECTS = ("None", "NoSchedule")  # escalating
REACTION_SECONDS = 1.0
HEALTH_LABEL = "kilocard.io/dra-health"  # "off": the node's driver taints no card

CardId = tuple[str, int]  # (node, index)


@dataclass(frozen=True)
class Taint:
    xid: int
    effect: str
    added: float  # epoch seconds; the API keeps whole seconds

    def to_json(self) -> dict[str, str]:
        return {"key": TAINT_KEY, "value": str(self.xid), "effect": self.effect,
                "timeAdded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.added))}


def taint_for(xid: int, old: Taint | None, now: float) -> Taint:
    effect = "None" if xid in INFORMATIONAL_XIDS else "NoSchedule"
    if old is None:
        return Taint(xid, effect, now)
    return Taint(xid, max(old.effect, effect, key=EFFECTS.index), old.added)


def resource_slice(world: World, node: str, taints: dict[int, Taint]) -> dict[str, Any]:
    """The node's slice as its plugin publishes it (call with the world's lock held)."""
    uid = world.node_uids.get(node)
    owner = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid, "controller": True}] if uid else []
    devices = []
    for i in range(world.node_cards[node]):
        card = world.cards[(node, i)]
        attributes = {"type": {"string": "gpu"}, "uuid": {"string": card.uuid},
                      "productName": {"string": world.product}, "driverVersion": {"version": DRIVER_VERSION}}
        devices.append({"name": f"gpu-{i}", "attributes": attributes,
                        **({"taints": [taints[i].to_json()]} if i in taints else {})})
    return {"apiVersion": API_VERSION, "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}", **({"ownerReferences": owner} if owner else {})},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


class Driver:
    """Every GPU node's plugin: the XIDs it noticed, the taints they made, what it last published."""

    def __init__(self, health: bool = True) -> None:
        self.health = health
        self.noticed: dict[CardId, tuple[int, float]] = {}  # the XID a card shows, and since when
        self.taints: dict[CardId, Taint] = {}
        self.published: dict[str, tuple[Any, ...]] = {}  # node -> (uid, cards, taints) of its slice

    def react(self, world: World, now: float) -> dict[str, tuple[tuple[Any, ...], dict[str, Any]]]:
        """The slices to write now (node -> (state, slice)): new nodes', and those whose taints
        changed. Nodes gone are forgotten (their slices go with them)."""
        with world.lock:
            shown = {(c.node, c.index): c.xid for c in world.cards.values()
                     if c.xid and c.node not in world.dra_health_off} if self.health else {}
            for card, xid in shown.items():
                if self.noticed.get(card, (0, 0.0))[0] != xid:
                    self.noticed[card] = (xid, now)
            for card in set(self.noticed) - set(shown):  # reset
                del self.noticed[card]
                self.taints.pop(card, None)
            for card, (xid, since) in self.noticed.items():
                if now - since >= REACTION_SECONDS:
                    self.taints[card] = taint_for(xid, self.taints.get(card), now)
            by_node: dict[str, dict[int, Taint]] = {}
            for (node, index), taint in self.taints.items():
                by_node.setdefault(node, {})[index] = taint
            for node in set(self.published) - set(world.node_cards):
                del self.published[node]
            wanted = {}
            for node, cards in world.node_cards.items():
                taints = by_node.get(node, {})
                state = (world.node_uids.get(node, ""), cards, tuple(sorted(taints.items())))
                if node not in world.lost and self.published.get(node) != state:
                    wanted[node] = (state, resource_slice(world, node, taints))
            return wanted

    def sync(self, kube: Kube, world: World, now: float) -> None:
        """Write what `react` asks for: new slices created at once, the others (and those left
        from an earlier run) applied. A write that fails is tried again on the next sync."""
        wanted = self.react(world, now)
        new = [node for node in wanted if node not in self.published]
        created: set[str] = set()
        if new:
            outcomes = kube.send_all("create resourceslices", [("POST", SLICES_PATH, wanted[n][1]) for n in new])
            created = {node for node, error in zip(new, outcomes, strict=True) if error is None}
        for node, (state, body) in wanted.items():
            try:
                if node not in created:
                    kube.apply(body)
                self.published[node] = state
            except KubeError as exc:
                print(f"simulator: dra: slice of {node}: {exc}", file=sys.stderr, flush=True)
