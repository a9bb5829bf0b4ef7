"""The testbed's fleet as the serving stacks teams run would deploy it: kilocard's own manifests
(testbed/manifests/fleet/) reshaped with each stack's workload names, labels and engine command
line, and none of kilocard's labels left on the pods, so the toolkit must find the models as it
would on a production cluster (chaos.serving). Each shape is its stack's (its chart, controller or
documentation: docs/stacks.md, and the pods in tests/unit/stacks/). Every stack here makes a
Deployment, so the real Deployment controller replaces what a fault kills. Shapes are for the stacks
with no controller the testbed runs (plain and llm-d have none of their own; docs/stacks.md says
why production-stack's and AIBrix's are not built); KServe's and LeaderWorkerSet's real
controllers make their pods instead (testbed.kserve, testbed.lws).

Only the engine's served name is kept as the fleet's (`--served-model-name`): every stack lets its
users set it, and it is the name the metrics carry.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from chaos.errors import SpecError

Manifest = dict[str, Any]
KILOCARD = "kilocard.io/"
# The arguments the fleet's vLLM takes besides its model (kept as they are, in every stack).
_KEPT = ("--tensor-parallel-size", "--max-model-len", "--gpu-memory-utilization")


def _args(container: dict[str, Any]) -> tuple[str, str, list[str]]:
    """(the weights' name, the served name, the other engine arguments) of a fleet container."""
    args = [str(a) for a in container.get("args") or []]
    value = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--")}
    kept = [w for flag in _KEPT if flag in value for w in (flag, value[flag])]
    return value["--model"], value["--served-model-name"], kept


def _plain(name: str, weights: str, served: str, kept: list[str]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """vLLM's own Kubernetes page (docs/deployment/k8s.md): `vllm serve` in a shell, `app` label."""
    line = " ".join(["vllm serve", weights, "--served-model-name", served, *kept])
    return name, {"app": name}, {"name": "vllm", "command": ["/bin/sh", "-c"], "args": [line]}


def _production_stack(name: str, weights: str, served: str, kept: list[str]
                      ) -> tuple[str, dict[str, str], dict[str, Any]]:
    """vllm-project/production-stack helm/templates/deployment-vllm-multi.yaml: release `vllm`,
    modelSpec name `name`; extra arguments through vllmConfig.extraArgs."""
    labels = {"model": name, "helm-release-name": "vllm", "app.kubernetes.io/name": name,
              "app.kubernetes.io/instance": "vllm", "app.kubernetes.io/component": "serving-engine",
              "app.kubernetes.io/part-of": "vllm-stack", "environment": "test", "release": "test"}
    command = ["vllm", "serve", weights, "--host", "0.0.0.0", "--port", "8000", *kept, "--served-model-name", served]
    return f"vllm-{name}-deployment-vllm", labels, {"name": "vllm", "command": command}


def _llm_d(name: str, weights: str, served: str, kept: list[str]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """llm-d's ModelService decode Deployment (llm-d/llm-d-deployer charts/llm-d): the model's
    label sanitised, TP through TP_SIZE as the chart sets it."""
    pairs = list(zip(kept[::2], kept[1::2], strict=True))
    tp = dict(pairs).get("--tensor-parallel-size", "1")
    others = [w for flag, value in pairs if flag != "--tensor-parallel-size" for w in (flag, value)]
    labels = {"llm-d.ai/inferenceServing": "true", "llm-d.ai/model": re.sub(r"[^A-Za-z0-9.-]", "-", weights),
              "llm-d.ai/role": "decode"}
    return f"{name}-decode", labels, {
        "name": "vllm", "args": ["vllm", "serve", weights, "--port", "8200", "--served-model-name", served, *others],
        "env": [{"name": "TP_SIZE", "value": tp}, {"name": "DP_SIZE", "value": "1"}]}


def _aibrix(name: str, weights: str, served: str, kept: list[str]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """AIBrix's model deployment (vllm-project/aibrix docs, samples/): its model and port labels."""
    line = " ".join(["vllm serve", weights, "--served-model-name", served, "--port", "8000", *kept])
    return name, {"model.aibrix.ai/name": served, "model.aibrix.ai/port": "8000", "model.aibrix.ai/engine": "vllm"}, \
        {"name": "vllm-openai", "command": ["sh", "-c"], "args": [line]}


SHAPES: dict[str, Callable[[str, str, str, list[str]], tuple[str, dict[str, str], dict[str, Any]]]] = {
    "plain": _plain, "vLLM production-stack": _production_stack, "llm-d": _llm_d,
    "AIBrix": _aibrix,
}


def _unlabelled(labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if not k.startswith(KILOCARD)}


def shaped(objects: list[Manifest], stack: str) -> list[Manifest]:
    """The fleet's Deployments and their PodDisruptionBudgets as `stack` makes them (timing
    annotations and placement, which are the testbed's, kept); anything else as it is. A
    StatefulSet group (a cross-node model) has no shape here: refused."""
    if stack not in SHAPES:
        raise SpecError(f"stack: expected one of {', '.join(SHAPES)}, got {stack!r}")
    out = copy.deepcopy(objects)
    selectors: dict[str, dict[str, str]] = {}  # the fleet's model -> the stack's pod labels
    for o in out:
        if o["kind"] == "StatefulSet":
            raise SpecError(f"{o['metadata']['name']}: a cross-node group has no {stack} shape on the testbed")
        if o["kind"] != "Deployment":
            continue
        model = o["metadata"]["labels"][f"{KILOCARD}model"]
        template = o["spec"]["template"]
        (container,) = template["spec"]["containers"]
        name, labels, engine = SHAPES[stack](model, *_args(container))
        selectors[model] = labels
        o["metadata"].update(name=name, labels=dict(labels))
        o["spec"]["selector"] = {"matchLabels": dict(labels)}
        template["metadata"]["labels"] = {**_unlabelled(template["metadata"].get("labels") or {}), **labels}
        for term in ((template["spec"].get("affinity") or {}).get("podAntiAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution") or []:
            term["labelSelector"] = {"matchLabels": dict(labels)}
        for key in ("command", "args", "env"):
            container.pop(key, None)
        container.update(engine)
    for o in out:
        if o["kind"] == "PodDisruptionBudget":
            model = o["spec"]["selector"]["matchLabels"][f"{KILOCARD}model"]
            o["metadata"]["labels"] = _unlabelled(o["metadata"].get("labels") or {})
            o["spec"]["selector"] = {"matchLabels": dict(selectors[model])}
    return out
