"""What was running when a run began: per model its workloads (as `kilocard discover` names them:
Deployment/x, LeaderWorkerSet/x, InferenceService/x) and the pods' direct owners (the rollout:
ReplicaSet/x-<template hash>, StatefulSet/x), container images with the digests
the kubelet reports (`imageID`; None where it reports none, as kwok does), and the engine's
command line (vLLM/SGLang flags: tensor parallel size, served model name, ...). A journal that
keeps this can be compared with one from the next release."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from chaos import serving
from chaos.kube import Kube
from probes import snapshot


def of(pods: list[dict[str, Any]]) -> dict[str, Any]:
    """Pure: "namespace/model" -> {workloads, owners, images, engine_args} from the pods' JSON."""
    found: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"workloads": set(), "owners": set(), "images": {}, "engine_args": None})
    identities = snapshot.identities(pods)
    for pod in pods:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        entry = found[f"{meta['namespace']}/{snapshot.model_of(pod, identities) or '?'}"]
        identity = identities.get((meta["namespace"], meta["name"])) or serving.identify(pod)
        if identity is not None:
            entry["workloads"].add(identity.workload.value)
        for owner in meta.get("ownerReferences") or []:
            entry["owners"].add(f"{owner['kind']}/{owner['name']}")
        digests = {c.get("name"): c.get("imageID") or None for c in (pod.get("status") or {}).get("containerStatuses")
                   or []}
        for c in spec.get("containers") or []:
            entry["images"].setdefault(c["image"], digests.get(c["name"]))
        main = (spec.get("containers") or [{}])[0]
        if entry["engine_args"] is None and (main.get("command") or main.get("args")):
            entry["engine_args"] = [*(main.get("command") or []), *(main.get("args") or [])]
    return {key: {"workloads": sorted(e["workloads"]), "owners": sorted(e["owners"]),
                  "images": [{"image": i, "digest": d} for i, d in sorted(e["images"].items())],
                  "engine_args": e["engine_args"]} for key, e in sorted(found.items())}


def fetch(kube: Kube, models: list[tuple[str, str]]) -> dict[str, Any]:
    """The release metadata of the models a run touches, given as (namespace, "model-a,model-b"):
    from the run's follower when one runs, else one LIST per namespace."""
    pods: list[dict[str, Any]] = []
    source = snapshot.source_for(kube)
    followed = source.objects() if source is not None else None
    for namespace, names in models:
        listed = kube.list_pods_raw(namespace) if followed is None else \
            [p for p in followed[0] if p["metadata"]["namespace"] == namespace]
        identities = snapshot.identities(listed)
        pods += [p for p in listed if snapshot.model_of(p, identities) in names.split(",")]
    return of(pods)
