"""KServe's real controller manager on the testbed (testbed.controllers), in RawDeployment mode: the
release's CRDs, its `inferenceservice-config` ConfigMap as released, its webhook configurations
(the InferenceService defaulter and validator, the pod mutator, the runtime validators) and the
Hugging Face serving runtime, whose image the release's kustomization names. It makes the
predictor's Deployment, Service and Ingress from an InferenceService, and through its pod
webhook the pods' labels.

Its webhook server reads its certificate from the default folder of controller-runtime, under the
temporary directory: the manager runs with TMPDIR in the testbed's state, so testbeds side by side
never share one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from testbed import build
from testbed.controllers import Controller as _Manager
from testbed.controllers import as_the_fleet, at_loopback, release_manifests

NAMESPACE = "kserve"  # the controller's (POD_NAMESPACE): its ConfigMap lives here
RUNTIME_IMAGE = "kserve/huggingfaceserver:v0.15.2"  # config/overlays' image for huggingfaceserver:replace
DOCS = "kserve.github.io/archive/0.15/modelserving/v1beta1/llm/huggingface/text_generation"


def inference_service(namespace: str, pool: str, model: str, weights: str, cards: int, replicas: int,
                      card_resource: str) -> dict[str, Any]:
    """An InferenceService of `replicas` single-pod replicas holding `cards` cards each, as KServe's
    Hugging Face LLM page writes one (DOCS: the huggingface model format, `--model_name` and
    `--model_id`; the runtime's vLLM backend, its default), TP over the pod's cards, in
    RawDeployment mode with a fixed replica count (no autoscaler: the testbed serves no metrics
    API to one). On the pool's nodes, started on the testbed's clock."""
    annotations, placed = as_the_fleet(model, namespace, pool, card_resource)
    cards_given = {card_resource: str(cards)}
    return {
        "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": model, "namespace": namespace,
                     "annotations": {"serving.kserve.io/deploymentMode": "RawDeployment",
                                     "serving.kserve.io/autoscalerClass": "none"}},
        "spec": {"predictor": {
            "minReplicas": replicas, "maxReplicas": replicas, "annotations": annotations, **placed,
            "model": {"modelFormat": {"name": "huggingface"},
                      "args": [f"--model_name={model}", f"--model_id={weights}", f"--tensor-parallel-size={cards}"],
                      "resources": {"limits": cards_given, "requests": cards_given}}}}}


class Controller(_Manager):
    """KServe's controller manager: flags for its ports, its namespace from POD_NAMESPACE."""

    component = build.KSERVE
    binary_name = "kserve-controller"

    def crds(self) -> list[dict[str, Any]]:
        folder = self.config_file(build.KSERVE_CONFIG[0])
        return [yaml.safe_load(f.read_text()) for f in sorted(folder.glob("serving.kserve.io_*.yaml"))]

    def install(self) -> None:
        self.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for o in release_manifests(self.config_file(build.KSERVE_CONFIG[1])):
            self.kube.apply({**o, "metadata": {**o["metadata"], "namespace": NAMESPACE}})
        (runtime,) = release_manifests(self.config_file(build.KSERVE_CONFIG[3]))
        (container,) = runtime["spec"]["containers"]
        container["image"] = RUNTIME_IMAGE
        self.kube.apply(runtime)

    def command(self, webhook_port: int, health_port: int) -> tuple[list[str], dict[str, str], Path]:
        temporary = self.dir / "tmp"
        return [f"--webhook-port={webhook_port}", "--metrics-addr=0", f"--health-probe-addr=127.0.0.1:{health_port}",
                "--leader-elect=false"], {"TMPDIR": str(temporary), "POD_NAMESPACE": NAMESPACE}, \
            temporary / "k8s-webhook-server" / "serving-certs"

    def webhooks(self, ca: bytes, port: int) -> list[dict[str, Any]]:
        return [at_loopback(o, f"kilocard-testbed-{o['metadata']['name']}", ca, port)
                for o in release_manifests(self.config_file(build.KSERVE_CONFIG[2]))]
