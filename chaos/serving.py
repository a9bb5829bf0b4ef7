"""Which model a pod serves, as the serving stacks people run create their pods: the model, its
replica (TP group) and rank, the TP and PP sizes and the engine, each read from the workload as
the platform made it, with where each came from (a label, an annotation, an engine argument, a
variable, the owner), so `kilocard discover` can show a user whether kilocard reads their cluster
right. Pure functions over the API's plain JSON; the keys are cited in docs/stacks.md.

Precedence, for each fact: kilocard's own labels (`kilocard.io/*`, an explicit override), then
the stack's labels and annotations, then the engine's arguments (vLLM, SGLang), then the owner.
A model's name is the one its engine serves it as (`--served-model-name`, else `--model`), since
that is the `model_name` its metrics carry; a stack's own name for the workload is the fallback.
Pods that carry no model themselves (the Ray workers of vLLM on LeaderWorkerSet, KServe's
multi-node workers) take it from the rest of their workload (`identify_all`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from chaos.vocabulary import (
    ENGINE_LABEL,
    GROUP_LABELS,
    GROUP_SIZE_LABEL,
    MODEL_LABEL,
    RANK_LABELS,
    TP_SIZE_LABEL,
    ready,
)

PP_SIZE_LABEL = "kilocard.io/pp-size"

# LeaderWorkerSet (kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go).
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"  # an annotation: pods per group
# KServe (kserve/kserve pkg/constants/constants.go).
KSERVE_ISVC = "serving.kserve.io/inferenceservice"

# AIBrix (vllm-project/aibrix pkg/utils, pkg/controller/podset), llm-d (llm-d/llm-d-deployer
# charts/llm-d; llm-d/llm-d guides), NVIDIA Dynamo (ai-dynamo/dynamo deploy/operator/internal/
# consts/consts.go), vLLM production-stack (vllm-project/production-stack helm/templates/
# deployment-vllm-multi.yaml), KubeRay (ray-project/kuberay ray-operator/controllers/ray/utils).
AIBRIX_MODEL, LLMD_MODEL = "model.aibrix.ai/name", "llm-d.ai/model"
AIBRIX_PODSET, AIBRIX_RANK = ("stormservice.orchestration.aibrix.ai/podset-name",
                              "stormservice.orchestration.aibrix.ai/pod-group-index")
DYNAMO_GRAPH = "nvidia.com/dynamo-graph-deployment-name"
RAY_CLUSTER, RAY_NODE_TYPE = "ray.io/cluster", "ray.io/node-type"
# A label that says which stack made the pod, the stack built on LWS before LWS itself.
STACK_LABELS = (
    (AIBRIX_MODEL, "AIBrix"), ("orchestration.aibrix.ai/raycluster-fleet-name", "AIBrix"), (AIBRIX_PODSET, "AIBrix"),
    (LLMD_MODEL, "llm-d"), ("llm-d.ai/inference-serving", "llm-d"), ("llm-d.ai/inferenceServing", "llm-d"),
    (DYNAMO_GRAPH, "NVIDIA Dynamo"),
    (KSERVE_ISVC, "KServe"),
    ("helm-release-name", "vLLM production-stack"),
    (LWS_NAME, "LeaderWorkerSet"),
)
# Labels that name the model, after the engine's own arguments: llm-d's is sanitised
# (facebook-opt-125m for facebook/opt-125m), so the served name the metrics carry wins.
MODEL_LABELS = (AIBRIX_MODEL, LLMD_MODEL)
ENGINE_LABELS = (ENGINE_LABEL, "model.aibrix.ai/engine", "llm-d.ai/engine-type")

_FLAG = re.compile(r"^--?[A-Za-z][\w-]*$")
# The engines' spellings of one setting (vLLM's argparse takes - and _ alike; SGLang's aliases).
SERVED = ("--served-model-name",)
KSERVE_NAME = ("--model-name",)  # KServe's huggingfaceserver: the name it serves under
MODEL_ARGS = ("--model", "--model-path", "--model-id")
TP_ARGS = ("--tensor-parallel-size", "--tp-size", "--tp", "-tp")
PP_ARGS = ("--pipeline-parallel-size", "--pp-size", "--pp", "-pp")
# KServe's multi-node (Ray) predictor: the controller injects these into the head and its workers.
TP_ENV, PP_ENV, NODES_ENV = "TENSOR_PARALLEL_SIZE", "PIPELINE_PARALLEL_SIZE", "RAY_NODE_COUNT"
TP_ENVS = (TP_ENV, "TP_SIZE")  # llm-d's chart always sets TP_SIZE
KSERVE_HEAD = "kserve-container"  # the head's container; a worker's is worker-container
# vLLM's KV cache set by hand instead of profiled (`--num-gpu-blocks-override`, which vLLM's own
# preemption tests use), in blocks of `--block-size` tokens (16 by default).
KV_BLOCKS_ARGS = ("--num-gpu-blocks-override",)
BLOCK_SIZE_ARGS = ("--block-size",)
DEFAULT_BLOCK_TOKENS = 16


@dataclass(frozen=True)
class Fact:
    """A value and where it was read."""

    value: str
    source: str


@dataclass(frozen=True)
class Identity:
    """What kilocard needs to know of a model's pod, each fact with its source. `workload` is the
    object that serves the model (a LeaderWorkerSet, an InferenceService, a Deployment)."""

    namespace: str
    pod: str
    model: Fact | None
    workload: Fact
    group: Fact
    rank: Fact
    group_size: Fact | None  # pods in the replica, where the stack says
    engine: Fact | None
    tp: Fact | None
    pp: Fact | None
    stack: str


def arguments(pod: dict[str, Any]) -> tuple[dict[str, str], str | None, str]:
    """The engine's flags (spelled with dashes, `--x=v` and `--x v` alike), the model given as a
    positional argument (`vllm serve MODEL`), and the command line in one string. A container
    that runs a shell (`sh -c "... python3 -m vllm... --model M"`) is split as the shell would."""
    words: list[str] = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        for word in [*(container.get("command") or []), *(container.get("args") or [])]:
            text = str(word)
            if " " in text.strip():  # a shell script in one argument
                try:
                    words += [w for w in shlex.split(text.replace(";", " ; ")) if w != ";"]
                except ValueError:
                    words += text.split()
            else:
                words.append(text)
    flags: dict[str, str] = {}
    positional = None
    for i, word in enumerate(words):
        if word == "serve" and i > 0 and words[i - 1].endswith("vllm") and i + 1 < len(words) \
                and not words[i + 1].startswith("-"):
            positional = words[i + 1]
        if not word.startswith("-") or word == "-":
            continue
        name, eq, value = word.partition("=")
        if not _FLAG.match(name):
            continue
        name = ("--" if name.startswith("--") else "-") + name.lstrip("-").replace("_", "-")
        if not eq:
            following = words[i + 1] if i + 1 < len(words) else ""
            value = following if following and not following.startswith("-") else ""
        flags.setdefault(name, value)
    return flags, positional, " ".join(words)


def kv_cache_tokens(pod: dict[str, Any]) -> int | None:
    """The replica's KV cache in tokens where its engine's arguments fix it (blocks x block size);
    None where the engine sizes it from the memory it finds, which only its own log says."""
    containers = (pod.get("spec") or {}).get("containers") or []
    if not any("gpu-blocks-override" in str(w) or "gpu_blocks_override" in str(w)
               for c in containers for w in [*(c.get("command") or []), *(c.get("args") or [])]):
        return None  # most pods: no command line to parse
    flags, _positional, _line = arguments(pod)
    blocks = next((flags[f] for f in KV_BLOCKS_ARGS if f in flags), "")
    size = next((flags[f] for f in BLOCK_SIZE_ARGS if f in flags), str(DEFAULT_BLOCK_TOKENS))
    if not (blocks.isdigit() and size.isdigit()) or int(blocks) < 1 or int(size) < 1:
        return None
    return int(blocks) * int(size)


def _engine(labels: dict[str, str], image: str, line: str) -> Fact | None:
    for key in ENGINE_LABELS:
        if labels.get(key):
            return Fact(labels[key], f"label {key}")
    for engine in ("sglang", "vllm"):  # an SGLang image may carry vLLM too: its launcher decides
        # sglang.launch_server, vllm.entrypoints..., vllm serve, Dynamo's python -m dynamo.vllm
        if re.search(rf"\b{engine}(\.|\s+serve\b)|\bdynamo\.{engine}\b", line):
            return Fact(engine, "its command line")
    for engine in ("sglang", "vllm"):
        if engine in image:
            return Fact(engine, f"its image {image}")
    # KServe's Hugging Face runtime serves an LLM with vLLM (its --backend defaults to auto: vLLM when
    # the architecture is supported) and exports vLLM's metrics; --backend=huggingface opts out.
    if "huggingfaceserver" in image and not re.search(r"--backend[=\s]+huggingface\b", line):
        return Fact("vllm", f"KServe's Hugging Face runtime {image}, whose default backend is vLLM")
    return None


_VARIABLE = re.compile(r"^\$(?:\((\w+)\)|\{(\w+)\}|(\w+))$")


def _first(flags: dict[str, str], names: Iterable[str], pod: dict[str, Any] | None = None) -> Fact | None:
    """The first of the flags given a value. A variable (`$(VAR)` the kubelet expands, `$VAR` a
    shell does) is read from the container's env when the spec sets it literally; else unknown."""
    for name in names:
        value = flags.get(name, "")
        variable = _VARIABLE.match(value)
        if variable is not None:
            var = next(g for g in variable.groups() if g)
            found = _env(pod, var) if pod is not None else None
            if found is not None:
                return Fact(found.value, f"argument {name} (${var}: {found.source})")
        elif value:
            return Fact(value, f"argument {name}")
    return None


