"""What each agent fault kind does to the simulated fleet, looked up by the kind's protocol name
(chaos.agent.kinds): the simulator's registry, so the world knows no kinds.

    ecc           card: DBE (or SBE) counters rise, XID 48 then 63, a row remap is pending; the card
                  runs at `speed` (0.5 by default): its TP group slows to it
    xid           card: DCGM_FI_DEV_XID_ERRORS shows the XID; `speed` optional (79 = off the bus = 0); the
                  DRA driver taints the card's device a moment later (testbed/simulator/dra.py)
    card-isolate  card: the node's allocatable drops by one and the pod holding the card is deleted
    npu-fault     Ascend chip: the fault code is on it (npu-exporter, the device plugin's ConfigMap); at a
                  level the plugin isolates, allocatable drops by one (the pod stays: the plugin evicts
                  nothing) and the chip runs at `speed` (0.5), slowing its TP group as ECC does
    bandwidth, loss, partition, delay, tcp-reset   the node's network (`Net`): groups spanning
                  nodes slow down or stall (a partition or reset cuts their collectives), every
                  replica on the node sees the client-path delay (or, partitioned, no traffic at
                  all; reset, every request fails as a reset connection). A reset scoped to
                  `ports` other than the engines' API ports (8000, 30000) reaches only the
                  collectives; one scoped to those, only the client path
    kubelet-stop  the node: lost at once, and labelled lost (testbed/stages.py), so kwok lets go of
                  it as of a dead kubelet and its replicas answer nothing; the revert brings the
                  kubelet back
    throttle      card (toolkit gpu-throttle): it runs at `fraction` of its speed, reached at once or
                  down a ramp; its TP group runs at its pace, dcgm-exporter shows its SM clock down,
                  its power at the cap and a clock event reason (SW power cap, or clocks set), and
                  every health signal stays clean
    pull-block    the node (toolkit image-pull-failure): its pods still waiting for an image from a
                  blocked registry fail the pull and back off as the kubelet does; the next retry
                  after the outage pulls (testbed/simulator/pulls.py)
    dns-block     the node (toolkit dns-failure): names do not resolve, so its pods still waiting for
                  an image from a registry named by its host fail the pull as under pull-block;
                  serving, by address, goes on
    io-throttle   the node (toolkit slow-weights): its pods not yet started load their weights at the
                  cap (their delay to Ready stretched by the load phase's share, production's 1.5 GB/s
                  over the cap); the stretch is given back to those still waiting when the cap goes
    rank-stall    the pod's engine frozen (`State.stalled`): its TP group stays Ready and gets its
                  share of traffic, which queues, and nothing completes; its engine's gauges stay
                  as they were when it froze; a frozen rank 0 (whose process serves the metrics)
                  exports nothing. A pod not on the node is refused, as the agent finds no cgroup
                  for it
An effect changes the world on apply and undoes it on revert (a card reset: volatile counters
clear, lifetime ones stay; a network fault's shaping enters and leaves the node's
`State.shaping`), says how it shapes the node's network, and reads itself back from the world's
state, never from the fault's record (`observe`, the agent's GET .../effect): a fault whose
effect is gone, undone behind the agent's back (`FaultBook.sabotage`) or lost with a machine the
world saw anew, reads as a mismatch naming what the world shows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chaos.agent.kinds import ecc, npu, throttle, xid
from chaos.agent.protocol import CONFIRMED, INCONCLUSIVE, MISMATCH, Fault, FaultError

if TYPE_CHECKING:
    from testbed.simulator.state import State


@dataclass
class Net:
    bandwidth_mbit: float | None = None
    loss_percent: float = 0.0
    partition: bool = False
    delay_ms: float = 0.0
    reset_client: bool = False  # TCP to the engines' API answered with resets
    reset_collectives: bool = False  # TCP between a group's machines (NCCL, gloo) answered with resets

    def covers(self, other: Net) -> bool:
        """Is this network shaped at least as hard as `other` in every respect (so a fault that
        alone shapes `other` is in effect, whatever stacks with it)?"""
        return ((other.bandwidth_mbit is None
                 or (self.bandwidth_mbit is not None and self.bandwidth_mbit <= other.bandwidth_mbit))
                and self.loss_percent >= other.loss_percent and self.delay_ms >= other.delay_ms
                and all(getattr(self, flag) or not getattr(other, flag)
                        for flag in ("partition", "reset_client", "reset_collectives")))

    def __str__(self) -> str:
        shaped = [f"{name} {value:g}" if isinstance(value, float) else name
                  for name, value in vars(self).items() if value not in (None, 0.0, False)]
        return ", ".join(shaped) or "not shaped"


class Effect:
    """No effect on the world or the network; kinds override what they touch."""

    def apply(self, world: State, f: Fault) -> None:
        pass

    def revert(self, world: State, f: Fault) -> None:
        pass

    def shape(self, net: Net, f: Fault) -> None:
        pass

    def speed(self, f: Fault) -> float:
        """How fast a card with this fault still runs."""
        return 1.0

    def observe(self, world: State, f: Fault) -> tuple[str, str]:
        """(confirmed | mismatch | inconclusive, evidence): the effect as the world shows it now."""
        return INCONCLUSIVE, f"the fake node cannot read {f.kind} back"


class CardFault(Effect):
    """ECC and XID: the card slows to the slowest of its faults; a revert with none left is a reset."""

    def apply(self, world: State, f: Fault) -> None:
        card = world.cards[(f.node, f.target["card"])]
        self.mark(card, f)
        card.speed = min(card.speed, self.speed(f))

    def mark(self, card: Any, f: Fault) -> None:
        raise NotImplementedError

    def revert(self, world: State, f: Fault) -> None:
        card = world.cards.get((f.node, f.target["card"]))
        if card is None:
            return
        others = [o for o in world.in_effect(f.node) if o.target.get("card") == card.index]
        card.speed = min([EFFECTS[o.kind].speed(o) for o in others], default=1.0)
        if not others:  # the card was reset: volatile counters and pending remaps clear
            card.xid, card.remap_pending, card.sbe_vol, card.dbe_vol = 0, 0, 0, 0
            card.npu.clear()

    def observe(self, world: State, f: Fault) -> tuple[str, str]:
        card = world.cards.get((f.node, f.target["card"]))
        if card is None:
            return MISMATCH, f"{f.node} has no card {f.target['card']}"
        landed, shown = self.shows(card, f)
        return (CONFIRMED if landed else MISMATCH), f"{f.node} card {card.index}: {shown}"

    def shows(self, card: Any, f: Fault) -> tuple[bool, str]:
        """Does the card carry the fault, and what it shows."""
        raise NotImplementedError


class Ecc(CardFault):
    def mark(self, card: Any, f: Fault) -> None:
        count = int(f.params.get("count", 1))
        if f.params.get("type", "dbe") == "dbe":
            card.dbe_vol += count
            card.dbe_agg += count
            card.remapped_uncorrectable += count
            card.remap_pending = 1
            card.xid = 63  # after XID 48: the row remapper recorded the event
        else:
            card.sbe_vol += count
            card.sbe_agg += count
            card.remapped_correctable += count

    def shows(self, card: Any, f: Fault) -> tuple[bool, str]:
        count, dbe = int(f.params.get("count", 1)), f.params.get("type", "dbe") == "dbe"
        seen = card.dbe_vol if dbe else card.sbe_vol
        return seen >= count, f"volatile {'DBE' if dbe else 'SBE'} count {seen} (injected {count})"

    def speed(self, f: Fault) -> float:
        return float(f.params.get("speed", ecc.DEFAULT_SPEED))


class Xid(CardFault):
    def mark(self, card: Any, f: Fault) -> None:
        card.xid = int(f.params["xid"])

    def shows(self, card: Any, f: Fault) -> tuple[bool, str]:
        return card.xid == int(f.params["xid"]), f"XID {card.xid} (injected {f.params['xid']})"

    def speed(self, f: Fault) -> float:
        return float(f.params.get("speed", xid.default_speed(f.params)))


class Throttle(Effect):
    """The card keeps a share of its speed (Card.pace), no error anywhere; a revert lifts it."""

    def apply(self, world: State, f: Fault) -> None:
        world.cards[(f.node, f.target["card"])].throttles[f.id] = (f.created_at, f.params)

    def revert(self, world: State, f: Fault) -> None:
        card = world.cards.get((f.node, f.target["card"]))
        if card is not None:
            card.throttles.pop(f.id, None)

    def observe(self, world: State, f: Fault) -> tuple[str, str]:
        card = world.cards.get((f.node, f.target["card"]))
        if card is None:
            return MISMATCH, f"{f.node} has no card {f.target['card']}"
        if f.id not in card.throttles:
            return MISMATCH, f"{f.node} card {card.index} runs unthrottled"
        want = throttle.fraction_at(f.params, time.time() - f.created_at - 1.0)
        return CONFIRMED, f"{f.node} card {card.index} runs at {card.pace():.2f} of its speed (cap {want:.2f})"


class NpuFault(CardFault):
    def apply(self, world: State, f: Fault) -> None:
        super().apply(world, f)
        world.recount(f.node)

    def mark(self, card: Any, f: Fault) -> None:
        card.npu[f.id] = (f.params["code"], f.params.get("level", "SeparateNPU"), f.params.get("type", "chip"),
                          int(f.created_at * 1000))

    def revert(self, world: State, f: Fault) -> None:
        card = world.cards.get((f.node, f.target["card"]))
        if card is not None:
            card.npu.pop(f.id, None)
        super().revert(world, f)
        world.recount(f.node)

    def shows(self, card: Any, f: Fault) -> tuple[bool, str]:
        on = f.id in card.npu
        return on, f"fault code {f.params['code']} {'on' if on else 'not on'} the chip"

    def speed(self, f: Fault) -> float:
        return float(f.params.get("speed", npu.default_speed(f.params)))


class CardIsolate(Effect):
    def apply(self, world: State, f: Fault) -> None:
        index = f.target["card"]
        world.isolated[f.node].add(index)
        world.recount(f.node)
        pod = world.pod_on_card(f.node, index)
        if pod is not None:  # its process dies with the card, as with a drained GPU
            world.actions.append(("delete-pod", pod.namespace, pod.name))

    def revert(self, world: State, f: Fault) -> None:
        world.isolated[f.node].discard(f.target["card"])
        world.recount(f.node)

    def observe(self, world: State, f: Fault) -> tuple[str, str]:
        index, capacity = f.target["card"], world.node_cards.get(f.node, 0)
        offered = world.allocatable.get(f.node)
        landed = index in world.isolated[f.node] and offered == capacity - len(world.out_of_service(f.node))
        return (CONFIRMED if landed else MISMATCH), (
            f"{f.node} card {index} {'drained' if index in world.isolated[f.node] else 'in service'}, "
            f"allocatable {offered} of {capacity}")


class NetFault(Effect):
    """The node's network: the fault's shaping is installed on apply and removed on revert; the
    read-back compares what the node's network shows with what the fault alone shapes."""

    def apply(self, world: State, f: Fault) -> None:
        world.shaping[f.node][f.id] = f

    def revert(self, world: State, f: Fault) -> None:
        world.shaping.get(f.node, {}).pop(f.id, None)

    def observe(self, world: State, f: Fault) -> tuple[str, str]:
        shown, alone = net_of(world, f.node), Net()
        self.shape(alone, f)
        if shown.covers(alone):
            return CONFIRMED, f"{f.node}'s network: {shown}"
        return MISMATCH, f"{f.node}'s network: {shown}, where the {f.kind} fault alone shapes {alone}"


