"""LeaderWorkerSet's real controller manager on the testbed: its CRD and its webhook configurations
(config/ of the same release, beside the binary testbed.build makes), the webhooks called at a
loopback URL with a CA of the testbed's own, instead of a Service in the cluster (no pod network
here). It creates the leader StatefulSet, each group's worker StatefulSet and, through its pod
webhook, the labels every LWS pod carries (group index, worker index, group key); kwok runs the
pods and the fleet simulator serves them, as for any workload.

Two changes to the release's manifests, both deployment choices a cluster can make: the pod
webhooks see only pods of a LeaderWorkerSet (objectSelector on its name label; the webhook returns
the rest unchanged anyway), so the testbed's other pods never wait on it; and leader election is
off (one manager)."""

from __future__ import annotations

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

NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
CRD_NAME = "leaderworkersets.leaderworkerset.x-k8s.io"
WEBHOOK_NAMES = {"MutatingWebhookConfiguration": "kilocard-testbed-lws-mutating",
                 "ValidatingWebhookConfiguration": "kilocard-testbed-lws-validating"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config_file(name: str) -> Path:
    """A file of the release's config/ (the CRD, the webhook configurations)."""
    return build.bin_dir(build.LWS) / name


def webhooks(ca: bytes, port: int) -> list[dict[str, Any]]:
    """The release's webhook configurations, each webhook called at https://localhost:<port><path>,
    the pod webhooks for LeaderWorkerSet pods only."""
    import base64

    found = []
    for o in yaml.safe_load_all(config_file(build.LWS_CONFIG[1]).read_text()):
        if not o:
            continue
        o = copy.deepcopy(o)
        o["metadata"] = {"name": WEBHOOK_NAMES[o["kind"]]}
        for hook in o["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://localhost:{port}{path}", "caBundle": base64.b64encode(ca).decode()}
            if any("pods" in rule["resources"] for rule in hook["rules"]):
                hook["objectSelector"] = {"matchExpressions": [{"key": NAME_LABEL, "operator": "Exists"}]}
        found.append(o)
    return found


def _as_the_fleet(model: str, namespace: str, pool: str, card_resource: str) -> tuple[dict[str, str], dict[str, Any]]:
    """(annotations, pod spec fields) by which the model's pods run as the testbed's fleet runs
    them: kwok's start and stop on the testbed's clock (testbed.timing, default: image pull,
    weights, warm-up, ten times faster than production; annotations only, no label of
    kilocard's), its grace period, and the pool's nodes (fleet.pinned's selector and toleration)."""
    objects = timing.stamp(fleet.pinned(fleet.only(fleet.load("default", card_resource, namespace=namespace), model),
                                        pool), "default")
    (workload, *_) = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet")]
    template = workload["spec"]["template"]
    return template["metadata"]["annotations"], {
        k: template["spec"][k] for k in ("nodeSelector", "terminationGracePeriodSeconds", "tolerations")}


def example(engine: str, namespace: str, pool: str, model: str, weights: str, cards: int, pods: int, replicas: int,
            card_resource: str) -> dict[str, Any]:
    """A LeaderWorkerSet of `replicas` groups of `pods` pods, each pod holding `cards` cards, as
    LWS's own example for the engine writes it:
    - vllm (docs/examples/vllm/GPU/lws.yaml of the release): the leader starts Ray and the
      OpenAI server, TP per pod and PP across pods; a worker joins the leader's Ray. One pod per
      group runs the server alone.
    - sglang (docs/examples/sglang/lws.yaml): every pod runs the launcher with the group's total
      TP, its node rank the LWS worker index.
    On the pool's nodes (its selector and toleration), the cards alone as resources (the testbed's
    nodes are 8-card machines of no particular size), served under `model`, started on the
    testbed's clock."""
    annotations, placed = _as_the_fleet(model, namespace, pool, card_resource)
    if engine == "vllm":
        server = (f"python3 -m vllm.entrypoints.openai.api_server --port 8080 --model {weights} "
                  f"--served-model-name {model} --tensor-parallel-size {cards}")
        leader = server if pods == 1 else (
            "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader "
            f"--ray_cluster_size=$(LWS_GROUP_SIZE); {server} --pipeline_parallel_size {pods}")
        worker = ("bash /vllm-workspace/examples/online_serving/multi-node-serving.sh worker "
                  "--ray_address=$(LWS_LEADER_ADDRESS)")
        image, commands, port = "vllm/vllm-openai:latest", (["sh", "-c", leader], ["sh", "-c", worker]), 8080
    elif engine == "sglang":
        launch = ["python3", "-m", "sglang.launch_server", "--model-path", weights, "--served-model-name", model,
                  "--tp", str(cards * pods), "--dist-init-addr", "$(LWS_LEADER_ADDRESS):20000", "--nnodes",
                  "$(LWS_GROUP_SIZE)", "--node-rank", "$(LWS_WORKER_INDEX)", "--trust-remote-code"]
        image, commands, port = "lmsysorg/sglang:latest", ([*launch, "--host", "0.0.0.0", "--port", "40000"],
                                                           launch), 40000
    else:
        raise ValueError(f"engine: expected vllm or sglang, got {engine!r}")
    resources = {"limits": {card_resource: str(cards)}}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": engine, "namespace": namespace},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {
            "size": pods, "restartPolicy": "RecreateGroupOnPodRestart",
            "leaderTemplate": {"metadata": {"labels": {"role": "leader"}, "annotations": annotations},
                               "spec": {**placed, "containers": [
                {"name": f"{engine}-leader", "image": image, "command": commands[0], "resources": resources,
                 "ports": [{"containerPort": port}]}]}},
            "workerTemplate": {"metadata": {"annotations": annotations}, "spec": {**placed, "containers": [
                {"name": f"{engine}-worker", "image": image, "command": commands[1], "resources": resources}]}}}}}


