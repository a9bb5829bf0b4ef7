"""A month of failures on a model of the fleet: a discrete-event simulation (SimPy) over one
snapshot of the cluster.

    failures   each class (chaos.rehearsal.rates) arrives as a Poisson process over the units it
               is counted on that still serve (cards or nodes), each unit as likely as another
    effects    node: the node is out until repaired, its replicas' pods are gone at once;
               card: one card is out until repaired, the pod holding it goes (a free card only
               cuts room); replica: the engine restarts in place
    recovery   a replica driven off its node is placed again after its detection time by the
               same first-fit placement the probes use (probes.capacity.replace: room, taints,
               nodeSelector, required anti-affinity, every waiting replica at once), then is
               Ready after its model's start-up; with nowhere to go it waits for a repair to
               free room (chaos.rehearsal.recoveries)
    repairs    exponential, of the class's mean; `crews` repairs at a time (None: every failed
               part at once), first come, first served
    SLO        each model's P95 TTFT with its load over the replicas serving (probes.impact.Load)

Every random stream is seeded from the run's seed and its own name, so two runs with one seed
are the same month, and a spare added to one model leaves the failures drawn unchanged (common
random numbers: the curve over spares is not noise).
"""

from __future__ import annotations

import dataclasses
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import simpy

from chaos.rehearsal.rates import FailureClass
from chaos.rehearsal.recoveries import Recoveries
from probes import capacity
from probes.impact import replicas_serving
from probes.snapshot import ClusterSnapshot, PodView

DAY = 86_400.0


@dataclass
class Replica:
    namespace: str
    model: str
    group: str
    pods: list[PodView]
    serving: bool = True
    generation: int = 0  # bumped by each failure that takes it down: an older recovery stands down


@dataclass(frozen=True)
class Event:
    at: float  # seconds from the start
    kind: str  # failure | repaired | placed | ready | waiting
    what: str  # the class (failure, repaired), or the replica
    detail: str = ""  # failure: its effect (node, card, replica); placed: the nodes; waiting: why
    node: str = ""  # failure, repaired: the node the part is in
    card: int | None = None  # failure: the card index drawn (a node's failure draws one too)
    pods: tuple[str, ...] = ()  # failure: namespace/name of the pods of the replicas it took down


@dataclass
class Month:
    """What happened: each model's serving replicas over time, and the events."""

    horizon: float
    serving: dict[tuple[str, str], list[tuple[float, int]]]  # (t, replicas serving from t)
    events: list[Event] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    spares_unplaced: dict[tuple[str, str], int] = field(default_factory=dict)


