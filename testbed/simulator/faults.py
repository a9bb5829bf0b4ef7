"""The simulated node agents' API over the simulator's state: faults validated and refused as the
agent refuses them, applied and reverted through their effects (testbed/simulator/effects.py),
expired at their TTL, read back, and, for tests of fault-landed verification, made to misfire or
undone behind the agent's back (`sabotage`)."""

from __future__ import annotations

import time
from typing import Any

from chaos.agent import kinds
from chaos.agent.protocol import Fault, FaultError, validate
from testbed.simulator.effects import EFFECTS
from testbed.simulator.state import State


class FaultBook(State):
    def _reap(self, now: float) -> None:
        for f in [f for f in self.faults.values() if f.expires_at <= now]:
            self._revert(f)

    def faults_on(self, node: str) -> list[Fault]:
        with self.lock:
            self._reap(time.time())
            return [f for f in self.faults.values() if f.node == node]

    def add_fault(self, node: str, body: Any, key: str | None = None) -> Fault:
        """Validate and apply a fault on `node`; raises FaultError naming the bad field. `key`
        remembers the request (see `created`)."""
        spec = validate(body)
        with self.lock:
            if node not in self.node_cards:
                raise FaultError("node", f"unknown node {node!r}", status=404)
            card = spec["target"].get("card")
            if card is not None and not 0 <= card < self.node_cards[node]:
                raise FaultError("target.card", f"node {node} has cards 0-{self.node_cards[node] - 1}, got {card}")
            for other in self.faults.values():  # what cannot stack, as the node agent refuses it
                if other.node == node and not kinds.stackable(spec["kind"], spec["target"], other.kind, other.target):
                    raise FaultError("target", f"{spec['target']} of {node} already has a {other.kind} fault "
                                               f"({other.id}, run {other.run_id or '?'})", status=409)
            f = Fault.create(node, spec)
            if spec["kind"] in self.misfires[node]:  # listed as applied, and never in effect
                self.misfires[node].discard(spec["kind"])
                self.sabotaged.add(f.id)
            else:
                self._apply(f)
            self.faults[f.id] = f
            if key:
                self.by_key[key] = f
            return f

    def created(self, key: str | None) -> Fault | None:
        """The fault a request with this idempotency key made, if one did."""
        with self.lock:
            return self.by_key.get(key) if key else None

    def _active(self, node: str, fault_id: str) -> Fault:
        f = self.faults.get(fault_id)
        if f is None or f.node != node:
            raise KeyError(fault_id)
        return f

    def observe(self, node: str, fault_id: str) -> tuple[str, str]:
        """(confirmed | mismatch | inconclusive, evidence): an active fault's effect read back from
        the world, as the agent reads its own back; KeyError when the fault is not active on `node`."""
        with self.lock:
            self._reap(time.time())
            f = self._active(node, fault_id)
            return EFFECTS[f.kind].observe(self, f)

    def misfire(self, node: str, kind: str) -> None:
        """The next fault of agent kind `kind` on `node` is accepted and listed, and never takes
        effect: a fault that silently does not land (a DCGM field not injected, the wrong
        interface), for tests of what reads it back."""
        kinds.get(kind)
        with self.lock:
            self.misfires[node].add(kind)

    def sabotage(self, node: str, fault_id: str) -> None:
        """Undo an active fault's effect behind the agent's back, as if someone restored the node by
        hand: the fault stays listed, `observe` tells the mismatch, and its revert later finds
        nothing left to undo. KeyError when the fault is not active on `node`."""
        with self.lock:
            self._reap(time.time())
            f = self._active(node, fault_id)
            if f.id not in self.sabotaged:
                self.sabotaged.add(f.id)
                EFFECTS[f.kind].revert(self, f)

    def delete_fault(self, node: str, fault_id: str) -> str:
        """'reverted' now, 'already ended' (idempotent), or KeyError when never known."""
        with self.lock:
            f = self.faults.get(fault_id)
            if f is not None and f.node == node:
                self._revert(f)
                return "reverted"
            if fault_id in self.ended:
                return "already ended"
            raise KeyError(fault_id)

    def _apply(self, f: Fault) -> None:
        EFFECTS[f.kind].apply(self, f)

    def _revert(self, f: Fault) -> None:
        self.faults.pop(f.id, None)
        self.ended.add(f.id)
        if f.id in self.sabotaged:
            self.sabotaged.discard(f.id)  # undone by hand already
        else:
            EFFECTS[f.kind].revert(self, f)
