"""Start, stop and inspect a testbed: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok as child processes, with a state folder holding the PKI, the kubeconfig,
the kwok stages, the logs and `state.json` (config and pids).

Why our own launcher and not `kwokctl --runtime binary`: we own the ports and flags (node monitor
timings, toleration seconds, audit log), can stop or restart one component mid-test, need no
kwokctl binary (nor its downloads when a binary is missing), and `down` finds every process it
started from one file.
"""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from chaos import mindx
from chaos.errors import KilocardError, SpecError
from chaos.kube import COMPONENT_ENV, Kube
from chaos.vocabulary import ready
from testbed import accelerators, build, nodes, pki, processes, prometheus, stages
from testbed.config import TestbedConfig, taken_ports

Say = Callable[[str], None]
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
FLEET_SERVICES = ("prometheus", "fleet-simulator", "remediator")
AGENT_NAMESPACE = "kilocard-system"
AGENT_SECRET = "kilocard-agent-token"
DRA_GATES = "DRADeviceTaintRules=true"
# Pod lifecycle writes only (create, delete, binding, status), at Metadata level, once complete:
# enough to time every recovery phase, small enough to leave on.
# Every write, with who made it (user agent), except the steady heartbeat: node leases and
# status, and events. Reads are not logged.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        {"level": "None", "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]},
                                        {"group": "", "resources": ["events", "nodes/status"]},
                                        {"group": "events.k8s.io"}]},
        {"level": "Metadata", "verbs": ["create", "delete", "deletecollection", "patch", "update"]},
        {"level": "None"},
    ],
}
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"


class TestbedError(KilocardError):
    __test__ = False


@dataclass(frozen=True)
class Paths:
    root: Path

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def kwok_config(self) -> Path:
        return self.root / "kwok-stages.yaml"

    @property
    def prometheus_config(self) -> Path:
        return self.root / "prometheus.yml"

    @property
    def prometheus_data(self) -> Path:
        return self.root / "prometheus"

    @property
    def agent_token(self) -> Path:
        return self.root / "agent-token"

    @property
    def audit_policy(self) -> Path:
        return self.root / "audit-policy.yaml"

    @property
    def audit_log(self) -> Path:
        return self.root / "logs" / "audit.log"


def https_context(cert: pki.Pki | None) -> ssl.SSLContext:
    if cert is None:  # the controllers' self-signed serving certs: only asking for /healthz
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    ctx = ssl.create_default_context(cafile=str(cert.ca_cert))
    ctx.load_cert_chain(str(cert.admin_cert), str(cert.admin_key))
    return ctx


