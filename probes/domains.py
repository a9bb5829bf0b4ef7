"""The failure domains of a cluster, read off one snapshot: each thing whose single failure takes
a known set of nodes, pods and cards with it.

    card       a card some replica pod holds (which card is not in the API: one domain per pod
               that holds cards, the loss of one of them), the pod ends and its node has one
               card fewer; a node's free cards are one domain (they cut its room only)
    tp-group   one replica's pods (a crash of its engine, a rank that hangs): they end, their
               nodes stay
    node       one node, with every pod on it
    rack, zone, switch
               the nodes sharing a value of a topology label (kilocard's rack, the zone,
               topograph's leaf and spine switches where it labels the nodes)
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from chaos.vocabulary import RACK_LABEL
from probes.snapshot import ClusterSnapshot

ZONE_LABEL = "topology.kubernetes.io/zone"
# NVIDIA topograph's switch labels (github.com/NVIDIA/topograph, pkg/k8s): the leaf switch a node
# hangs off, and the spine above it.
LEAF_LABEL = "network.topology.nvidia.com/leaf"
SPINE_LABEL = "network.topology.nvidia.com/spine"
# Label key -> the kind of domain its values name.
TOPOLOGY = {RACK_LABEL: "rack", ZONE_LABEL: "zone", LEAF_LABEL: "switch", SPINE_LABEL: "switch"}
KINDS = ("card", "tp-group", "node", "rack", "switch", "zone")


@dataclass(frozen=True)
class Domain:
    kind: str
    name: str
    nodes: frozenset[str] = frozenset()  # lost whole, with their pods
    pods: frozenset[tuple[str, str]] = frozenset()  # (namespace, name) that end, their nodes staying
    cards_out: tuple[tuple[str, int], ...] = ()  # (node, cards) taken out of service on a node that stays
    where: tuple[str, ...] = field(default=(), compare=False)  # the nodes it is on, for a page's grid

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.name}"


def of(snapshot: ClusterSnapshot, labels: dict[str, str] | None = None, kinds: tuple[str, ...] = KINDS) -> list[Domain]:
    """Every single failure domain of `kinds` the snapshot shows; `labels` (key -> kind) are the
    topology labels read (default TOPOLOGY). Domains are in a stable order: kind, then name."""
    labels = TOPOLOGY if labels is None else labels
    found: list[Domain] = []
    live = [p for p in snapshot.pods if p.model and not p.deleting and p.node]
    if "card" in kinds:
        for p in sorted((p for p in live if p.cards), key=lambda p: (p.node or "", p.namespace, p.name)):
            found.append(Domain("card", f"{p.node}/{p.namespace}/{p.name}", pods=frozenset({(p.namespace, p.name)}),
                                cards_out=((p.node or "", 1),), where=(p.node or "",)))
        for n in snapshot.nodes:
            if n.cards_free:
                found.append(Domain("card", f"{n.name}/free", cards_out=((n.name, 1),), where=(n.name,)))
    if "tp-group" in kinds:
        groups: dict[tuple[str, str], list[tuple[str, str, str]]] = defaultdict(list)
        for p in live:
            groups[(p.namespace, p.group)].append((p.namespace, p.name, p.node or ""))
        for (namespace, group), members in sorted(groups.items()):
            found.append(Domain("tp-group", f"{namespace}/{group}", pods=frozenset((ns, n) for ns, n, _ in members),
                                where=tuple(sorted({node for _, _, node in members}))))
    if "node" in kinds:
        found += [Domain("node", n.name, nodes=frozenset({n.name}), where=(n.name,))
                  for n in sorted(snapshot.nodes, key=lambda n: n.name)]
    for key, kind in labels.items():
        if kind not in kinds:
            continue
        by_value: dict[str, list[str]] = defaultdict(list)
        for n in snapshot.nodes:
            if n.labels.get(key):
                by_value[n.labels[key]].append(n.name)
        name = key.rsplit("/", 1)[-1]
        for value, nodes in sorted(by_value.items()):
            label = value if kind == name else f"{name}={value}"  # a switch says which tier
            found.append(Domain(kind, label, nodes=frozenset(nodes), where=tuple(sorted(nodes))))
    order = {kind: i for i, kind in enumerate(KINDS)}
    return sorted(found, key=lambda d: (order.get(d.kind, len(KINDS)), d.name))
