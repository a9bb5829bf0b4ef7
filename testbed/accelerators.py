"""The card vendors the testbed can fake, and what each puts on a node: its extended resource, its
product, the labels its device plugin and feature discovery write, and which exporter reports its
health (dcgm-exporter, or Ascend's npu-exporter and MindX DL's ConfigMaps: testbed/simulator/).

The Ascend labels are the ones MindX DL documents for an Atlas 800T A2 node
(docs/research/ascend-sources.md, section 2); `servertype` follows the plugin's
`<card type>-<AI cores>` form with the 910B3's 20 cores.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Accelerator:
    name: str
    card_resource: str
    card_product: str
    exporter: str  # "dcgm" | "npu"
    arch: str = "amd64"
    node_prefix: str = "gpu"  # the testbed's node names: gpu-000, npu-000
    # Labels beyond the testbed's own; "{cards}" stands for the node's card count.
    labels: dict[str, str] = field(default_factory=dict)

    def node_labels(self, cards: int, product: str) -> dict[str, str]:
        return {k: v.format(cards=cards, product=product) for k, v in self.labels.items()}


NVIDIA = Accelerator(
    "nvidia", "nvidia.com/gpu", "NVIDIA-H100-80GB-HBM3", "dcgm",
    # What NVIDIA's GPU feature discovery puts on real GPU nodes.
    labels={"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "{product}", "nvidia.com/gpu.count": "{cards}"})
ASCEND = Accelerator(
    "ascend", "huawei.com/Ascend910", "Ascend910B3", "npu", arch="arm64", node_prefix="npu",
    labels={"accelerator": "huawei-Ascend910", "node.kubernetes.io/npu.chip.name": "910B3",
            "servertype": "Ascend910B-20", "accelerator-type": "module-910b-{cards}", "host-arch": "huawei-arm",
            "workerselector": "dls-worker-node", "mind-cluster/npu-chip-memory": "64G"})
PROFILES = {a.name: a for a in (NVIDIA, ASCEND)}


def named(name: str) -> Accelerator:
    return PROFILES[name]


def for_resource(card_resource: str) -> Accelerator:
    """The profile whose device plugin serves this resource (a twin copies a cluster by it)."""
    vendor = card_resource.split("/", 1)[0]
    return next((a for a in PROFILES.values() if a.card_resource.split("/", 1)[0] == vendor), NVIDIA)