def _healthy(url: str, ctx: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


class Testbed:
    __test__ = False

    def __init__(self, config: TestbedConfig) -> None:
        self.config = config
        self.paths = Paths(config.state_dir)
        self.pki = pki.Pki(self.paths.pki)

    # --- state ---------------------------------------------------------------------------------
    @classmethod
    def from_state(cls, state_dir: Path) -> Testbed | None:
        """The testbed recorded in `state_dir`, with the config it was started with, or None."""
        path = Paths(state_dir).state
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        return cls(TestbedConfig.from_json(data["config"]))

    def procs(self) -> list[processes.Proc]:
        if not self.paths.state.is_file():
            return []
        data = json.loads(self.paths.state.read_text())
        return [processes.Proc(p["name"], p["pid"], p["binary"], p.get("started", 0))
                for p in data.get("processes", [])]

    def _save(self, procs: list[processes.Proc], **extra: Any) -> None:
        data = {"config": self.config.to_json(), "processes": [p.__dict__ for p in procs], **extra}
        tmp = self.paths.state.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.paths.state)

    def running(self) -> bool:
        procs = self.procs()
        return bool(procs) and all(p.alive() for p in procs)

    def kube(self) -> Kube:
        return Kube.from_kubeconfig(self.paths.kubeconfig)

    # --- up ------------------------------------------------------------------------------------
    def up(self, say: Say = print, timeout: float = 300.0, node_manifests: list[dict[str, Any]] | None = None,
           before_nodes: Callable[[Kube], None] | None = None) -> bool:
        """Start the control plane and the nodes (the config's, or `node_manifests`: a twin's
        copies, each labelled kilocard.io/testbed=true); False when it was already running.
        `before_nodes` runs once the API serves, before the nodes register (a large testbed's
        fleet is applied then, so its first replicas start on the first Ready nodes)."""
        if self.running():
            say(f"testbed already running (kubeconfig {self.paths.kubeconfig}); nothing to do")
            return False
        if self.procs():  # some died: clear the rest before starting anew
            say("testbed partly running; stopping what is left first")
            self.down(say=lambda _m: None)
        self.check_ports()
        missing = build.missing_binaries()
        if missing:
            raise TestbedError(f"testbed binaries not built ({', '.join(missing)}): run 'kilocard testbed build'")
        started = time.monotonic()
        self.paths.root.mkdir(parents=True, exist_ok=True)
        for stale in (self.paths.etcd_data, self.paths.prometheus_data):  # every `up` is a fresh cluster
            shutil.rmtree(stale, ignore_errors=True)
        self.pki = pki.ensure(self.paths.pki, self.config.advertise_address)
        self._write_kubeconfig()
        stages.write_config(build.kwok_stage_dir(), self.paths.kwok_config)
        self.paths.audit_policy.write_text(yaml.safe_dump(AUDIT_POLICY, sort_keys=False))
        prometheus.write_config(self.paths.prometheus_config, self.config.ports.simulator, self.config.ports.apiserver,
                                self.config.tuning, self.pki.ca_cert, self.pki.admin_cert, self.pki.admin_key,
                                accelerators.named(self.config.accelerator).exporter)
        if not self.paths.agent_token.is_file():
            self.paths.agent_token.write_text(secrets.token_urlsafe(32) + "\n")
            self.paths.agent_token.chmod(0o600)
        procs: list[processes.Proc] = []
        deadline = started + timeout
        try:
            for name in self.services():
                procs.append(processes.start(name, self._argv(name), self.paths.logs / f"{name}.log",
                                             env={COMPONENT_ENV: name}))  # its user agent, in the audit log
                self._save(procs)
                if name in ("etcd", "kube-apiserver"):  # the rest only need the apiserver
                    self._wait_healthy(name, procs, deadline)
            for name in self.services()[2:]:
                self._wait_healthy(name, procs, deadline)
            say(f"control plane up in {time.monotonic() - started:.1f} s (https://127.0.0.1:{self.config.ports.apiserver})")
            kube = self.kube()
            try:
                self._wait_default_service_account(kube, deadline)
                self._publish_agent_token(kube)
                if before_nodes is not None:
                    before_nodes(kube)
                self._create_nodes(kube, deadline, node_manifests)
                if self.config.accelerator == accelerators.ASCEND.name:
                    self._start_mindx(kube, deadline, len(node_manifests or []) or self.config.nodes)
            finally:
                kube.close()
        except BaseException:
            processes.stop(procs)
            self.paths.state.unlink(missing_ok=True)
            raise
        self._save(procs, up_seconds=round(time.monotonic() - started, 1))
        say(f"testbed up in {time.monotonic() - started:.1f} s: {self.config.nodes} nodes, "
            f"{self.config.cards} {self.config.card_resource}")
        return True

    def services(self) -> tuple[str, ...]:
        fleet = FLEET_SERVICES if self.config.remediation else FLEET_SERVICES[:2]
        return CONTROL_PLANE + fleet

    def check_ports(self) -> None:
        taken = taken_ports(self.config.ports)
        if taken:
            raise SpecError(f"{', '.join(taken)} already in use: stop what listens there or pass --port-base")

    def _argv(self, name: str) -> list[str]:
        c, ports, p, kubeconfig = self.config, self.config.ports, self.pki, str(self.paths.kubeconfig)
        binary = str(build.binary(name)) if name in CONTROL_PLANE else ""
        controller_common = [
            f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}", "--bind-address=127.0.0.1", "--leader-elect=false",
            "--kube-api-qps=500", "--kube-api-burst=1000", "--v=1", f"--feature-gates={DRA_GATES}",
        ]
        if name == "etcd":
            return [
                binary, "--name=testbed", f"--data-dir={self.paths.etcd_data}",
                f"--listen-client-urls=http://127.0.0.1:{ports.etcd_client}",
                f"--advertise-client-urls=http://127.0.0.1:{ports.etcd_client}",
                f"--listen-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
                f"--initial-cluster=testbed=http://127.0.0.1:{ports.etcd_peer}",
                "--listen-metrics-urls=", "--unsafe-no-fsync=true", "--quota-backend-bytes=4294967296",
                "--auto-compaction-mode=periodic", "--auto-compaction-retention=5m", "--log-level=warn",
            ]
        if name == "kube-apiserver":
            return [
                binary, f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
                "--bind-address=127.0.0.1", f"--secure-port={ports.apiserver}",
                f"--advertise-address={c.advertise_address}",
                f"--tls-cert-file={p.apiserver_cert}", f"--tls-private-key-file={p.apiserver_key}",
                f"--client-ca-file={p.ca_cert}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={p.sa_pub}", f"--service-account-signing-key-file={p.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}", "--authorization-mode=Node,RBAC",
                "--allow-privileged=true", "--profiling=false", "--v=1",
                f"--default-not-ready-toleration-seconds={c.not_ready_toleration_seconds}",
                f"--default-unreachable-toleration-seconds={c.unreachable_toleration_seconds}",
                # Fault injection issues bursts of calls; the testbed has one client that matters.
                "--max-requests-inflight=800", "--max-mutating-requests-inflight=400",
                # Ground truth for recovery timelines: pod writes with microsecond stage timestamps.
                f"--audit-policy-file={self.paths.audit_policy}", f"--audit-log-path={self.paths.audit_log}",
                "--audit-log-format=json", "--audit-log-maxsize=200", "--audit-log-maxbackup=1",
                # DeviceTaintRule (isolating one DRA-managed card) is beta and off by default in 1.36.
                f"--feature-gates={DRA_GATES}", "--runtime-config=resource.k8s.io/v1beta2=true",
            ]
        if name == "kube-controller-manager":
            return [
                binary, *controller_common, f"--secure-port={ports.controller_manager}",
                f"--service-account-private-key-file={p.sa_key}", f"--root-ca-file={p.ca_cert}",
                f"--service-cluster-ip-range={SERVICE_CIDR}", "--use-service-account-credentials=false",
                "--node-monitor-period=1s", f"--node-monitor-grace-period={c.tuning.node_monitor_grace_seconds}s",
                # Upstream evicts at most one node per 10 s per zone, and none once over 55 % of a zone
                # is down; experiments that take several nodes away need eviction to keep up.
                "--node-eviction-rate=100", "--secondary-node-eviction-rate=100",
                "--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
                "--concurrent-statefulset-syncs=10",
            ]
        if name == "kube-scheduler":
            return [binary, *controller_common, f"--secure-port={ports.scheduler}"]
        if name == "prometheus":
            return [
                prometheus.binary(), f"--config.file={self.paths.prometheus_config}",
                f"--storage.tsdb.path={self.paths.prometheus_data}", "--storage.tsdb.retention.time=6h",
                f"--web.listen-address=127.0.0.1:{ports.prometheus}", "--log.level=warn",
            ]
        if name == "fleet-simulator":
            return [
                sys.executable, "-m", "testbed.simulator", f"--kubeconfig={kubeconfig}", f"--port={ports.simulator}",
                f"--token-file={self.paths.agent_token}", f"--card-resource={c.card_resource}",
                f"--card-product={c.card_product}", f"--accelerator={c.accelerator}", f"--utilisation={c.utilisation}",
                f"--spike-factor={c.spike_factor}", f"--dcgm-fields={c.tuning.dcgm_fields}",
                f"--dra-health={'on' if c.dra_health else 'off'}",
                *(["--negotiate"] if c.openmetrics else []),
            ]
        if name == "remediator":
            return [
                sys.executable, "-m", "testbed.remediator", f"--kubeconfig={kubeconfig}",
                f"--prometheus-url={self.prometheus_url}", f"--interval={c.tuning.remediation_seconds}",
                f"--accelerator={c.accelerator}",
            ]
        if name == "kwok":
            return [
                binary, f"--kubeconfig={kubeconfig}", f"--config={self.paths.kwok_config}",
                # A lost node (label kilocard.io/node-lost=true) stops matching: kwok lets go of it
                # as a dead kubelet would. Its Lease is no longer renewed (the controller manager
                # then calls it lost), and its pods get no more updates: evicted ones stay
                # Terminating until PodGC (out-of-service taint, node deleted) removes them.
                "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={nodes.KWOK_ANNOTATION}=fake",
                f"--manage-nodes-with-label-selector={stages.LOST_LABEL}!=true",
                f"--node-lease-duration-seconds={c.tuning.node_lease_seconds}", f"--cidr={POD_CIDR}",
                "--node-ip=10.255.0.1", f"--server-address=127.0.0.1:{ports.kwok}",
                # Its info lines are one per lease renewal: a core's tenth at 1,250 nodes.
                "--v=WARN",
            ]
        raise KeyError(name)

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.config.ports.prometheus}"

    @property
    def simulator_url(self) -> str:
        return f"http://127.0.0.1:{self.config.ports.simulator}"

    def _health_url(self, name: str) -> tuple[str, ssl.SSLContext | None] | None:
        ports = self.config.ports
        return {
            "etcd": (f"http://127.0.0.1:{ports.etcd_client}/health", None),
            "kube-apiserver": (f"https://127.0.0.1:{ports.apiserver}/readyz", https_context(self.pki)),
            "kube-controller-manager": (f"https://127.0.0.1:{ports.controller_manager}/healthz", https_context(None)),
            "kube-scheduler": (f"https://127.0.0.1:{ports.scheduler}/healthz", https_context(None)),
            "kwok": (f"http://127.0.0.1:{ports.kwok}/healthz", None),
            "prometheus": (f"{self.prometheus_url}/-/ready", None),
            "fleet-simulator": (f"{self.simulator_url}/healthz", None),
        }.get(name)  # the remediator serves nothing: alive is healthy

    def healthy(self, name: str) -> bool:
        check = self._health_url(name)
        if check is None:
            return any(p.name == name and p.alive() for p in self.procs())
        return _healthy(*check)

    def _wait_healthy(self, name: str, procs: list[processes.Proc], deadline: float) -> None:
        proc = next(p for p in procs if p.name == name)
        while not self.healthy(name):
            if not proc.alive():
                raise TestbedError(f"{name} exited during start-up: {self._log_tail(name)}")
            if time.monotonic() > deadline:
                raise TestbedError(f"{name} not healthy in time: {self._log_tail(name)}")
            time.sleep(0.2)

    def apiserver_requests(self, resources: tuple[str, ...], verbs: tuple[str, ...], scope: str | None = None,
                           subresource: str = "") -> float:
        """Sum of the apiserver's own apiserver_request_total over the given labels (its /metrics)."""
        url = f"https://127.0.0.1:{self.config.ports.apiserver}/metrics"
        with urllib.request.urlopen(url, context=https_context(self.pki), timeout=10) as resp:
            text = resp.read().decode()
        total = 0.0
        for line in text.splitlines():
            if not line.startswith("apiserver_request_total{"):
                continue
            labels = dict(part.split("=", 1) for part in line[line.index("{") + 1:line.rindex("}")].split(","))
            values = {k: v.strip('"') for k, v in labels.items()}
            if (values.get("resource") in resources and values.get("verb") in verbs
                    and values.get("subresource", "") == subresource and scope in (None, values.get("scope"))):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def _log_tail(self, name: str, lines: int = 5) -> str:
        path = self.paths.logs / f"{name}.log"
        tail = path.read_text(errors="replace").splitlines()[-lines:] if path.is_file() else []
        return f"see {path}" + ("\n  " + "\n  ".join(tail) if tail else "")

    def _write_kubeconfig(self) -> None:
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kilocard-testbed", "cluster": {
                "server": f"https://127.0.0.1:{self.config.ports.apiserver}",
                "certificate-authority": str(self.pki.ca_cert)}}],
            "users": [{"name": "testbed-admin", "user": {
                "client-certificate": str(self.pki.admin_cert), "client-key": str(self.pki.admin_key)}}],
            "contexts": [{"name": "kilocard-testbed",
                          "context": {"cluster": "kilocard-testbed", "user": "testbed-admin"}}],
            "current-context": "kilocard-testbed",
        }
        self.paths.kubeconfig.write_text(yaml.safe_dump(kubeconfig, sort_keys=False))
        self.paths.kubeconfig.chmod(0o600)

    def _wait_default_service_account(self, kube: Kube, deadline: float) -> None:
        """Pods need their namespace's `default` ServiceAccount, which the controller manager makes."""
        while True:
            try:
                kube.read_service_account("default", "default")
                return
            except Exception:  # noqa: BLE001 - not there yet
                if time.monotonic() > deadline:
                    raise TestbedError("the controller manager made no default ServiceAccount in time") from None
                time.sleep(0.2)

    def _publish_agent_token(self, kube: Kube) -> None:
        """The agents' bearer token as a Secret, where the toolkit finds it on a real cluster too."""
        token = self.paths.agent_token.read_text().strip()
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": AGENT_NAMESPACE}})
        kube.apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": AGENT_SECRET, "namespace": AGENT_NAMESPACE},
                    "data": {"token": base64.b64encode(token.encode()).decode()}})

    def _create_nodes(self, kube: Kube, deadline: float, manifests: list[dict[str, Any]] | None) -> None:
        if manifests is None:
            manifests = [nodes.node_manifest(i, self.config) for i in range(self.config.nodes)]
        nodes.create_nodes(kube, manifests)
        want = len(manifests)
        try:
            kube.wait_ready("nodes", want, timeout=max(1.0, deadline - time.monotonic()),
                            label_selector=f"{nodes.TESTBED_LABEL}=true")
        except TimeoutError:
            raise TestbedError(f"{want} nodes not Ready in time: {self._log_tail('kwok')}") from None

    def _start_mindx(self, kube: Kube, deadline: float, want: int) -> None:
        """ClusterD's Service, so a fault finds ClusterD there (the simulator plays its intake), and
        the device plugin's first ConfigMap on every node, which faults on chips need."""
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": mindx.CLUSTERD_NAMESPACE}})
        kube.apply({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": mindx.CLUSTERD_SERVICE, "namespace": mindx.CLUSTERD_NAMESPACE},
                    "spec": {"ports": [{"name": "grpc", "port": 8899, "protocol": "TCP"}]}})
        try:
            kube.wait_until("configmaps", lambda items: len(items) >= want, max(1.0, deadline - time.monotonic()),
                            mindx.DEVICE_INFO_NAMESPACE, f"{mindx.DEVICE_INFO_LABEL}=true", raw=True)
        except TimeoutError:
            raise TestbedError(f"the device plugin wrote no device-info ConfigMap for every node in time: "
                               f"{self._log_tail('fleet-simulator')}") from None

    # --- one component, for the reliability suite's control-plane faults -----------------------
    def stop_component(self, name: str, grace: float = 10.0) -> None:
        """Stop one running component (SIGTERM, then SIGKILL after `grace` s; 0: a crash): an
        apiserver or etcd restart, a Prometheus outage. The testbed is not `running()` until
        `start_component`."""
        (proc,) = [p for p in self.procs() if p.name == name]
        left = processes.stop([proc], timeout=grace)
        if left:
            raise TestbedError(f"could not stop {name}")

    def adopt(self, proc: processes.Proc) -> None:
        """A process started beside the testbed (a stack's controller) that `down` stops first."""
        kept = {k: v for k, v in json.loads(self.paths.state.read_text()).items() if k not in ("config", "processes")}
        self._save([*self.procs(), proc], **kept)

    def start_component(self, name: str, extra_args: tuple[str, ...] = (), timeout: float = 60.0) -> None:
        """Start a stopped component again with its own arguments (later flags win: `extra_args`
        can override one, e.g. a tiny --max-requests-inflight), and wait until it is healthy."""
        procs = self.procs()
        index = next(i for i, p in enumerate(procs) if p.name == name)
        if procs[index].alive():
            raise TestbedError(f"{name} is running: stop it first")
        procs[index] = processes.start(name, [*self._argv(name), *extra_args], self.paths.logs / f"{name}.log",
                                       env={COMPONENT_ENV: name})
        kept = {k: v for k, v in json.loads(self.paths.state.read_text()).items() if k not in ("config", "processes")}
        self._save(procs, **kept)
        self._wait_healthy(name, procs, time.monotonic() + timeout)

    # --- down ----------------------------------------------------------------------------------
    def down(self, say: Say = print) -> bool:
        """Stop every process; False when nothing was running."""
        procs = self.procs()
        live = [p for p in procs if p.alive()]
        if not live:
            self.paths.state.unlink(missing_ok=True)
            say(f"no testbed running (state folder {self.paths.root})")
            return False
        left = processes.stop(list(reversed(procs)))
        if left:
            raise TestbedError(f"could not stop {', '.join(left)}")
        self.paths.state.unlink(missing_ok=True)
        for data in (self.paths.etcd_data, self.paths.prometheus_data):
            shutil.rmtree(data, ignore_errors=True)
        say(f"testbed stopped ({len(live)} processes)")
        return True

    # --- status --------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        procs = self.procs()
        usage = processes.usage(procs)
        result: dict[str, Any] = {
            "running": self.running(),
            "state_dir": str(self.paths.root),
            "kubeconfig": str(self.paths.kubeconfig),
            "endpoints": {
                "kube-apiserver": f"https://127.0.0.1:{self.config.ports.apiserver}",
                "etcd": f"http://127.0.0.1:{self.config.ports.etcd_client}",
                "prometheus": self.prometheus_url,
                "fleet-simulator": self.simulator_url,
            },
            "processes": [
                {"name": p.name, "pid": p.pid, "alive": p.alive(), "healthy": p.alive() and self.healthy(p.name),
                 "cpu_seconds": round(usage.get(p.name, (0.0, 0))[0], 1),
                 "rss_mib": round(usage.get(p.name, (0.0, 0))[1] / 2**20, 1)}
                for p in procs
            ],
        }
        if result["running"]:
            kube = self.kube()
            try:
                all_nodes = kube.list_nodes_raw(f"{nodes.TESTBED_LABEL}=true")
                resource = self.config.card_resource
                result["nodes"] = {"total": len(all_nodes), "ready": sum(1 for n in all_nodes if ready(n))}
                result["cards"] = {
                    "resource": resource,
                    "capacity": sum(int(n["status"].get("capacity", {}).get(resource, 0)) for n in all_nodes),
                    "allocatable": sum(int(n["status"].get("allocatable", {}).get(resource, 0)) for n in all_nodes
                                       if ready(n) and not n["spec"].get("unschedulable")),
                }
            finally:
                kube.close()
        return result