class Fleet:
    """The fleet as the simulation changes it: nodes up or down, cards out, replicas and where
    their pods run."""

    def __init__(self, env: simpy.Environment, snapshot: ClusterSnapshot, recoveries: Recoveries,
                 seed: int, crews: int | None) -> None:
        self.env, self.recoveries, self.seed = env, recoveries, seed
        self.nodes = {n.name: n for n in snapshot.nodes}
        self.down: set[str] = set()
        self.cards_out: dict[str, int] = defaultdict(int)
        self.others = [p for p in snapshot.pods if not p.model and not p.deleting and p.node]  # hold cards only
        # Only whole, Ready replicas serve at the start; the rest are not the fleet's to lose.
        self.replicas = {(namespace, group): Replica(namespace, model, group, members)
                         for (namespace, model), groups in replicas_serving(snapshot).items()
                         for group, members in groups.items() if all(m.node for m in members)}
        self.month = Month(0.0, {key: [(0.0, self.count(key))]
                                 for key in sorted({(r.namespace, r.model) for r in self.replicas.values()})})
        self.room = env.event()  # triggered whenever room may have freed (a repair)
        self.changed = env.event()  # triggered whenever a unit stops or starts serving
        self.crews = simpy.Resource(env, crews) if crews else None
        self.rng = {name: random.Random(f"{seed}:{name}") for name in ("recovery", "repair")}

    # --- the state ---------------------------------------------------------------------------
    def count(self, key: tuple[str, str]) -> int:
        return sum(1 for r in self.replicas.values() if r.serving and (r.namespace, r.model) == key)

    def record(self, r: Replica) -> None:
        key = (r.namespace, r.model)
        now, serving = self.env.now, self.count(key)
        timeline = self.month.serving[key]
        if timeline[-1][0] == now:
            timeline[-1] = (now, serving)
        elif timeline[-1][1] != serving:
            timeline.append((now, serving))

    def snapshot(self, pending: list[Replica]) -> ClusterSnapshot:
        """The fleet as the scheduler sees it: every replica placed, and `pending`'s pods unbound."""
        pods = [p for r in self.replicas.values() for p in r.pods if p.node] + self.others
        pods += [dataclasses.replace(p, node=None) for r in pending for p in r.pods]
        nodes = tuple(dataclasses.replace(n, ready=n.ready and n.name not in self.down,
                                          cards_allocatable=max(0, n.cards_allocatable - self.cards_out[n.name]))
                      for n in self.nodes.values())
        return _bound(ClusterSnapshot(tuple(pods), nodes))

    def place(self, r: Replica) -> bool:
        """Place one replica's pods where the scheduler would; False (nothing moved) where any
        of them fits nowhere."""
        s = self.snapshot([r])
        found = capacity.replace(s, frozenset())
        moves = {name: node for name, node in found.moves.items()}
        if any(f"{p.namespace}/{p.name}" not in moves for p in r.pods):
            return False
        r.pods = [dataclasses.replace(p, node=moves[f"{p.namespace}/{p.name}"]) for p in r.pods]
        return True

    # --- what happens ------------------------------------------------------------------------
    def units_changed(self) -> None:
        fired, self.changed = self.changed, self.env.event()
        fired.succeed()

    def fail(self, cls: FailureClass, node: str, card: int) -> None:
        self.units_changed()
        self.month.failures[cls.name] += 1
        held = self.holder(node, card)
        taken = ([r for r in self.replicas.values() if any(p.node == node for p in r.pods)] if cls.effect == "node"
                 else [held] if held is not None else [])
        self.month.events.append(Event(self.env.now, "failure", cls.name, cls.effect, node, card,
                                       tuple(f"{p.namespace}/{p.name}" for r in taken for p in r.pods)))
        if cls.effect == "node":
            self.down.add(node)
        elif cls.effect == "card":
            self.cards_out[node] += 1
        for r in taken:
            self.take_down(r, cls.name, move=cls.effect != "replica")
        if cls.effect != "replica":
            self.env.process(self.repair(cls, node, 0 if cls.effect == "node" else 1))

    def holder(self, node: str, card: int) -> Replica | None:
        """The replica whose pod holds card index `card` of `node` (cards are handed out in
        order; which card a pod holds is not in the API, so the order stands for it)."""
        start = 0
        for r in sorted(self.replicas.values(), key=lambda r: (r.namespace, r.group)):
            for p in r.pods:
                if p.node == node:
                    if start <= card < start + p.cards:
                        return r
                    start += p.cards
        return None

    def take_down(self, r: Replica, cls: str, move: bool) -> None:
        r.generation += 1
        r.serving = False
        if move:
            r.pods = [dataclasses.replace(p, node=None) for p in r.pods]
        self.record(r)
        self.env.process(self.recover(r, cls, r.generation))

    def recover(self, r: Replica, cls: str, generation: int) -> Any:
        detection, startup = self.recoveries.draw(self.rng["recovery"], cls, r.model)
        yield self.env.timeout(detection)
        if r.generation != generation:
            return
        if not all(p.node for p in r.pods):
            while not self.place(r):
                self.month.events.append(Event(self.env.now, "waiting", r.group, "no room"))
                yield self.room
                if r.generation != generation:
                    return
            self.month.events.append(Event(self.env.now, "placed", r.group,
                                           ",".join(sorted({p.node or "" for p in r.pods}))))
        yield self.env.timeout(startup)
        if r.generation != generation:
            return
        r.serving = True
        self.record(r)
        self.month.events.append(Event(self.env.now, "ready", r.group))

    def repair(self, cls: FailureClass, node: str, cards: int) -> Any:
        if self.crews is not None:
            with self.crews.request() as turn:
                yield turn
                yield self.env.timeout(self._repair_time(cls))
        else:
            yield self.env.timeout(self._repair_time(cls))
        if cards:
            self.cards_out[node] -= cards
        else:
            self.down.discard(node)
        self.month.events.append(Event(self.env.now, "repaired", cls.name, node=node))
        self.units_changed()
        freed, self.room = self.room, self.env.event()
        freed.succeed()

    def _repair_time(self, cls: FailureClass) -> float:
        return self.rng["repair"].expovariate(1 / (cls.repair_hours * 3600)) if cls.repair_hours > 0 else 0.0


