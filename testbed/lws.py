"""LeaderWorkerSet's real controller manager on the testbed (testbed.controllers): its CRD and
webhook configurations of the same release. It creates the leader StatefulSet, each group's worker
StatefulSet and, through its pod webhook, the labels every LWS pod carries (group index, worker
index, group key).

One change to the release's manifests, a deployment choice a cluster can make: the pod webhooks
see only pods of a LeaderWorkerSet (objectSelector on its name label; the webhook returns the rest
unchanged anyway), so the testbed's other pods never wait on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from chaos import serving
from testbed import build
from testbed.controllers import Controller as _Manager
from testbed.controllers import as_the_fleet, at_loopback, release_manifests

NAME_LABEL = serving.LWS_NAME
WEBHOOK_NAMES = {"MutatingWebhookConfiguration": "kilocard-testbed-lws-mutating",
                 "ValidatingWebhookConfiguration": "kilocard-testbed-lws-validating"}


def webhooks(configurations: list[dict[str, Any]], ca: bytes, port: int) -> list[dict[str, Any]]:
    """The release's webhook configurations at the loopback URL, the pod webhooks for
    LeaderWorkerSet pods only."""
    found = []
    for o in configurations:
        o = at_loopback(o, WEBHOOK_NAMES[o["kind"]], ca, port)
        for hook in o["webhooks"]:
            if any("pods" in rule["resources"] for rule in hook["rules"]):
                hook["objectSelector"] = {"matchExpressions": [{"key": NAME_LABEL, "operator": "Exists"}]}
        found.append(o)
    return found


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
    annotations, placed = as_the_fleet(model, namespace, pool, card_resource)
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


class Controller(_Manager):
    """LWS's controller manager: its Configuration file names the webhook port and certificates."""

    component = build.LWS
    binary_name = "lws-controller"

    def crds(self) -> list[dict[str, Any]]:
        return [yaml.safe_load(self.config_file(build.LWS_CONFIG[0]).read_text())]

    def command(self, webhook_port: int, health_port: int) -> tuple[list[str], dict[str, str], Path]:
        certs = self.dir / "certs"
        (self.dir / "config.yaml").write_text(yaml.safe_dump({
            "apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
            "internalCertManagement": {"enable": False},
            "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(certs)}}))
        return [f"--config={self.dir / 'config.yaml'}", "--leader-elect=false", "--metrics-bind-address=0",
                f"--health-probe-bind-address=127.0.0.1:{health_port}", "--zap-log-level=info"], {}, certs

    def webhooks(self, ca: bytes, port: int) -> list[dict[str, Any]]:
        return webhooks(release_manifests(self.config_file(build.LWS_CONFIG[1])), ca, port)
