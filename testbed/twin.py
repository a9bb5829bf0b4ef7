"""A twin of a cluster on a fresh local testbed, to rehearse an experiment there first.

What is copied from the real cluster (read only, nothing written there):
- every node: name, labels, taints, cordon, capacity and allocatable, as a kwok node whose fault
  agent is the twin's simulator;
- the cards other pods hold on each node, as one ballast pod bound there (the scheduler must see
  the room the real cluster has, not an empty twin);
- the namespaces of the models the experiment touches, with their labels, and in them every
  Deployment, StatefulSet and PodDisruptionBudget, and every LeaderWorkerSet where the cluster
  serves them (then LWS's real controller runs on the twin, testbed.lws, and makes their
  StatefulSets and pods as it does on the cluster; the StatefulSets it made there are not copied);
- where their pods run: each is created bound to its real node before its workload is scaled
  up, carrying the twin's own pod-template hash (or StatefulSet revision), so the controller
  adopts it instead of placing a new one: the twin starts from the real placement, not from a
  fresh scheduling of it. A LeaderWorkerSet's groups are placed anew by the twin's scheduler
  (their pods' names and labels are its controller's and webhook's to give).
Pods then start as the twin's kwok stages say: `timing` stamps the workloads as the local testbed's
fleet is (default: ten times faster than production), so budgets that include start-up are
rehearsed at that pace. From there the real scheduler, controller manager and PodGC of the twin
replace what the experiment takes away.
"""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos import serving
from chaos.errors import NotFound, SpecError
from chaos.kube import Kube
from chaos.vocabulary import AGENT_ENDPOINT_ANNOTATION, card_resource_of
from testbed import steady, timing
from testbed.accelerators import for_resource
from testbed.cluster import Testbed
from testbed.config import TestbedConfig
from testbed.nodes import KWOK_ANNOTATION, TESTBED_LABEL

WORKLOADS = (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("policy/v1", "PodDisruptionBudget"))
LWS = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")  # copied where served; its controller runs on the twin
BALLAST_NAMESPACE = "kilocard-twin-ballast"
SCRATCH_NAMESPACE = "kilocard-twin-revisions"
_KEPT_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration", "deployment.kubernetes.io/revision")


def _quantity(text: Any) -> int:
    return int(str(text or 0))


def node_copy(node: dict[str, Any], card_resource: str, simulator_port: int) -> dict[str, Any]:
    meta, status = node["metadata"], node.get("status") or {}

    def resources(of: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in (of or {}).items() if k in (*_KEPT_RESOURCES, card_resource)}

    spec = {k: v for k, v in (node.get("spec") or {}).items() if k in ("taints", "unschedulable")}
    # A taint the node controller put there (not-ready, unreachable) is the real node's state, not its design.
    spec["taints"] = [t for t in spec.get("taints") or [] if not t["key"].startswith("node.kubernetes.io/")]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": meta["name"], "labels": {**(meta.get("labels") or {}), TESTBED_LABEL: "true"},
                     "annotations": {KWOK_ANNOTATION: "fake", AGENT_ENDPOINT_ANNOTATION:
                                     f"http://127.0.0.1:{simulator_port}/nodes/{meta['name']}"}},
        "spec": spec,
        "status": {"capacity": resources(status.get("capacity")), "allocatable": resources(status.get("allocatable"))},
    }


