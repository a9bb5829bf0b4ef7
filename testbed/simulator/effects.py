"""What each agent fault kind does to the simulated fleet, looked up by the kind's protocol name
(chaos.agent.kinds): the simulator's registry, so the world knows no kinds.

    ecc           card: DBE (or SBE) counters rise, XID 48 then 63, a row remap is pending; the card
                  runs at `speed` (0.5 by default): its TP group slows to it
    xid           card: DCGM_FI_DEV_XID_ERRORS shows the XID; `speed` optional (79 = off the bus = 0)
    card-isolate  card: the node's allocatable drops by one and the pod holding the card is deleted
    npu-fault     Ascend chip: the fault code is on it (npu-exporter, the device plugin's ConfigMap); at a
                  level the plugin isolates, allocatable drops by one (the pod stays: the plugin evicts
                  nothing) and the chip runs at `speed` (0.5), slowing its TP group as ECC does
    bandwidth, loss, partition, delay   the node's network (`Net`): groups spanning nodes slow
                  down or stall, every replica on the node sees the client-path delay (or,
                  partitioned, no traffic at all)
    kubelet-stop  the node: labelled lost (testbed/stages.py), so kwok lets go of it as of a dead
                  kubelet and its replicas answer nothing; the revert brings the kubelet back
An effect changes the world on apply and undoes it on revert (a card reset: volatile counters
clear, lifetime ones stay), and says how it shapes the node's network while active.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chaos.agent.kinds import ecc, npu, xid
from chaos.agent.protocol import Fault
from testbed.stages import LOST_LABEL

if TYPE_CHECKING:
    from testbed.simulator.world import World


@dataclass
class Net:
    bandwidth_mbit: float | None = None
    loss_percent: float = 0.0
    partition: bool = False
    delay_ms: float = 0.0


class Effect:
    """No effect on the world or the network; kinds override what they touch."""

    def apply(self, world: World, f: Fault) -> None:
        pass

    def revert(self, world: World, f: Fault) -> None:
        pass

    def shape(self, net: Net, f: Fault) -> None:
        pass

    def speed(self, f: Fault) -> float:
        """How fast a card with this fault still runs."""
        return 1.0


class CardFault(Effect):
    """ECC and XID: the card slows to the slowest of its faults; a revert with none left is a reset."""

    def apply(self, world: World, f: Fault) -> None:
        card = world.cards[(f.node, f.target["card"])]
        self.mark(card, f)
        card.speed = min(card.speed, self.speed(f))

    def mark(self, card: Any, f: Fault) -> None:
        raise NotImplementedError

    def revert(self, world: World, f: Fault) -> None:
        card = world.cards.get((f.node, f.target["card"]))
        if card is None:
            return
        others = [o for o in world.faults.values() if o.node == f.node and o.target.get("card") == card.index]
        card.speed = min([EFFECTS[o.kind].speed(o) for o in others], default=1.0)
        if not others:  # the card was reset: volatile counters and pending remaps clear
            card.xid, card.remap_pending, card.sbe_vol, card.dbe_vol = 0, 0, 0, 0
            card.npu.clear()


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

    def speed(self, f: Fault) -> float:
        return float(f.params.get("speed", ecc.DEFAULT_SPEED))


class Xid(CardFault):
    def mark(self, card: Any, f: Fault) -> None:
        card.xid = int(f.params["xid"])

    def speed(self, f: Fault) -> float:
        return float(f.params.get("speed", xid.default_speed(f.params)))


class NpuFault(CardFault):
    def apply(self, world: World, f: Fault) -> None:
        super().apply(world, f)
        world.recount(f.node)

    def mark(self, card: Any, f: Fault) -> None:
        card.npu[f.id] = (f.params["code"], f.params.get("level", "SeparateNPU"), f.params.get("type", "chip"),
                          int(f.created_at * 1000))

    def revert(self, world: World, f: Fault) -> None:
        card = world.cards.get((f.node, f.target["card"]))
        if card is not None:
            card.npu.pop(f.id, None)
        super().revert(world, f)
        world.recount(f.node)

    def speed(self, f: Fault) -> float:
        return float(f.params.get("speed", npu.default_speed(f.params)))


class CardIsolate(Effect):
    def apply(self, world: World, f: Fault) -> None:
        index = f.target["card"]
        world.isolated[f.node].add(index)
        world.recount(f.node)
        pod = world.pod_on_card(f.node, index)
        if pod is not None:  # its process dies with the card, as with a drained GPU
            world.actions.append(("delete-pod", pod.namespace, pod.name))

    def revert(self, world: World, f: Fault) -> None:
        world.isolated[f.node].discard(f.target["card"])
        world.recount(f.node)


class Bandwidth(Effect):
    def shape(self, net: Net, f: Fault) -> None:
        rate = float(f.params["rate_mbit"])
        net.bandwidth_mbit = rate if net.bandwidth_mbit is None else min(net.bandwidth_mbit, rate)


class Loss(Effect):
    def shape(self, net: Net, f: Fault) -> None:
        net.loss_percent = max(net.loss_percent, float(f.params["percent"]))


class Partition(Effect):
    def shape(self, net: Net, f: Fault) -> None:
        net.partition = True


class Delay(Effect):
    def shape(self, net: Net, f: Fault) -> None:
        net.delay_ms += float(f.params["ms"])


class KubeletStop(Effect):
    def apply(self, world: World, f: Fault) -> None:
        world.actions.append(("labels", f.node, {LOST_LABEL: "true"}))

    def revert(self, world: World, f: Fault) -> None:
        if f.node in world.node_cards:
            world.actions.append(("labels", f.node, {LOST_LABEL: None}))


EFFECTS: dict[str, Effect] = {"ecc": Ecc(), "xid": Xid(), "card-isolate": CardIsolate(), "bandwidth": Bandwidth(),
                              "loss": Loss(), "partition": Partition(), "delay": Delay(), "kubelet-stop": KubeletStop(),
                              "npu-fault": NpuFault()}
