"""A serving stack's real controller manager beside the testbed's control plane: built from its Go
module by testbed.build with its release's CRDs and webhook configurations, its webhooks called at
a loopback URL under a CA of the testbed's own instead of at a Service in the cluster (no pod
network here), leader election off (one manager). testbed.lws and testbed.kserve say what each
stack needs besides; kwok runs the pods the controller makes and the fleet simulator serves them,
as for any workload."""

from __future__ import annotations

import base64
import contextlib
import copy
import socket
import time
from pathlib import Path
from typing import Any

import yaml

from chaos.errors import NotFound
from chaos.kube import Kube
from testbed import build, fleet, pki, processes, timing
from testbed.cluster import Testbed, TestbedError

CRD_API = "apiextensions.k8s.io/v1"
WEBHOOK_API = "admissionregistration.k8s.io/v1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def at_loopback(configuration: dict[str, Any], name: str, ca: bytes, port: int) -> dict[str, Any]:
    """A release's webhook configuration under `name`, each webhook called at
    https://localhost:<port><its service path> and trusting `ca`."""
    o = copy.deepcopy(configuration)
    o["metadata"] = {"name": name}
    for hook in o["webhooks"]:
        path = hook["clientConfig"]["service"]["path"]
        hook["clientConfig"] = {"url": f"https://localhost:{port}{path}", "caBundle": base64.b64encode(ca).decode()}
    return o


def as_the_fleet(model: str, namespace: str, pool: str, card_resource: str) -> tuple[dict[str, str], dict[str, Any]]:
    """(annotations, pod spec fields) by which a stack's pods of `model` run as the testbed's fleet
    runs them: kwok's start and stop on the testbed's clock (testbed.timing, default: image pull,
    weights, warm-up, ten times faster than production; annotations only, no label of
    kilocard's), its grace period, and the pool's nodes (fleet.pinned's selector and toleration)."""
    objects = timing.stamp(fleet.pinned(fleet.only(fleet.load("default", card_resource, namespace=namespace), model),
                                        pool), "default")
    (workload, *_) = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet")]
    template = workload["spec"]["template"]
    return template["metadata"]["annotations"], {
        k: template["spec"][k] for k in ("nodeSelector", "terminationGracePeriodSeconds", "tolerations")}


class Controller:
    """One stack's controller manager on one testbed, started by `start` and ended by `stop` (its
    webhook configurations deleted first, so nothing calls a webhook that is gone). A stack
    says which binary, CRDs and webhooks, what to install before the manager starts, and its
    command line."""

    component: build.Component
    binary_name: str

    def __init__(self, testbed: Testbed, kube: Kube) -> None:
        self.testbed, self.kube = testbed, kube
        self.dir = testbed.paths.root / self.component.name
        self.proc: processes.Proc | None = None
        self.webhook_names: list[tuple[str, str]] = []

    # --- what a stack says ---------------------------------------------------------------------
    def crds(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def install(self) -> None:
        """Objects the manager reads at start (its configuration), once the CRDs are established."""

    def command(self, webhook_port: int, health_port: int) -> tuple[list[str], dict[str, str], Path]:
        """(arguments after the binary, environment, the folder where its webhook server reads
        tls.crt and tls.key)."""
        raise NotImplementedError

    def webhooks(self, ca: bytes, port: int) -> list[dict[str, Any]]:
        raise NotImplementedError

    # --- running it ----------------------------------------------------------------------------
    def config_file(self, name: str) -> Path:
        """A file of the release's config/ that testbed.build put beside the binary."""
        return build.bin_dir(self.component) / name

    def start(self, timeout: float = 90.0) -> Controller:
        binary = build.ensure(self.component, say=lambda _m: None) / self.binary_name
        self.dir.mkdir(parents=True, exist_ok=True)
        crds = self.crds()
        for crd in crds:
            self.kube.apply(crd)
        for crd in crds:
            self._wait_established(crd["metadata"]["name"], timeout)
        self.install()
        port, health = free_port(), free_port()
        args, env, certs = self.command(port, health)
        ca, _cert, _key = pki.serving(certs, "localhost")
        self.proc = processes.start(self.binary_name, [str(binary), *args], self.dir / f"{self.binary_name}.log",
                                    env={"KUBECONFIG": str(self.testbed.paths.kubeconfig), **env})
        try:
            self._wait_serving(port, timeout)
            for o in self.webhooks(ca.read_bytes(), port):
                self.kube.apply(o)
                self.webhook_names.append((o["kind"], o["metadata"]["name"]))
        except BaseException:
            self.stop()  # a manager left running would reconcile the testbed's objects until it ends
            raise
        return self

    def _wait_established(self, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            crd = self.kube.get_object(CRD_API, "CustomResourceDefinition", name).to_dict()
            if any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or []):
                return
            time.sleep(0.3)
        raise TestbedError(f"the CRD {name} is not Established after {timeout:.0f} s")

    def _wait_serving(self, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if not self.proc.alive():
                raise TestbedError(f"{self.binary_name} exited: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                time.sleep(0.3)
        raise TestbedError(f"{self.binary_name}'s webhook server is not up after {timeout:.0f} s: {self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        log = self.dir / f"{self.binary_name}.log"
        return "\n".join(log.read_text().splitlines()[-lines:]) if log.exists() else "(no log)"

    def stop(self) -> None:
        for kind, name in self.webhook_names:
            with contextlib.suppress(NotFound):
                self.kube.delete_object(WEBHOOK_API, kind, name)
        self.webhook_names = []
        if self.proc is not None:
            processes.stop([self.proc])


def release_manifests(path: Path) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all(path.read_text()) if o]
