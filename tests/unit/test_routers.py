"""Which pods are routers, as the serving stacks deploy them (chaos.routers), and faults that pick
from the routing tier (`router: true`, chaos.targets.routers_of)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from chaos import plan, routers
from chaos.faults import pod_kill


def pod(name: str, labels: dict[str, str], args: list[str], image: str = "img", namespace: str = "serving",
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"u-{name}", "labels": labels,
                         "annotations": annotations or {}},
            "spec": {"nodeName": "n0", "containers": [{"name": "c", "image": image, "args": args}]},
            "status": {"phase": "Running"}}


# The labels and flags each stack's chart writes (docs/stacks.md cites them).
PRODUCTION_STACK = pod("vllm-deployment-router-7d9f", {
    "app.kubernetes.io/name": "router", "app.kubernetes.io/instance": "vllm", "app.kubernetes.io/component": "router",
    "app.kubernetes.io/part-of": "vllm-stack", "environment": "router", "release": "router"},
    ["--host", "0.0.0.0", "--port", "8000", "--service-discovery", "k8s", "--k8s-namespace", "serving",
     "--k8s-service-discovery-type", "pod-ip", "--k8s-label-selector", "environment=test,release=test",
     "--routing-logic", "roundrobin"], "lmcache/lmstack-router:latest")
SGLANG = pod("smg-router-0", {"app.kubernetes.io/name": "smg", "app.kubernetes.io/instance": "smg",
                              "app.kubernetes.io/component": "router"},
             ["--service-discovery", "--selector", "app=sglang", "tier=decode", "--service-discovery-port", "8000",
              "--service-discovery-namespace", "models", "--retry-max-retries", "3"], "ghcr.io/lightseekorg/smg:v1")
PICKER = pod("gaie-epp-5c4", {"inferencepool": "gaie-inference-scheduling-epp"},
             ["--pool-name", "gaie-inference-scheduling", "--pool-namespace", "serving", "--grpc-port", "9002"],
             "ghcr.io/llm-d/llm-d-inference-scheduler:v0.5.0", annotations={routers.FAILURE_MODE_ANNOTATION: "FailOpen"})
LLMD = pod("router-epp-0", {"llm-d-router-standalone": "router-epp", "llm-d.ai/igw-mode": "llm-d-router-standalone"},
           ["--endpoint-selector", "llm-d.ai/inference-serving=true"], "ghcr.io/llm-d/llm-d-router-endpoint-picker")


def test_each_stack_s_router_is_read_with_its_discovery_retries_and_failure_mode() -> None:
    stack = routers.router_of(PRODUCTION_STACK)
    assert stack is not None and (stack.stack, stack.shape, stack.attempts, stack.failure_mode) == (
        "vLLM production-stack", routers.PROXY, 1, None)  # no reroute by default
    assert stack.selector == (("environment", "test"), ("release", "test"))
    assert stack.finds("serving", {"environment": "test", "release": "test", "model": "m"})
    assert not stack.finds("serving", {"environment": "test"}) and not stack.finds("other", dict(stack.selector))
    sglang = routers.router_of(SGLANG)
    assert sglang is not None and (sglang.stack, sglang.attempts, sglang.backends_namespace, sglang.selector) == (
        "SGLang model gateway", 3, "models", (("app", "sglang"), ("tier", "decode")))
    picker = routers.router_of(PICKER)
    assert picker is not None and (picker.shape, picker.failure_mode, picker.selector, picker.source) == (
        routers.PICKER, routers.FAIL_OPEN, (), "label inferencepool")
    assert picker.finds("serving", {"anything": "x"})  # the pool's selector is the pool's: every model pod here
    llmd = routers.router_of(LLMD)
    assert llmd is not None and (llmd.stack, llmd.failure_mode, llmd.selector) == (
        "llm-d router", routers.FAIL_CLOSE, (("llm-d.ai/inference-serving", "true"),))  # the API's default mode


@pytest.mark.parametrize("args, attempts", [
    (["--max-instance-failover-reroute-attempts", "2"], 3), (["--max-instance-failover-reroute-attempts=x"], 1)])
def test_production_stack_reroutes_only_when_asked(args: list[str], attempts: int) -> None:
    found = routers.router_of(pod("r", {"app.kubernetes.io/component": "router",
                                        "app.kubernetes.io/part-of": "vllm-stack"}, args))
    assert found is not None and found.attempts == attempts


def test_sglang_without_retries_tries_once_and_other_pods_are_no_routers() -> None:
    off = routers.router_of(pod("r", {"app.kubernetes.io/component": "router"}, ["--disable-retries"],
                                "lmsysorg/sgl-model-gateway:v0.2"))
    assert off is not None and off.attempts == 1
    # A component called router that no stack made, and a model's pod, are not routers.
    assert routers.router_of(pod("r", {"app.kubernetes.io/component": "router"}, ["--port", "80"])) is None
    assert routers.router_of(pod("m", {"kilocard.io/model": "m"}, ["--model", "m"])) is None


class Listing:
    """One namespace's pods: two routers (one in front of model a, one of b) and a replica of each."""

    def __init__(self) -> None:
        def proxy(name: str, model: str) -> dict[str, Any]:
            return pod(name, {"app.kubernetes.io/component": "router", "app.kubernetes.io/part-of": "vllm-stack"},
                       ["--k8s-label-selector", f"kilocard.io/model={model}"])
        self.pods = [proxy("router-a", "a"), proxy("router-b", "b"),
                     pod("a-0", {"kilocard.io/model": "a"}, []), pod("b-0", {"kilocard.io/model": "b"}, [])]

    def list_pods_raw(self, namespace: str | None, label_selector: str | None = None,
                      field_selector: str | None = None) -> list[dict[str, Any]]:
        return self.pods


@pytest.mark.parametrize("model, picked", [(None, ["router-a", "router-b"]), ("a", ["router-a"]), ("c", [])])
def test_a_fault_with_router_true_picks_the_routers_in_front_of_its_model(model: str | None,
                                                                          picked: list[str]) -> None:
    fault = {"kind": "pod-kill", "namespace": "serving", "router": True, "percent": 100, "allow_empty": True}
    _, spec = plan.parse({**fault, **({"model": model} if model else {})}, "f")
    targets = pod_kill.targets(SimpleNamespace(kube=Listing(), run_id="r"), spec, "f")
    assert sorted(t["name"] for t in targets) == picked