def object_copy(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as one would apply it: its spec, name, namespace, labels and annotations."""
    meta = obj["metadata"]
    kept = {"name": meta["name"], "namespace": meta.get("namespace"), "labels": meta.get("labels") or {},
            "annotations": {k: v for k, v in (meta.get("annotations") or {}).items() if k not in _DROPPED_ANNOTATIONS}}
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "metadata": {k: v for k, v in kept.items() if v}, "spec": copy.deepcopy(obj["spec"])}


def ballast(pods: list[dict[str, Any]], copied: set[str], card_resource: str) -> list[dict[str, Any]]:
    """Per node, one pod bound there holding the cards of the live pods the twin does not copy."""
    held: dict[str, int] = defaultdict(int)
    for pod in pods:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        if meta["namespace"] in copied or not spec.get("nodeName") or meta.get("deletionTimestamp"):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        held[spec["nodeName"]] += sum(_quantity(((c.get("resources") or {}).get("requests") or {}).get(card_resource))
                                      for c in spec.get("containers") or [])
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"ballast-{node}", "namespace": BALLAST_NAMESPACE},
             "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                      "containers": [{"name": "held", "image": "registry.k8s.io/pause:3.10",
                                      "resources": {"requests": {card_resource: str(n)},
                                                    "limits": {card_resource: str(n)}}}]}}
            for node, n in sorted(held.items()) if n]


def capture(real: Kube, namespaces: list[str], card_resource: str | None) -> dict[str, Any]:
    """Read what the twin needs from the real cluster: nodes, the namespaces and their workloads,
    every pod (for the ballast), and the card resource (given, else the one its nodes offer)."""
    found: dict[str, Any] = {"nodes": real.list_nodes_raw(), "namespaces": {}, "objects": []}
    card_resource = card_resource or card_resource_of(found["nodes"])
    if not card_resource:
        raise SpecError("--card-resource: no node of the cluster offers an extended resource; name the card's")
    found["card_resource"] = card_resource
    for ns in namespaces:
        found["namespaces"][ns] = real.namespace_labels(ns)
        for api_version, kind in WORKLOADS:
            found["objects"] += [object_copy(o) for o in real.list_objects(api_version, kind, ns)
                                 if not made_by_lws(o)]
        try:
            found["objects"] += [object_copy(o) for o in real.list_objects(*LWS, ns)]
        except NotFound:
            pass  # the cluster runs no LeaderWorkerSet
    pods = real.list_pods_raw()
    found["ballast"] = ballast(pods, set(namespaces), card_resource)
    found["placed"] = placed(pods, [rs for ns in namespaces for rs in real.list_objects("apps/v1", "ReplicaSet", ns)],
                             set(namespaces))
    return found


def made_by_lws(o: dict[str, Any]) -> bool:
    """A StatefulSet LWS's controller made: the leaders' (owned by the LeaderWorkerSet) or a
    group's workers' (owned by its leader pod), each labelled with the LeaderWorkerSet's name."""
    return o["kind"] == "StatefulSet" and serving.LWS_NAME in (o["metadata"].get("labels") or {})


def placed(pods: list[dict[str, Any]], replica_sets: list[dict[str, Any]], namespaces: set[str]) -> dict[str, list]:
    """"Kind/namespace/name" of a Deployment or StatefulSet -> [(pod name, node)] of its live, bound pods."""
    deployment_of = {(rs["metadata"]["namespace"], rs["metadata"]["name"]): ref["name"] for rs in replica_sets
                     for ref in rs["metadata"].get("ownerReferences") or [] if ref["kind"] == "Deployment"}
    found: dict[str, list] = defaultdict(list)
    for pod in pods:
        meta, node = pod["metadata"], (pod.get("spec") or {}).get("nodeName")
        if meta["namespace"] not in namespaces or not node or meta.get("deletionTimestamp"):
            continue
        for ref in meta.get("ownerReferences") or []:
            if ref["kind"] == "ReplicaSet" and (meta["namespace"], ref["name"]) in deployment_of:
                found[f"Deployment/{meta['namespace']}/{deployment_of[(meta['namespace'], ref['name'])]}"].append(
                    (meta["name"], node))
            elif ref["kind"] == "StatefulSet":
                found[f"StatefulSet/{meta['namespace']}/{ref['name']}"].append((meta["name"], node))
    return {k: sorted(v) for k, v in found.items()}


def _place_as_real(kube: Kube, objects: list[dict[str, Any]], real: dict[str, list], timeout: float) -> None:
    """Create each workload's real pods bound to their real nodes, carrying the hash label the
    twin's controller will give the workload's current pods, then apply the workloads: the
    controllers adopt those orphans instead of placing new ones. The hash depends on the pod
    template alone, so it is learnt first from a copy at zero replicas in a scratch namespace
    (a controller at zero would delete what it adopts)."""
    scaled = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet")
              and real.get(f"{o['kind']}/{o['metadata']['namespace']}/{o['metadata']['name']}")]
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SCRATCH_NAMESPACE}})
    for o in scaled:
        kube.apply({**o, "metadata": {**o["metadata"], "namespace": SCRATCH_NAMESPACE},
                    "spec": {**o["spec"], "replicas": 0}})
    for o in scaled:
        ns, name, template = o["metadata"]["namespace"], o["metadata"]["name"], o["spec"]["template"]
        labels = _hash_labels(kube, {**o, "metadata": {**o["metadata"], "namespace": SCRATCH_NAMESPACE}}, timeout)
        meta = template.get("metadata") or {}
        for pod, node in real[f"{o['kind']}/{ns}/{name}"]:
            extra = {"statefulset.kubernetes.io/pod-name": pod, "apps.kubernetes.io/pod-index": pod.rsplit("-", 1)[1]
                     } if o["kind"] == "StatefulSet" else {}
            spec = {**copy.deepcopy(template["spec"]), "nodeName": node}
            if o["kind"] == "StatefulSet":
                spec.update(hostname=pod, subdomain=o["spec"].get("serviceName") or None)
            kube.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": pod, "namespace": ns, "labels": {**(meta.get("labels") or {}), **labels, **extra},
                "annotations": meta.get("annotations") or {}},
                "spec": {k: v for k, v in spec.items() if v is not None}})
    kube.delete_namespace(SCRATCH_NAMESPACE)
    for o in objects:
        kube.apply(o)


