"""Sample inference fleets (testbed/manifests/fleet/<name>/*.yaml), deployed and waited for.

Manifests are templates: `${namespace}` and `${card_resource}` are filled in, so the same fleet
runs on NVIDIA, AMD or Ascend resource names. Tests reshape a fleet (fewer replicas, pinned to
their own pool of nodes) with the pure helpers below before deploying it.
"""

from __future__ import annotations

import copy
import json
import string
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from chaos.errors import KilocardError, SpecError
from chaos.kube import Kube
from chaos.vocabulary import MODEL_LABEL, ready
from testbed import steady

MANIFESTS = Path(__file__).parent / "manifests" / "fleet"
DEFAULT_NAMESPACE = "kilocard-fleet"
POOL_LABEL = "kilocard.io/pool"
Manifest = dict[str, Any]


def names() -> list[str]:
    return sorted(p.name for p in MANIFESTS.iterdir() if p.is_dir())


def load(name: str, card_resource: str, namespace: str = DEFAULT_NAMESPACE) -> list[Manifest]:
    """A fleet's manifests; a folder with a `fleet.yaml` is another fleet resized (`base`,
    `replicas` per model, `groups` per cross-node model) rather than a copy of its files."""
    folder = MANIFESTS / name
    if not folder.is_dir():
        raise SpecError(f"--fleet: unknown fleet {name!r}; known: {', '.join(names())}")
    resize = folder / "fleet.yaml"
    if resize.is_file():
        spec = yaml.safe_load(resize.read_text())
        objects = scaled(load(spec["base"], card_resource, namespace), spec.get("replicas") or {})
        for model, count in (spec.get("groups") or {}).items():
            objects = grouped(objects, model, count)
        return objects
    objects: list[Manifest] = []
    for path in sorted(folder.glob("*.yaml")):
        text = string.Template(path.read_text()).substitute(namespace=namespace, card_resource=card_resource)
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def _workloads(objects: list[Manifest]) -> list[Manifest]:
    return [o for o in objects if o["kind"] in ("Deployment", "StatefulSet")]


def only(objects: list[Manifest], *models: str) -> list[Manifest]:
    """Keep the namespace and the objects of the given models."""
    def keep(o: Manifest) -> bool:
        labels = o["metadata"].get("labels", {})
        return o["kind"] == "Namespace" or labels.get(MODEL_LABEL) in models or (
            o["kind"] == "PodDisruptionBudget" and o["spec"]["selector"]["matchLabels"].get(MODEL_LABEL) in models)

    kept = [copy.deepcopy(o) for o in objects if keep(o)]
    found = {o["metadata"]["labels"].get(MODEL_LABEL) for o in _workloads(kept)}
    if set(models) - found:
        raise SpecError(f"no such model in the fleet: {', '.join(sorted(set(models) - found))}")
    return kept


def scaled(objects: list[Manifest], replicas: dict[str, int]) -> list[Manifest]:
    """Set the replica count per model (for StatefulSet groups: pods per group stay as they are)."""
    result = copy.deepcopy(objects)
    for o in _workloads(result):
        model = o["metadata"]["labels"].get(MODEL_LABEL)
        if model in replicas and o["kind"] == "Deployment":
            o["spec"]["replicas"] = replicas[model]
    return result


def grouped(objects: list[Manifest], model: str, count: int) -> list[Manifest]:
    """`count` cross-node groups of `model`: its first group's StatefulSet copied under new group
    names (`<model>-g<i>`), the others dropped."""
    groups = [o for o in objects if o["kind"] == "StatefulSet" and o["metadata"]["labels"].get(MODEL_LABEL) == model]
    if not groups:
        raise SpecError(f"no cross-node groups of {model} to copy")
    first = json.dumps(groups[0])
    name = groups[0]["metadata"]["name"]
    copies = [json.loads(first.replace(f'"{name}"', f'"{model}-g{i}"')) for i in range(count)]
    return [o for o in objects if o not in groups] + copies


def pinned(objects: list[Manifest], pool: str) -> list[Manifest]:
    """Confine every pod to nodes labelled and tainted `kilocard.io/pool=<pool>`."""
    result = copy.deepcopy(objects)
    for o in _workloads(result):
        spec = o["spec"]["template"]["spec"]
        spec.setdefault("nodeSelector", {})[POOL_LABEL] = pool
        spec.setdefault("tolerations", []).append(
            {"key": POOL_LABEL, "operator": "Equal", "value": pool, "effect": "NoSchedule"})
    return result


def expected_pods(objects: list[Manifest]) -> int:
    return sum(int(o["spec"].get("replicas", 1)) for o in _workloads(objects))


def namespace_of(objects: list[Manifest]) -> str:
    return next(o["metadata"]["name"] for o in objects if o["kind"] == "Namespace")


def apply(kube: Kube, objects: list[Manifest]) -> None:
    for o in objects:
        kube.apply(o)


def deploy(kube: Kube, objects: list[Manifest], timeout: float = 300.0,
           say: Callable[[str], None] = print, prometheus: str | None = None,
           serving_timeout: float = steady.TIMEOUT) -> float:
    """Apply the fleet (idempotent) and wait until every replica pod is Ready and, given the
    testbed's Prometheus, until the fleet serves at its steady state (testbed.steady: what the
    catalog's steady states ask, now and over the window before); return seconds."""
    started = time.monotonic()
    apply(kube, objects)
    want = expected_pods(objects)
    namespace = namespace_of(objects)
    labelled = [o["metadata"]["labels"].get(MODEL_LABEL) for o in _workloads(objects)]
    # A fleet shaped as a serving stack makes it (testbed.stacks) carries no label of kilocard's:
    # its namespace holds its pods only.
    selector = f"{MODEL_LABEL} in ({','.join(sorted(labelled))})" if all(labelled) else None
    try:
        kube.wait_ready("pods", want, timeout=timeout, namespace=namespace, label_selector=selector)
    except TimeoutError:
        pods = kube.list_pods_raw(namespace, selector)
        pending = [p["metadata"]["name"] for p in pods if not ready(p)]
        raise KilocardError(
            f"fleet not Ready within {timeout:.0f} s: {len(pods) - len(pending)}/{want} Ready; "
            f"not Ready: {', '.join(pending[:5])}{' ...' if len(pending) > 5 else ''}") from None
    say(f"fleet Ready in {time.monotonic() - started:.1f} s: {want} pods in namespace {namespace}")
    if prometheus is not None:
        steady.wait(kube, prometheus, [namespace], serving_timeout, say)
    return time.monotonic() - started
