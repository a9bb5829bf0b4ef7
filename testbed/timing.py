"""How long a replica takes to start and to stop, from the model's shape: the testbed's timing
profiles, written onto the fleet's pod templates as the annotations kwok's stages read
(testbed/stages/).

Start-up is three phases, as a vLLM pod shows them in production:
- image pull: the engine image over the node's pull bandwidth (Running when it ends);
- weight loading: the pod's share of the weights (a TP group's pods load their halves in
  parallel) over the node's load bandwidth;
- warm-up: torch.compile and CUDA-graph capture, which grow with the layer count (Ready when
  it ends).
The simulator stretches the weight loading of a pod starting on a node whose reads are capped
(slow-weights), from the load phase written apart. A pull that fails (a registry outage) is
retried on the kubelet's back-off: 10 s, doubling up to 300 s, on the same clock.
Stopping: the preStop sleep (endpoints drop the pod) plus the longest in-flight requests, bounded
by the manifest's terminationGracePeriodSeconds (scaled like every other duration). The
production figures and their sources are in testbed/manifests/fleet/README.md.

Profiles: `production` uses those figures; `default` divides every duration by DEFAULT_FACTOR,
keeping production's proportions; `fast` writes nothing, so pods are Ready and gone at once.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from chaos.errors import SpecError
from chaos.vocabulary import GROUP_SIZE_LABEL, MODEL_LABEL
from testbed.simulator.model import profile_for
from testbed.stages import PULL_BACKOFF_ANNOTATION

PULL_ANNOTATION = "kilocard.io/image-pull-delay"
READY_ANNOTATION = "pod-ready.stage.kwok.x-k8s.io/delay"  # kwok's own name: from start to Ready
DRAIN_ANNOTATION = "pod-delete.stage.kwok.x-k8s.io/delay"  # kwok's own name: from delete to gone
LOAD_ANNOTATION = "kilocard.io/weights-load"  # the weight loading's share of READY_ANNOTATION's delay
PARAMS_LABEL = "kilocard.io/params-billions"
LAYERS_LABEL = "kilocard.io/layers"
DTYPE_LABEL = "kilocard.io/dtype"

# Production figures (sources in the fleet README).
IMAGE_GB = 12.0  # vllm/vllm-openai, compressed
PULL_GB_PER_S = 0.2  # from an in-cluster registry mirror
LOAD_GB_PER_S = 1.5  # per node, safetensors streamed from shared storage
WARMUP_S_PER_LAYER = 1.15  # torch.compile + CUDA graphs: ~39 s for 32 layers, ~92 s for 80
PRESTOP_S = 30.0  # endpoints and the gateway stop sending before the engine is told to stop
TAIL_GENERATIONS = 4.0  # the longest in-flight request runs about 4x the mean output length
PULL_BACKOFF_S = 10.0  # the kubelet's first image-pull back-off (pkg/kubelet/kubelet.go: imageBackOffPeriod)
DEFAULT_FACTOR = 10.0  # `default` runs production's timeline ten times faster
BYTES_PER_PARAM = {"float32": 4, "bfloat16": 2, "float16": 2, "float8": 1, "fp8": 1, "int8": 1, "int4": 0.5}
FACTORS = {"production": 1.0, "default": DEFAULT_FACTOR}
NAMES = ("fast", "default", "production")


@dataclass(frozen=True)
class Startup:
    """Seconds of each phase, in production time."""

    pull: float
    load: float
    warmup: float

    @property
    def total(self) -> float:
        return self.pull + self.load + self.warmup


def _number(labels: dict[str, str], key: str, model: str) -> float:
    try:
        return float(labels[key])
    except (KeyError, ValueError):
        raise SpecError(f"model {model}: pod label {key} must be a number, got {labels.get(key)!r}") from None


def startup(labels: dict[str, str]) -> Startup:
    """Production start-up of one pod of a model, from its template's shape labels."""
    model = labels.get(MODEL_LABEL, "?")
    dtype = labels.get(DTYPE_LABEL, "bfloat16")
    if dtype not in BYTES_PER_PARAM:
        raise SpecError(f"model {model}: {DTYPE_LABEL} {dtype!r} unknown; known: {', '.join(BYTES_PER_PARAM)}")
    pods = int(_number(labels, GROUP_SIZE_LABEL, model)) if GROUP_SIZE_LABEL in labels else 1
    weights_gb = _number(labels, PARAMS_LABEL, model) * BYTES_PER_PARAM[dtype]
    return Startup(pull=IMAGE_GB / PULL_GB_PER_S, load=weights_gb / pods / LOAD_GB_PER_S,
                   warmup=WARMUP_S_PER_LAYER * _number(labels, LAYERS_LABEL, model))


def drain(labels: dict[str, str]) -> float:
    """Production seconds from SIGTERM's preStop to the engine's exit, before the grace bound."""
    profile = profile_for(labels.get(MODEL_LABEL, ""))
    return PRESTOP_S + TAIL_GENERATIONS * profile.output_tokens * profile.itl_seconds


def _duration(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def stamp(objects: list[dict[str, Any]], timing: str) -> list[dict[str, Any]]:
    """Copies of the fleet's manifests whose pods start and stop on `timing`'s clock."""
    if timing not in NAMES:
        raise SpecError(f"--timing: expected one of {', '.join(NAMES)}, got {timing!r}")
    result = copy.deepcopy(objects)
    if timing == "fast":
        return result
    factor = FACTORS[timing]
    for o in result:
        template = o["spec"]["template"] if o["kind"] in ("Deployment", "StatefulSet") else None
        labels = template["metadata"].get("labels", {}) if template else {}
        if template is None or MODEL_LABEL not in labels:
            continue  # not a model's (a router): no weights to load, ready in the moment kwok takes
        phases = startup(labels)
        grace = max(1, round(template["spec"].get("terminationGracePeriodSeconds", 30) / factor))
        template["metadata"].setdefault("annotations", {}).update({
            PULL_ANNOTATION: _duration(phases.pull / factor),
            READY_ANNOTATION: _duration((phases.load + phases.warmup) / factor),
            DRAIN_ANNOTATION: _duration(min(drain(labels) / factor, grace)),
            PULL_BACKOFF_ANNOTATION: _duration(PULL_BACKOFF_S / factor),
            LOAD_ANNOTATION: _duration(phases.load / factor),
        })
        template["spec"]["terminationGracePeriodSeconds"] = grace
    return result


def ready_after(template_labels: dict[str, str], timing: str) -> float:
    """Seconds from scheduling to Ready of a pod with these template labels, on `timing`'s clock."""
    return 0.0 if timing == "fast" else startup(template_labels).total / FACTORS[timing]


def slowest_start(objects: list[dict[str, Any]], timing: str) -> float:
    """The longest start-up of the workloads that carry a model's shape (others start at once)."""
    shaped = [labels for o in objects if o["kind"] in ("Deployment", "StatefulSet")
              and PARAMS_LABEL in (labels := o["spec"]["template"]["metadata"].get("labels") or {})]
    return max((ready_after(labels, timing) for labels in shaped), default=0.0)