def _hash_labels(kube: Kube, o: dict[str, Any], timeout: float) -> dict[str, str]:
    """The label by which the workload's controller will know its current pods, once it has one."""
    ns, name = o["metadata"]["namespace"], o["metadata"]["name"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if o["kind"] == "Deployment":
            for rs in kube.list_objects("apps/v1", "ReplicaSet", ns):
                if any(r["kind"] == "Deployment" and r["name"] == name for r in rs["metadata"].get("ownerReferences")
                       or []) and "pod-template-hash" in (rs["metadata"].get("labels") or {}):
                    return {"pod-template-hash": rs["metadata"]["labels"]["pod-template-hash"]}
        else:
            revision = (kube.get_object("apps/v1", "StatefulSet", name, ns).to_dict().get("status") or {}).get(
                "updateRevision")
            if revision:
                return {"controller-revision-hash": revision}
        time.sleep(0.2)
    raise TimeoutError(f"twin: {o['kind']} {ns}/{name} got no revision within {timeout:.0f} s")


def _template_labels(o: dict[str, Any]) -> dict[str, str]:
    return dict(((o["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {})


def expected_pods(objects: list[dict[str, Any]]) -> int:
    def pods(o: dict[str, Any]) -> int:
        if o["kind"] == LWS[1]:
            return int(o["spec"].get("replicas", 1)) * int(o["spec"]["leaderWorkerTemplate"].get("size", 1))
        return int(o["spec"].get("replicas", 1)) if o["kind"] in ("Deployment", "StatefulSet") else 0
    return sum(pods(o) for o in objects)


def start(captured: dict[str, Any], state_dir: Path, port_base: int, card_resource: str, timing_name: str,
          say: Callable[[str], None], timeout: float = 300.0) -> Testbed:
    """A fresh testbed holding the copies, every copied workload's pods Ready."""
    config = TestbedConfig(nodes=max(1, len(captured["nodes"])), port_base=port_base, state_dir=state_dir,
                           card_resource=card_resource, accelerator=for_resource(card_resource).name,
                           card_product=for_resource(card_resource).card_product).validate()
    tb = Testbed(config)
    tb.up(say=say, timeout=timeout,
          node_manifests=[node_copy(n, card_resource, config.ports.simulator) for n in captured["nodes"]])
    kube = tb.kube()
    try:
        for ns, labels in [(BALLAST_NAMESPACE, {}), *captured["namespaces"].items()]:
            kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})
        for pod in captured["ballast"]:
            kube.apply(pod)
        # Workloads that carry the model's shape start on the testbed's clock; others at once.
        objects = [timing.stamp([o], timing_name)[0] if timing.PARAMS_LABEL in _template_labels(o) else o
                   for o in captured["objects"]]
        wait = timeout + timing.slowest_start(objects, timing_name)
        started = time.monotonic()
        if any(o["kind"] == LWS[1] for o in objects):
            from testbed import lws

            controller = lws.Controller(tb, kube).start()
            assert controller.proc is not None
            tb.adopt(controller.proc)  # stopped with the twin
        _place_as_real(kube, objects, captured["placed"], wait)
        for ns in captured["namespaces"]:
            n = expected_pods([o for o in objects if o["metadata"].get("namespace") == ns])
            kube.wait_ready("pods", n, timeout=wait, namespace=ns)
        steady.wait(kube, tb.prometheus_url, list(captured["namespaces"]), steady.TIMEOUT, say)
        say(f"twin ready in {time.monotonic() - started:.1f} s: {len(captured['nodes'])} nodes, "
            f"{expected_pods(objects)} pods of {len(objects)} workloads, {len(captured['ballast'])} ballast pods")
    except BaseException:
        kube.close()
        tb.down(say=lambda _m: None)
        raise
    kube.close()
    return tb
