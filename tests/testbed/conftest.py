"""One small real testbed for the whole run; each test gets its own namespace and node pool.

A pool is a set of fresh nodes labelled and tainted `kilocard.io/pool=<name>`; workloads pinned
to it (testbed.fleet.pinned) land nowhere else, so tests never see each other's pods.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chaos.kube import Kube, node_ready
from testbed import fleet, nodes
from testbed.cluster import Testbed
from testbed.config import TestbedConfig

# Each xdist worker ("gw0", "gw1", ...) has its own testbed, 200 ports above the previous one's.
# Without xdist (-p no:xdist, -o addopts=): a worker number no xdist run of six uses, so a test run
# beside a full run never takes over one of its testbeds' ports.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw9").removeprefix("gw"))
PORT_BASE = int(os.environ.get("KILOCARD_TEST_PORT_BASE", "17443")) + 200 * _WORKER
_pool_ids = itertools.count()


@pytest.fixture(scope="session")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    config = TestbedConfig(nodes=4, port_base=PORT_BASE, state_dir=Path(tmp_path_factory.mktemp("testbed")))
    tb = Testbed(config.validate())
    tb.up(say=lambda _m: None, timeout=120)
    try:
        yield tb
    finally:
        tb.down(say=lambda _m: None)


@pytest.fixture(scope="session")
def kube(testbed: Testbed) -> Iterator[Kube]:
    k = testbed.kube()
    yield k
    k.close()


@dataclass
class Pool:
    name: str
    namespace: str
    node_names: list[str]
    config: TestbedConfig

    @property
    def prometheus(self) -> str:
        """The testbed's Prometheus, for fleet.deploy's wait until the pool's fleet serves."""
        return f"http://127.0.0.1:{self.config.ports.prometheus}"

    def fleet(self, *models: str, replicas: dict[str, int] | None = None) -> list[dict[str, Any]]:
        """Fleet manifests for `models`, in this pool's namespace, confined to its nodes."""
        objects = fleet.only(fleet.load("default", self.config.card_resource, namespace=self.namespace), *models)
        return fleet.pinned(fleet.scaled(objects, replicas or {}), self.name)


class Pools:
    """Makes pools of fresh 8-card nodes, each with a namespace; `remove` deletes what it made."""

    def __init__(self, testbed: Testbed, kube: Kube) -> None:
        self.testbed, self.kube, self.made = testbed, kube, []

    def __call__(self, size: int) -> Pool:
        name = f"p{os.getpid() % 1000}x{next(_pool_ids)}"
        manifests = []
        for i in range(size):
            m = nodes.node_manifest(i, self.testbed.config, prefix=name, extra_labels={fleet.POOL_LABEL: name})
            m["spec"]["taints"] = [{"key": fleet.POOL_LABEL, "value": name, "effect": "NoSchedule"}]
            manifests.append(m)
        nodes.create_nodes(self.kube, manifests)
        # Ready, and rid of the not-ready taint a new node starts with (the controller manager
        # lifts it a moment after Ready; until then nothing without a toleration lands there).
        self.kube.wait_until("nodes", lambda items: sum(node_ready(n) and not any(
            t.key == "node.kubernetes.io/not-ready" for t in (n.spec.taints or [])) for n in items) == size,
            timeout=30, label_selector=f"{fleet.POOL_LABEL}={name}")
        p = Pool(name, name, [m["metadata"]["name"] for m in manifests], self.testbed.config)
        self.made.append(p)
        return p

    def remove(self) -> None:
        for p in self.made:
            try:
                self.kube.delete_namespace(p.namespace)
            except Exception:  # noqa: BLE001 - a test may not have made it
                pass
            nodes.delete_nodes(self.kube, p.node_names)


@pytest.fixture
def pool(testbed: Testbed, kube: Kube) -> Iterator[Callable[[int], Pool]]:
    """Factory: pool(n) makes n fresh 8-card nodes and a namespace; both are removed afterwards."""
    pools = Pools(testbed, kube)
    yield pools
    pools.remove()


@pytest.fixture(scope="module")
def module_pool(testbed: Testbed, kube: Kube) -> Iterator[Callable[[int], Pool]]:
    """As `pool`, for what a whole module shares (a replica many tests fault in turn)."""
    pools = Pools(testbed, kube)
    yield pools
    pools.remove()


@pytest.fixture(scope="session")
def prom(testbed: Testbed) -> Any:
    from prometheus_api_client import PrometheusConnect

    return PrometheusConnect(testbed.prometheus_url)


@pytest.fixture
def two_tp8(kube: Kube, pool: Callable[[int], Pool]) -> Pool:
    """Two llama-3-70b replicas on a three-node pool (one node spare), serving at their steady state."""
    from tests.testbed.helpers import deploy

    p = pool(3)
    deploy(kube, p, {"llama-3-70b": 2})
    return p
