"""Fake GPU nodes: Node objects that kwok keeps alive (heartbeat, Lease) and the real scheduler
fills. Labels carry the topology (hostname, zone, rack) and the card product."""

from __future__ import annotations

from typing import Any

from chaos.errors import Conflict
from chaos.kube import Kube
from chaos.vocabulary import AGENT_ENDPOINT_ANNOTATION, RACK_LABEL
from testbed.accelerators import named
from testbed.config import TestbedConfig, rack_of, zone_of

KWOK_ANNOTATION = "kwok.x-k8s.io/node"  # kwok manages nodes annotated with this = "fake"
AGENT_ANNOTATION = AGENT_ENDPOINT_ANNOTATION  # where this node's fault agent listens
TESTBED_LABEL = "kilocard.io/testbed"
PRODUCT_LABEL = "kilocard.io/card-product"
RESOURCE_LABEL = "kilocard.io/card-resource"  # the resource name with '/' -> '.', for selectors


def node_name(index: int, prefix: str = "gpu") -> str:
    return f"{prefix}-{index:03d}"


def node_manifest(index: int, config: TestbedConfig, prefix: str | None = None,
                  extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    accelerator = named(config.accelerator)
    name = node_name(index, prefix or accelerator.node_prefix)
    cards = str(config.cards_per_node)
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": f"{accelerator.node_prefix}-{config.cards_per_node}x",
        "topology.kubernetes.io/region": "testbed",
        "topology.kubernetes.io/zone": f"zone-{zone_of(index, config)}",
        RACK_LABEL: f"rack-{rack_of(index, config):02d}",
        PRODUCT_LABEL: config.card_product,
        RESOURCE_LABEL: config.card_resource.replace("/", "."),
        TESTBED_LABEL: "true",
        "type": "kwok",
    }
    if config.card_resource == accelerator.card_resource:  # its device plugin's and discovery's labels
        labels.update(accelerator.node_labels(config.cards_per_node, config.card_product))
        labels["kubernetes.io/arch"] = accelerator.arch
    labels.update(extra_labels or {})
    resources = {"cpu": "192", "memory": "2Ti", "pods": "110", "ephemeral-storage": "7Ti",
                 config.card_resource: cards}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {
            KWOK_ANNOTATION: "fake",
            AGENT_ANNOTATION: f"http://127.0.0.1:{config.ports.simulator}/nodes/{name}",
        }},
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
        },
    }


def create_nodes(kube: Kube, manifests: list[dict[str, Any]]) -> int:
    """Create nodes with bounded concurrency; existing ones are left as they are. Returns how many were new."""

    def create(body: dict[str, Any]) -> int:
        try:
            kube.create_node(body)
            return 1
        except Conflict:
            return 0

    return sum(kube.batch(create, manifests))


def delete_nodes(kube: Kube, names: list[str]) -> None:
    kube.batch(kube.delete_node, names)