class Bandwidth(NetFault):
    def shape(self, net: Net, f: Fault) -> None:
        rate = float(f.params["rate_mbit"])
        net.bandwidth_mbit = rate if net.bandwidth_mbit is None else min(net.bandwidth_mbit, rate)


class Loss(NetFault):
    def shape(self, net: Net, f: Fault) -> None:
        net.loss_percent = max(net.loss_percent, float(f.params["percent"]))


class Partition(NetFault):
    def shape(self, net: Net, f: Fault) -> None:
        net.partition = True


class Delay(NetFault):
    def shape(self, net: Net, f: Fault) -> None:
        net.delay_ms += float(f.params["ms"])


# The engines' API ports (vLLM, SGLang): a reset scoped to other ports reaches only the traffic
# between a group's machines. The fake node has no peers' addresses: its `cidrs` reach everything.
SERVING_PORTS = frozenset({8000, 30000})


class TcpReset(NetFault):
    def shape(self, net: Net, f: Fault) -> None:
        ports = set(f.params.get("ports") or [])
        net.reset_client = net.reset_client or not ports or bool(ports & SERVING_PORTS)
        net.reset_collectives = net.reset_collectives or not ports or bool(ports - SERVING_PORTS)


class KubeletStop(Effect):
    """The machine is lost at once; kwok learns it from the label (the node watch then agrees)."""

    def apply(self, world: State, f: Fault) -> None:
        world.set_lost(f.node, True)

    def revert(self, world: State, f: Fault) -> None:
        world.set_lost(f.node, False)

    def observe(self, world: State, f: Fault) -> tuple[str, str]:
        if f.node in world.lost:
            return CONFIRMED, f"{f.node} is lost: its kubelet is down"
        return MISMATCH, f"{f.node} is not lost: its kubelet runs"