def arrivals(env: simpy.Environment, fleet: Fleet, cls: FailureClass) -> Any:
    """Failures of one class: a Poisson process over the units of it that serve now. The next
    arrival is drawn again whenever a unit stops or starts serving (exact: the exponential has no
    memory), so a part that is down does not fail."""
    rng = random.Random(f"{fleet.seed}:arrivals:{cls.name}")
    if cls.per_day <= 0:
        return
    while True:
        up = [n for n in fleet.nodes.values() if n.name not in fleet.down and n.ready]
        weights = [max(0, n.cards_capacity) if cls.per == "card" else 1 for n in up]
        units = sum(weights)
        changed = fleet.changed
        if units == 0:
            yield changed
            continue
        arrival = env.timeout(rng.expovariate(cls.per_day * units / DAY))
        yield arrival | changed
        if changed.triggered:  # a unit stopped or started serving: the rate changed
            continue
        node = rng.choices(up, weights=weights)[0]
        fleet.fail(cls, node.name, rng.randrange(max(node.cards_capacity, 1)))


def spares(snapshot: ClusterSnapshot,
           extra: dict[tuple[str, str], int]) -> tuple[ClusterSnapshot, dict[tuple[str, str], int]]:
    """The snapshot with `extra` replicas of each model added (copies of one of its replicas,
    placed where the scheduler would put them), and how many of them found no room."""
    pods = list(snapshot.pods)
    unplaced: dict[tuple[str, str], int] = {}
    serving = replicas_serving(snapshot)
    for (namespace, model), count in sorted(extra.items()):
        template = next(iter(serving.get((namespace, model), {}).values()), None)
        if template is None:
            unplaced[(namespace, model)] = count
            continue
        for i in range(count):
            group = f"{template[0].group}~spare{i}"
            new = [dataclasses.replace(p, name=f"{p.name}~spare{i}", uid=f"{p.uid}~spare{i}", node=None, group=group)
                   for p in template]
            found = capacity.replace(_bound(ClusterSnapshot(tuple(pods + new), snapshot.nodes, snapshot.card_resource)),
                                     frozenset())
            if any(f"{p.namespace}/{p.name}" not in found.moves for p in new):
                unplaced[(namespace, model)] = count - i
                break
            pods += [dataclasses.replace(p, node=found.moves[f"{p.namespace}/{p.name}"]) for p in new]
    return _bound(ClusterSnapshot(tuple(pods), snapshot.nodes, snapshot.card_resource)), unplaced


def _bound(s: ClusterSnapshot) -> ClusterSnapshot:
    """`s` with each node's cards in use recounted from the pods bound to it."""
    used: dict[str, int] = defaultdict(int)
    for p in s.pods:
        if p.node and not p.deleting:
            used[p.node] += p.cards
    return ClusterSnapshot(s.pods, tuple(dataclasses.replace(n, cards_in_use=used[n.name]) for n in s.nodes),
                           s.card_resource)


def simulate(snapshot: ClusterSnapshot, classes: tuple[FailureClass, ...], recoveries: Recoveries,
             horizon_days: float, seed: int, crews: int | None = None) -> Month:
    """One month (or `horizon_days`) of failures on the fleet `snapshot` shows."""
    env = simpy.Environment()
    fleet = Fleet(env, snapshot, recoveries, seed, crews)
    for cls in classes:
        env.process(arrivals(env, fleet, cls))
    horizon = horizon_days * DAY
    env.run(until=horizon)
    fleet.month.horizon = horizon
    return fleet.month

