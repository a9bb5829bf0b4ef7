"""The agent fault kinds, one module each: its name in the protocol (`NAME`), the toolkit's name
for it (`FAULT`; None when a toolkit kind of its own drives it), what it targets (`TARGET`: a
card, the node's network, a pod's processes, or the host itself), the slot it holds on that
target (`SLOT`: two faults of one slot cannot stack, e.g. two root qdiscs on one interface),
whether the agent re-applies it while active (`REFRESH`), optionally what it drives off
(`EVICTS`: "cards" or "node") or that it leaves the node fit to serve what it runs (`FIT`), its
parameters (`PARAMS`, declared with chaos.agent.schema.Param: one declaration for the agent's
check and the toolkit's JSON Schema; `EXAMPLE` for the docs), and
what the node agent does to apply and revert it (`apply`, `revert`: argument lists through the
Host in chaos.agent.backends), and optionally how to read the effect back (`observe`).

The protocol validates through this registry, the node agent dispatches through it, and the fleet
simulator looks its effects up by the same names: no chain of branches anywhere knows the kinds.
"""

from __future__ import annotations

from types import ModuleType

from chaos.agent.kinds import (
    bandwidth,
    card_isolate,
    delay,
    dns_block,
    ecc,
    io_throttle,
    kubelet_stop,
    loss,
    npu,
    partition,
    pull_block,
    rank_stall,
    tcp_reset,
    throttle,
    xid,
)
from chaos.agent.schema import FaultError

REGISTRY: dict[str, ModuleType] = {m.NAME: m for m in (card_isolate, ecc, xid, throttle, bandwidth, loss, partition,
                                                        delay, tcp_reset, pull_block, dns_block, io_throttle,
                                                        kubelet_stop, npu, rank_stall)}
# The toolkit kinds that are nothing but an agent kind (npu-fault has a path without the agent too).
BY_FAULT: dict[str, ModuleType] = {m.FAULT: m for m in REGISTRY.values() if m.FAULT}
# What names a target of each kind on its node: a card; an interface (in a network namespace); a
# pod's processes (one container's, given its ID); or nothing, the host itself.
TARGET_KEYS: dict[str, tuple[str, ...]] = {"card": ("card",), "node": ("interface", "netns"),
                                           "process": ("pod_uid", "container_id"), "host": ()}
# Which of those keys decide whether two faults of one slot share a target: a pod frozen whole and
# one of its containers frozen are one stall.
SLOT_KEYS: dict[str, tuple[str, ...]] = {**TARGET_KEYS, "process": ("pod_uid",)}


def get(name: str) -> ModuleType:
    if not isinstance(name, str) or name not in REGISTRY:
        raise FaultError("kind", f"unknown fault kind {name!r}; expected one of {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


def leaves_fit(fault_kind: str) -> bool:
    """Does a toolkit fault of this kind leave its node fit to serve what it runs (`FIT`: a
    registry outage stops pulls, not the engines whose images are on disk)? A replica need not
    leave such a node to count as recovered."""
    return bool(getattr(BY_FAULT.get(fault_kind), "FIT", False))


def stackable(kind: str, target: dict[str, object], other_kind: str, other_target: dict[str, object]) -> bool:
    """Can a fault of `kind` on `target` join one of `other_kind` already on `other_target`?"""
    mine, theirs = get(kind), get(other_kind)
    if mine.SLOT is None or mine.SLOT != theirs.SLOT:
        return True
    keys = SLOT_KEYS[mine.TARGET]
    return any(target.get(k) != other_target.get(k) for k in keys)


__all__ = ["BY_FAULT", "REGISTRY", "SLOT_KEYS", "TARGET_KEYS", "get", "leaves_fit", "stackable"]
