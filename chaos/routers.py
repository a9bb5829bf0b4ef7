"""The routing tier in front of a model's replicas, as the serving stacks deploy it: which pods are
routers, which replicas each one finds, and what a client meets when it fails. Pure functions over
the API's plain JSON; the labels and flags are cited in docs/stacks.md.

Two shapes of router:
    proxy    every request passes through it (vLLM production-stack's router, SGLang's model
             gateway): a frozen or unreachable router holds its share of the requests until the
             client gives up; it may try another replica when one fails (`attempts`)
    picker   the gateway asks it which replica to use, then forwards the request itself (the
             Gateway API inference extension's endpoint picker, llm-d's router): when the picker
             cannot answer, the gateway drops the request (FailClose) or forwards it to a replica
             of its own picking (FailOpen), as the InferencePool's failureMode says

A router finds its replicas as its stack's discovery does: the pods of its namespace (or the one
its flags name) matching its label selector (every model pod there, where it gives none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chaos.serving import arguments

PROXY, PICKER = "proxy", "picker"
FAIL_OPEN, FAIL_CLOSE = "FailOpen", "FailClose"
FAILURE_MODES = (FAIL_OPEN, FAIL_CLOSE)
# The InferencePool's endpointPickerRef.failureMode and spec.selector live on the pool, not on the
# picker's pod; these annotations on the pod stand for them (the testbed's tier sets them, a user
# may too). Absent: the API's default mode, FailClose, and every model pod of the pool's namespace.
FAILURE_MODE_ANNOTATION = "kilocard.io/failure-mode"
POOL_SELECTOR_ANNOTATION = "kilocard.io/pool-selector"

# vLLM production-stack (helm/templates/_helpers.tpl routerStandardLabels; src/vllm_router/parsers/parser.py).
STACK_COMPONENT, STACK_PART_OF = "app.kubernetes.io/component", "app.kubernetes.io/part-of"
# The endpoint picker's pod label in the Gateway API inference extension's chart (config/charts/
# inferencepool, `inferencepool: <release>-epp`), llm-d-router's charts (config/charts/routerlib)
# and the archived llm-d ModelService operator.
PICKER_LABELS = (("inferencepool", "Gateway API inference extension"), ("llm-d-router-gateway", "llm-d router"),
                 ("llm-d-router-standalone", "llm-d router"), ("llm-d.ai/epp", "llm-d"))
SGLANG_IMAGES = ("sgl-model-gateway", "lightseekorg/smg", "sglang-router", "sgl-router")


@dataclass(frozen=True)
class Router:
    """One router pod as kilocard reads it."""

    namespace: str
    pod: str
    stack: str
    shape: str  # PROXY or PICKER
    source: str  # what made it a router (a label)
    backends_namespace: str  # where it looks for replicas
    selector: tuple[tuple[str, str], ...]  # the labels its replicas carry; () for every model pod there
    attempts: int  # tries of a request, the first included, each on another replica
    failure_mode: str | None  # PICKER: what the gateway does without an answer; None for a proxy

    def finds(self, namespace: str, labels: dict[str, str]) -> bool:
        """Would its discovery take a pod of this namespace and labels (a model's, as the caller
        decided) for a replica?"""
        return namespace == self.backends_namespace and all(labels.get(k) == v for k, v in self.selector)


def _selector(text: str) -> tuple[tuple[str, str], ...]:
    """`k=v,k2=v2` (production-stack, llm-d) or `k=v k2=v2` (SGLang): equality terms only."""
    terms = [t for t in text.replace(",", " ").split() if "=" in t]
    return tuple(sorted((k.strip(), v.strip()) for k, _, v in (t.partition("=") for t in terms)))


def _count(flags: dict[str, str], name: str, default: int) -> int:
    value = flags.get(name, "")
    return int(value) if value.isdigit() else default


def router_of(pod: dict[str, Any]) -> Router | None:
    """The router this pod is, by its stack's labels; None for any other pod."""
    meta = pod["metadata"]
    labels, namespace = meta.get("labels") or {}, meta["namespace"]
    component, part_of = labels.get(STACK_COMPONENT), labels.get(STACK_PART_OF)
    picker = next(((key, stack) for key, stack in PICKER_LABELS if labels.get(key)), None)
    if picker is None and component != "router":
        return None
    flags, _positional, line = arguments(pod)
    images = " ".join(str(c.get("image") or "") for c in (pod.get("spec") or {}).get("containers") or [])
    if picker is not None:
        key, stack = picker
        annotations = meta.get("annotations") or {}
        mode = annotations.get(FAILURE_MODE_ANNOTATION)
        # llm-d's standalone picker names its replicas itself (--endpoint-selector).
        selected = flags.get("--endpoint-selector") or annotations.get(POOL_SELECTOR_ANNOTATION, "")
        return Router(namespace, meta["name"], stack, PICKER, f"label {key}",
                      flags.get("--pool-namespace") or namespace, _selector(selected), 1,
                      mode if mode in FAILURE_MODES else FAIL_CLOSE)
    source = f"label {STACK_COMPONENT}=router"
    if any(i in images for i in SGLANG_IMAGES) or "sglang_router" in line:
        # --retry-max-retries counts every attempt (src/core/retry.rs); --disable-retries makes it 1.
        attempts = 1 if "--disable-retries" in flags else max(1, _count(flags, "--retry-max-retries", 5))
        selected = line.split("--selector", 1)[1].split("--", 1)[0] if "--selector" in line else ""
        return Router(namespace, meta["name"], "SGLang model gateway", PROXY, source,
                      flags.get("--service-discovery-namespace") or namespace, _selector(selected), attempts, None)
    if part_of == "vllm-stack" or "vllm_router" in line or "--k8s-label-selector" in flags:
        # No retry unless --max-instance-failover-reroute-attempts (0 by default) asks for reroutes.
        return Router(namespace, meta["name"], "vLLM production-stack", PROXY, source,
                      flags.get("--k8s-namespace") or namespace, _selector(flags.get("--k8s-label-selector", "")),
                      1 + _count(flags, "--max-instance-failover-reroute-attempts", 0), None)
    return None