class PullBlock(Effect):
    """The node cannot pull from the registries: its pods still waiting for an image from one of
    them fail their pulls (testbed/simulator/pulls.py); running ones are untouched."""

    def apply(self, world: State, f: Fault) -> None:
        world.pulls.block(f.node, f.id, self.registries(f))
        world.startups_changed(f.node)

    def revert(self, world: State, f: Fault) -> None:
        world.pulls.unblock(f.node, f.id)

    def registries(self, f: Fault) -> list[str] | None:
        return list(f.params["registries"])

    def observe(self, world: State, f: Fault) -> tuple[str, str]:
        block = world.pulls.blocked(f.node, f.id)
        what = ", ".join(self.registries(f) or ["registries named by host"])
        if block is None:
            return MISMATCH, f"{f.node} pulls from {what}"
        waiting = sorted(w.name for w in world.pulls.waiting.values() if w.node == f.node and block.refuses(w.registry))
        return CONFIRMED, (f"{f.node} refuses pulls from {what}; "
                           f"{len(waiting)} pod(s) there failed a pull{': ' + ', '.join(waiting) if waiting else ''}")


class DnsBlock(PullBlock):
    """Names do not resolve on the node: of what the testbed models, its image pulls from any
    registry named by its host fail (a registry given by address still pulls); serving traffic
    reaches the engines by address and goes on."""

    def registries(self, f: Fault) -> list[str] | None:
        return None