class Controller:
    """The controller manager of one testbed, started by `start` and ended by `stop` (its webhook
    configurations deleted first, so nothing calls a webhook that is gone)."""

    def __init__(self, testbed: Testbed, kube: Kube) -> None:
        self.testbed, self.kube = testbed, kube
        self.dir = testbed.paths.root / "lws"
        self.proc: processes.Proc | None = None

    def start(self, timeout: float = 90.0) -> Controller:
        binary = build.binary("lws-controller")
        if not binary.is_file():
            raise TestbedError(f"{binary} is not built: kilocard testbed build")
        self.dir.mkdir(parents=True, exist_ok=True)
        ca, _cert, _key = pki.serving(self.dir / "certs", "localhost")
        port, health = _free_port(), _free_port()
        (self.dir / "config.yaml").write_text(yaml.safe_dump({
            "apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
            "internalCertManagement": {"enable": False},
            "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(self.dir / "certs")}}))
        self.kube.apply(yaml.safe_load(config_file(build.LWS_CONFIG[0]).read_text()))
        self._wait_established(timeout)
        self.proc = processes.start("lws-controller", [
            str(binary), f"--config={self.dir / 'config.yaml'}", "--leader-elect=false", "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{health}", "--zap-log-level=info"],
            self.dir / "lws-controller.log", env={"KUBECONFIG": str(self.testbed.paths.kubeconfig)})
        try:
            self._wait_serving(port, timeout)
            for o in webhooks(ca.read_bytes(), port):
                self.kube.apply(o)
        except BaseException:
            self.stop()  # a manager left running would reconcile the testbed's pods until it ends
            raise
        return self

    def _wait_established(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            crd = self.kube.get_object("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME).to_dict()
            if any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or []):
                return
            time.sleep(0.3)
        raise TestbedError(f"the CRD {CRD_NAME} is not Established after {timeout:.0f} s")

    def _wait_serving(self, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if not self.proc.alive():
                raise TestbedError(f"lws-controller exited: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                time.sleep(0.3)
        raise TestbedError(f"lws-controller's webhook server is not up after {timeout:.0f} s: {self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        log = self.dir / "lws-controller.log"
        return "\n".join(log.read_text().splitlines()[-lines:]) if log.exists() else "(no log)"

    def stop(self) -> None:
        for kind, name in WEBHOOK_NAMES.items():
            with contextlib.suppress(NotFound):  # a start that failed before making them
                self.kube.delete_object("admissionregistration.k8s.io/v1", kind, name)
        if self.proc is not None:
            processes.stop([self.proc])
