"""Image pulls on the simulated nodes, as the kubelet makes them under a registry outage
(chaos.agent.kinds.pull_block) or a DNS failure (chaos.agent.kinds.dns_block: a registry named by
its host no longer resolves): a pod waiting for its image on a node that cannot reach the
image's registry fails its pull and backs off (10 s, doubling to 300 s, on the pod's timing's
clock: testbed/timing.py); once the outage ends, the next retry pulls it. A pod's failed pull is
shown to kwok by a mark on the pod (testbed/stages/pod-pull-failing.yaml); this module decides
when to put the mark on and take it off. Pure bookkeeping: the world's state calls it under its lock.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from chaos.agent.kinds.pull_block import canonical, endpoint, registry_of

MAX_BACKOFF_FACTOR = 30  # the kubelet's MaxImageBackOff (300 s) over its first back-off (10 s)


def retry_at(since: float, backoff: float, after: float) -> float:
    """The first of the kubelet's pull retries (the first pull failed at `since`; retries
    `backoff`, 2x, 4x ... apart, each gap at most 30x) that comes at or after `after`."""
    if backoff <= 0:
        return after
    at, gap = since + backoff, backoff
    while at < after:
        gap = min(gap * 2, backoff * MAX_BACKOFF_FACTOR)
        at += gap
    return at


def _by_address(registry: str) -> bool:
    try:
        ipaddress.ip_address(endpoint(registry)[0])
        return True
    except ValueError:
        return False


@dataclass(frozen=True)
class Block:
    """What a fault keeps a node from pulling: these registries, or (None) every one named by its
    host (names do not resolve); `why` as the kubelet's message says it."""

    registries: frozenset[str] | None
    why: str

    def refuses(self, registry: str) -> bool:
        return not _by_address(registry) if self.registries is None else registry in self.registries


@dataclass
class Waiting:
    """A pod whose pull failed: where, from which registry, since when, on what back-off."""

    namespace: str
    name: str
    node: str
    registry: str
    since: float
    backoff: float
    unblocked: float | None = None  # when its node could pull from the registry again


@dataclass
class Pulls:
    blocks: dict[str, dict[str, Block]] = field(default_factory=dict)  # node -> fault id -> what it keeps out
    waiting: dict[str, Waiting] = field(default_factory=dict)  # pod uid -> its failed pull

    def block(self, node: str, fault_id: str, registries: list[str] | None) -> None:
        """Refuse pulls from `registries` on the node, or (None) from every registry named by host."""
        found = None if registries is None else frozenset(canonical(r) for r in registries)
        why = "refuses connections" if found is not None else "does not resolve (no DNS)"
        self.blocks.setdefault(node, {})[fault_id] = Block(found, why)

    def unblock(self, node: str, fault_id: str) -> None:
        self.blocks.get(node, {}).pop(fault_id, None)

    def blocked(self, node: str, fault_id: str) -> Block | None:
        return self.blocks.get(node, {}).get(fault_id)

    def refuses(self, node: str, registry: str) -> bool:
        return self.why(node, registry) is not None

    def why(self, node: str, registry: str) -> str | None:
        """Why the node's pull from the registry fails ("<registry> refuses connections"), if it does."""
        found = next((b for b in self.blocks.get(node, {}).values() if b.refuses(registry)), None)
        return None if found is None else f"{registry} {found.why}"

    def seen(self, uid: str, namespace: str, name: str, node: str, image: str, waits_for_image: bool,
             marked: bool, backoff: float, now: float) -> bool | None:
        """A pod as its latest event shows it. Returns True to mark it (its pull fails), False to
        take the mark off (it runs: the mark is stale), None to leave it."""
        if not waits_for_image:
            self.waiting.pop(uid, None)
            return False if marked else None
        registry = registry_of(image)
        if uid not in self.waiting and (marked or self.refuses(node, registry)):
            # A mark seen without a record (the simulator restarted) is retried from now.
            self.waiting[uid] = Waiting(namespace, name, node, registry, now, backoff)
        return True if uid in self.waiting and not marked and self.refuses(node, registry) else None

    def gone(self, uid: str) -> None:
        self.waiting.pop(uid, None)

    def due(self, now: float) -> list[Waiting]:
        """The failed pulls whose outage has ended and whose next retry has come: their marks go."""
        found = []
        for uid, w in list(self.waiting.items()):
            if self.refuses(w.node, w.registry):
                w.unblocked = None
                continue
            if w.unblocked is None:
                w.unblocked = now
            if now >= retry_at(w.since, w.backoff, w.unblocked):
                found.append(self.waiting.pop(uid))
        return found