def _env(pod: dict[str, Any], name: str) -> Fact | None:
    """A number the spec sets literally in a container's env (not one from a reference)."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        for var in container.get("env") or []:
            if var.get("name") == name and str(var.get("value", "")).isdigit():
                return Fact(str(var["value"]), f"env {name}")
    return None


def _owner(meta: dict[str, Any]) -> Fact:
    """The workload a pod belongs to: a Deployment (its ReplicaSet's name less the template hash),
    a StatefulSet, else the pod itself."""
    labels = meta.get("labels") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "ReplicaSet":
            hashed = labels.get("pod-template-hash")
            name = ref["name"][: -len(hashed) - 1] if hashed and ref["name"].endswith("-" + hashed) else ref["name"]
            return Fact(f"Deployment/{name}", "owner ReplicaSet")
        if ref.get("kind") in ("StatefulSet", "Job", "DaemonSet"):
            return Fact(f"{ref['kind']}/{ref['name']}", f"owner {ref['kind']}")
    return Fact(f"Pod/{meta['name']}", "the pod alone")


def identify(pod: dict[str, Any]) -> Identity | None:
    """The pod's identity from its own spec; None for a pod that serves no model (no kilocard or
    stack label, no engine on its command line). A pod of a model's workload that names no model
    itself has `model` None: identify_all fills it from its peers."""
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    namespace, name = meta["namespace"], meta["name"]
    flags, positional, line = arguments(pod)
    image = " ".join(str(c.get("image", "")) for c in (pod.get("spec") or {}).get("containers") or [])
    engine = _engine(labels, image, line)
    stack_label = next((stack for k, stack in STACK_LABELS if labels.get(k)), None)
    if MODEL_LABEL not in labels and stack_label is None and engine is None:
        return None
    stack = "kilocard" if MODEL_LABEL in labels else stack_label or "plain"
    model = (Fact(labels[MODEL_LABEL], f"label {MODEL_LABEL}") if labels.get(MODEL_LABEL) else None) \
        or _first(flags, SERVED) or (_first(flags, KSERVE_NAME) if stack == "KServe" else None) \
        or _first(flags, MODEL_ARGS) or (Fact(positional, "argument of vllm serve") if positional else None) \
        or next((Fact(labels[k], f"label {k}") for k in MODEL_LABELS if labels.get(k)), None)
    if model is not None and model.source.startswith("argument"):
        model = replace(model, value=model.value.split(",")[0])  # --served-model-name a,b: metrics say a
    if labels.get(LWS_NAME):
        workload = Fact(f"LeaderWorkerSet/{labels[LWS_NAME]}", f"label {LWS_NAME}")
    elif labels.get(KSERVE_ISVC):
        workload = Fact(f"InferenceService/{labels[KSERVE_ISVC]}", f"label {KSERVE_ISVC}")
    elif labels.get(DYNAMO_GRAPH):
        workload = Fact(f"DynamoGraphDeployment/{labels[DYNAMO_GRAPH]}", f"label {DYNAMO_GRAPH}")
    else:
        workload = _owner(meta)
    group, rank, size = _group(pod, labels, meta.get("annotations") or {})
    tp = (Fact(labels[TP_SIZE_LABEL], f"label {TP_SIZE_LABEL}") if labels.get(TP_SIZE_LABEL) else None) \
        or _first(flags, TP_ARGS, pod) or next((f for name in TP_ENVS if (f := _env(pod, name))), None)
    pp = (Fact(labels[PP_SIZE_LABEL], f"label {PP_SIZE_LABEL}") if labels.get(PP_SIZE_LABEL) else None) \
        or _first(flags, PP_ARGS, pod) or _env(pod, PP_ENV)
    return Identity(namespace, name, model, workload, group, rank, size, engine, tp, pp, stack)


def _group(pod: dict[str, Any], labels: dict[str, str], annotations: dict[str, str]) -> tuple[Fact, Fact, Fact | None]:
    """(replica, rank, pods in it): kilocard's TP group label, LWS's group key and size; a KServe
    multi-node predictor, one replica of head and workers; else the pod alone. The rank as
    vocabulary.RANK_LABELS read it."""
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    size = (Fact(labels[GROUP_SIZE_LABEL], f"label {GROUP_SIZE_LABEL}") if labels.get(GROUP_SIZE_LABEL) else None) \
        or (Fact(annotations[LWS_SIZE], f"annotation {LWS_SIZE}") if annotations.get(LWS_SIZE) else None)
    labelled = next((k for k in GROUP_LABELS if labels.get(k)), None)  # as vocabulary.group_of reads it
    if labelled is not None:
        group = Fact(f"{namespace}/{labels[labelled]}", f"label {labelled}")
    elif labels.get(AIBRIX_PODSET):  # a StormService role's multi-pod group; pod-group-index 0 serves
        rank = labels.get(AIBRIX_RANK, "")
        return (Fact(f"{namespace}/{labels[AIBRIX_PODSET]}", f"label {AIBRIX_PODSET}"),
                Fact(rank, f"label {AIBRIX_RANK}") if rank.isdigit() else Fact("0", "no group index"), size)
    elif labels.get(RAY_CLUSTER):  # a Ray cluster is one replica: its head and its workers
        head = labels.get(RAY_NODE_TYPE) == "head"
        return (Fact(f"{namespace}/{labels[RAY_CLUSTER]}", f"label {RAY_CLUSTER}"),
                Fact("0" if head else "1", f"label {RAY_NODE_TYPE}"), size)
    elif labels.get(KSERVE_ISVC) and (nodes := _env(pod, NODES_ENV)) is not None:
        head = any(c.get("name") == KSERVE_HEAD for c in (pod.get("spec") or {}).get("containers") or [])
        return (Fact(f"{namespace}/{labels[KSERVE_ISVC]}", f"label {KSERVE_ISVC} and env {NODES_ENV}"),
                Fact("0" if head else "1", f"container {KSERVE_HEAD}" if head else "a KServe worker"), nodes)
    else:
        group = Fact(f"{namespace}/{name}", "the pod alone")
    for key in RANK_LABELS:
        if str(labels.get(key, "")).isdigit():
            return group, Fact(labels[key], f"label {key}"), size
    return group, Fact("0", "a group of one"), size


def identify_all(pods: Iterable[dict[str, Any]]) -> list[Identity]:
    """Every model pod's identity; a pod that names no model takes its group's model, else its
    workload's (when all of the workload's pods that name one agree)."""
    return complete([i for i in (identify(p) for p in pods) if i is not None])


def complete(found: list[Identity]) -> list[Identity]:
    """The identities of pods that name a model, and of those that take it from their peers
    (identify_all's second half, for a caller that keeps each pod's `identify` itself)."""
    by_group: dict[str, set[Fact]] = {}
    by_workload: dict[tuple[str, str], set[Fact]] = {}
    for i in found:
        if i.model is not None:
            by_group.setdefault(i.group.value, set()).add(i.model)
            by_workload.setdefault((i.namespace, i.workload.value), set()).add(i.model)
    out = []
    for i in found:
        if i.model is None:
            peers = by_group.get(i.group.value) or by_workload.get((i.namespace, i.workload.value)) or set()
            names = {f.value for f in peers}
            if len(names) == 1:
                (value,) = names
                i = replace(i, model=Fact(value, f"its {'group' if i.group.value in by_group else 'workload'}'s "
                                                 f"{next(iter(peers)).source}"))
        if i.model is not None:
            out.append(i)
    return out


def _fact(facts: list[Fact | None]) -> dict[str, str] | None:
    """The value most pods agree on, with where the first of them read it."""
    given = [f for f in facts if f is not None]
    if not given:
        return None
    value = max({f.value for f in given}, key=lambda v: (sum(f.value == v for f in given), v))
    first = next(f for f in given if f.value == value)
    return {"value": value, "source": first.source}


def models(found: list[Identity], pods: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """`kilocard discover`'s answer: per model, its workloads, engine, TP and PP sizes (each with
    where it was read), and its replicas with their pods by rank, node and readiness."""
    by_model: dict[tuple[str, str], list[Identity]] = {}
    for i in found:
        assert i.model is not None  # identify_all keeps only pods with a model
        by_model.setdefault((i.namespace, i.model.value), []).append(i)
    out = []
    for (namespace, model), members in sorted(by_model.items()):
        replicas: dict[str, list[Identity]] = {}
        for i in sorted(members, key=lambda i: (i.group.value, int(i.rank.value), i.pod)):
            replicas.setdefault(i.group.value, []).append(i)
        out.append({
            "namespace": namespace, "model": model, "stack": members[0].stack,
            "workloads": sorted({i.workload.value for i in members}),
            "sources": {"model": sorted({i.model.source for i in members if i.model}),
                        "workload": sorted({i.workload.source for i in members}),
                        "replica": sorted({i.group.source for i in members}),
                        "rank": sorted({i.rank.source for i in members})},
            "engine": _fact([i.engine for i in members]), "tp": _fact([i.tp for i in members]),
            "pp": _fact([i.pp for i in members]),
            "replicas": [{"replica": group, "size": (_fact([i.group_size for i in pods_of]) or {}).get("value"),
                          "pods": [{"pod": i.pod, "rank": int(i.rank.value),
                                    "node": ((pods.get((i.namespace, i.pod)) or {}).get("spec") or {}).get("nodeName"),
                                    "ready": ready(pods.get((i.namespace, i.pod)) or {})} for i in pods_of]}
                         for group, pods_of in replicas.items()]})
    return out
