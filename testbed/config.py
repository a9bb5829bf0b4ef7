"""What a testbed is made of: sizes, card resource, ports, timings, and where its state lives."""

from __future__ import annotations

import dataclasses
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.errors import SpecError
from chaos.vocabulary import local_testbed_state
from testbed import accelerators

# An extended resource is <domain>/<name>; kubernetes.io domains are reserved for native resources.
_RESOURCE = re.compile(r"^(?=.{1,253}/)([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)+[a-z]{2,}"  # domain prefix
                       r"/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
MAX_NODES = 5000
MAX_CARDS_PER_NODE = 64
PROFILES = ("auto", "small", "large")
LARGE_FROM_NODES = 512  # "auto" picks the large profile from this many nodes (4096 cards at 8 per node)


@dataclass(frozen=True)
class Tuning:
    """What the testbed's size changes. Each large setting trades a little fidelity for the CPU
    that lets 10,000 cards, their runner and its probes share two cores (docs/performance.md)."""

    # kwok renews each node's Lease every quarter of its duration; the controller manager calls a
    # node lost when no renewal came within the grace period.
    node_lease_seconds: int
    node_monitor_grace_seconds: int
    engine_scrape_seconds: float  # vLLM/SGLang metrics
    dcgm_scrape_seconds: float  # dcgm-exporter metrics
    dcgm_fields: str  # "all" of the exporter's default counters, or "health" (the ones faults move)
    remediation_seconds: float  # between the reference remediator's rounds


# Small: fast node-loss detection (a renewal every 5 s) and every series each second.
SMALL = Tuning(node_lease_seconds=20, node_monitor_grace_seconds=15, engine_scrape_seconds=1.0,
               dcgm_scrape_seconds=1.0, dcgm_fields="all", remediation_seconds=2.0)
# Large: the kubelet's own lease (40 s, renewed every 10 s) and upstream's 40 s grace before 1.32
# (a start-up that loads the machine delays renewals: with less, nodes flapped NotReady and their
# pods were evicted as they came), dcgm-exporter's cards every 5 s (its own default collection
# interval is 30 s), engines every 3 s, and only the health counters.
LARGE = Tuning(node_lease_seconds=40, node_monitor_grace_seconds=40, engine_scrape_seconds=3.0,
               dcgm_scrape_seconds=5.0, dcgm_fields="health", remediation_seconds=5.0)


def default_state_dir() -> Path:
    return local_testbed_state()


def _default_advertise_address() -> str:
    """The apiserver writes this address into the `kubernetes` EndpointSlice, where loopback is
    invalid. Nothing ever connects to it (every listener binds 127.0.0.1), so when the host has
    no routable address a fixed private one serves as a mere name."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only asks the routing table
            address = s.getsockname()[0]
            if not address.startswith("127."):
                return str(address)
    except OSError:
        pass
    return "10.255.255.1"


@dataclass(frozen=True)
class Ports:
    """Every listener binds 127.0.0.1; ports are consecutive from `base`."""

    base: int

    @property
    def apiserver(self) -> int:
        return self.base

    @property
    def etcd_client(self) -> int:
        return self.base + 1

    @property
    def etcd_peer(self) -> int:
        return self.base + 2

    @property
    def controller_manager(self) -> int:
        return self.base + 3

    @property
    def scheduler(self) -> int:
        return self.base + 4

    @property
    def kwok(self) -> int:
        return self.base + 5

    @property
    def simulator(self) -> int:
        return self.base + 6

    @property
    def prometheus(self) -> int:
        return self.base + 7

    def named(self) -> dict[str, int]:
        return {
            "kube-apiserver": self.apiserver,
            "etcd client": self.etcd_client,
            "etcd peer": self.etcd_peer,
            "kube-controller-manager": self.controller_manager,
            "kube-scheduler": self.scheduler,
            "kwok": self.kwok,
            "fleet simulator": self.simulator,
            "prometheus": self.prometheus,
        }


@dataclass(frozen=True)
class TestbedConfig:
    nodes: int = 128
    cards_per_node: int = 8
    card_resource: str = accelerators.NVIDIA.card_resource
    card_product: str = accelerators.NVIDIA.card_product
    accelerator: str = accelerators.NVIDIA.name  # whose device plugin and exporter the testbed fakes (accelerators.py)
    nodes_per_rack: int = 16
    racks_per_zone: int = 2
    port_base: int = 6443
    state_dir: Path = field(default_factory=default_state_dir)
    advertise_address: str = field(default_factory=_default_advertise_address)
    # How long pods tolerate node.kubernetes.io/not-ready and /unreachable before eviction
    # (300 s upstream; short here so node-loss experiments finish in seconds).
    not_ready_toleration_seconds: int = 15
    unreachable_toleration_seconds: int = 15
    # Lease, scrape and remediation intervals by size (Tuning); "auto" goes by the node count.
    profile: str = "auto"
    # The reference remediator (ECC/XID -> quarantine); off shows an experiment turning red.
    remediation: bool = True
    # The fake DRA driver taints a card's device on an XID (testbed/simulator/dra.py); off shows a
    # device-taint probe turning red.
    dra_health: bool = True
    scrape_seconds: float | None = None  # the engines' scrape interval; None: the profile's
    # Load per replica as a fraction of its healthy service rate, and the top-of-hour spike.
    utilisation: float = 0.25
    spike_factor: float = 1.0
    # Serve vLLM metrics in whatever format the scraper asks for: Prometheus 2.x then stores
    # them as `vllm_...` (see probes/metric_names.py). Off: plain text, `vllm:...` kept.
    openmetrics: bool = False

    __test__ = False  # not a pytest test class despite the name

    @property
    def ports(self) -> Ports:
        return Ports(self.port_base)

    @property
    def cards(self) -> int:
        return self.nodes * self.cards_per_node

    @property
    def large(self) -> bool:
        return self.profile == "large" or (self.profile == "auto" and self.nodes >= LARGE_FROM_NODES)

    @property
    def tuning(self) -> Tuning:
        tuning = LARGE if self.large else SMALL
        if self.scrape_seconds is not None:
            tuning = dataclasses.replace(tuning, engine_scrape_seconds=self.scrape_seconds)
        return tuning

    def validate(self) -> TestbedConfig:
        def positive(name: str, value: Any, maximum: int) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
                raise SpecError(f"--{name.replace('_', '-')}: expected an integer from 1 to {maximum}, got {value!r}")

        positive("nodes", self.nodes, MAX_NODES)
        positive("cards_per_node", self.cards_per_node, MAX_CARDS_PER_NODE)
        positive("nodes_per_rack", self.nodes_per_rack, MAX_NODES)
        positive("racks_per_zone", self.racks_per_zone, MAX_NODES)
        positive("not_ready_toleration_seconds", self.not_ready_toleration_seconds, 3600)
        positive("unreachable_toleration_seconds", self.unreachable_toleration_seconds, 3600)
        if self.accelerator not in accelerators.PROFILES:
            raise SpecError(f"--accelerator: expected one of {', '.join(accelerators.PROFILES)}, "
                            f"got {self.accelerator!r}")
        if not _RESOURCE.match(self.card_resource) or self.card_resource.split("/")[0].endswith("kubernetes.io"):
            examples = " or ".join(repr(a.card_resource) for a in accelerators.PROFILES.values())
            raise SpecError(f"--card-resource: expected an extended resource name like {examples}, "
                            f"got {self.card_resource!r}")
        if not _LABEL_VALUE.match(self.card_product):
            raise SpecError(f"--card-product: must be a valid label value, got {self.card_product!r}")
        if not 1024 <= self.port_base <= 65535 - 16:
            raise SpecError(f"--port-base: expected a port from 1024 to {65535 - 16}, got {self.port_base}")
        if self.profile not in PROFILES:
            raise SpecError(f"--profile: expected one of {', '.join(PROFILES)}, got {self.profile!r}")
        if self.scrape_seconds is not None and not 0.2 <= self.scrape_seconds <= 60:
            raise SpecError(f"--scrape-interval: expected seconds from 0.2 to 60, got {self.scrape_seconds}")
        if not 0 < self.utilisation < 10:
            raise SpecError(f"--utilisation: expected a fraction above 0, got {self.utilisation}")
        if not 1 <= self.spike_factor <= 100:
            raise SpecError(f"--spike-factor: expected a factor from 1 to 100, got {self.spike_factor}")
        return self

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["state_dir"] = str(self.state_dir)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TestbedConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["state_dir"] = Path(values["state_dir"])
        return cls(**values)


def rack_of(index: int, config: TestbedConfig) -> int:
    return index // config.nodes_per_rack


def zone_of(index: int, config: TestbedConfig) -> int:
    return rack_of(index, config) // config.racks_per_zone


def taken_ports(ports: Ports) -> list[str]:
    """Ports some other process listens on, named ("port 6443 (kube-apiserver)")."""
    taken = []
    for name, port in ports.named().items():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                taken.append(f"port {port} ({name})")
    return taken