class IoThrottle(Effect):
    """The node's pods read their weights at most at the cap: those not yet started load slowly."""

    def apply(self, world: State, f: Fault) -> None:
        world.read_caps[f.node][f.id] = float(f.params["rate_mbps"])
        world.startups_changed(f.node)

    def revert(self, world: State, f: Fault) -> None:
        world.read_caps[f.node].pop(f.id, None)
        world.startups_changed(f.node)

    def observe(self, world: State, f: Fault) -> tuple[str, str]:
        cap = world.read_caps.get(f.node, {}).get(f.id)
        if cap is None:
            return MISMATCH, f"{f.node}'s pods read uncapped"
        slow = sorted(p.name for p in world.pods.values() if p.node == f.node and p.ready_unstretched)
        return CONFIRMED, (f"{f.node}'s pods read at most {cap:g} MB/s; {len(slow)} loading slowly"
                           f"{': ' + ', '.join(slow) if slow else ''}")


class RankStall(Effect):
    """A model's pod (its TP group's rank) or a router's: whichever process the pod runs is frozen."""

    def apply(self, world: State, f: Fault) -> None:
        uid = f.target["pod_uid"]
        pod, router = world.pods.get(uid), world.routers.get(uid)
        if (pod.node if pod else router.node if router else None) != f.node:
            raise FaultError("target", f"no cgroup for pod {uid} on this node", status=404)
        world.stalled.add(uid)

    def revert(self, world: State, f: Fault) -> None:
        world.stalled.discard(f.target["pod_uid"])

    def observe(self, world: State, f: Fault) -> tuple[str, str]:
        uid = f.target["pod_uid"]
        pod, router = world.pods.get(uid), world.routers.get(uid)
        if pod is not None:
            name = f"pod {pod.namespace}/{pod.name} (rank {pod.rank} of {pod.group})"
        elif router is not None:
            name = f"router {router.router.namespace}/{router.router.pod} ({router.router.stack})"
        else:
            return MISMATCH, f"pod {uid} is gone (the container ended or restarted)"
        return (CONFIRMED, f"{name} is frozen") if uid in world.stalled else (MISMATCH, f"{name} runs")


EFFECTS: dict[str, Effect] = {"ecc": Ecc(), "xid": Xid(), "card-isolate": CardIsolate(), "bandwidth": Bandwidth(),
                              "loss": Loss(), "partition": Partition(), "delay": Delay(), "tcp-reset": TcpReset(),
                              "kubelet-stop": KubeletStop(), "npu-fault": NpuFault(), "rank-stall": RankStall(),
                              "throttle": Throttle(), "pull-block": PullBlock(),
                              "io-throttle": IoThrottle(), "dns-block": DnsBlock()}


def net_of(world: State, node: str) -> Net:
    """The node's network as the shaping it carries makes it."""
    net = Net()
    for f in world.shaping.get(node, {}).values():
        EFFECTS[f.kind].shape(net, f)
    return net
