"""What the fleet simulator believes about the cluster, and how faults and load change it: its
parts, each a module of its own, made one world.

    state    nodes, cards, pods and what the faults did to them, fed by watches (nodes and pods,
             through chaos.kube); all of it behind one lock (watch threads, the HTTP server and
             the ticker take it briefly)
    effects  one per agent kind: what a fault changes in the state (cards, nodes lost, each
             node's network shaping, pods `stalled`), and its read-back; depends on state only
    engine   the load model: replicas, routes, and each replica's queue advanced into the
             histograms and counters the metrics module renders
    faults   the agents' API: faults applied through their effects, expired, read back, made to
             misfire or undone behind the agent's back (`sabotage`) for tests of what reads them

`tick()` expires what is due and advances every replica's queue by one step.
"""

from __future__ import annotations

import time

from testbed.simulator.engine import Engine, LoadProfile
from testbed.simulator.faults import FaultBook


class World(Engine, FaultBook):
    def __init__(self, card_resource: str, product: str = "NVIDIA H100 80GB HBM3",
                 load: LoadProfile | None = None, accelerator: str = "nvidia") -> None:
        super().__init__(card_resource, product, accelerator)
        self.load = load or LoadProfile()

    def tick(self, now: float | None = None) -> None:
        with self.lock:
            wall = time.time() if now is None else now
            mono = time.monotonic()
            seconds = min(max(mono - self.last_tick, 0.0), 10.0)
            self.last_tick = mono
            self._reap(wall)
            self.pull_retries(wall)
            self._advance(seconds, wall)
