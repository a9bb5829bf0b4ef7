"""kwok's behaviour as data: the stage files that make fake nodes and pods act like kubelets.

Node stages are kwok's own, as they ship in the kwok module (copied beside its binary at build
time); kwok v0.8.0 has no built-in stages, so the testbed always passes the set with `-c`. Pod
stages are kilocard's (testbed/stages/): a pod starts, becomes Ready and goes away after delays
its annotations give (testbed/timing.py writes them from the model's shape), and at once without
them, as kwok's "fast" profile does.
"""

from __future__ import annotations

from pathlib import Path

OWN_STAGES = Path(__file__).parent / "stages"
# Relative to kwok's kustomize/stage folder. The chaos stage turns a node NotReady while it
# carries the label node-not-ready.stage.kwok.x-k8s.io=true.
KWOK_PROFILE = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "node/chaos/node-not-ready.yaml",
    "pod/fast/pod-complete.yaml",
)
OWN_PROFILE = ("pod-start.yaml", "pod-pull-failing.yaml", "pod-ready.yaml", "pod-ready-again.yaml", "pod-delete.yaml")
# A pod whose node cannot pull its image (the simulator marks it, the stage fails its pull).
PULL_FAILING_ANNOTATION = "kilocard.io/image-pull-failing"
# The kubelet's first image-pull back-off (10 s, doubling to 300 s), on the pod's timing's clock.
PULL_BACKOFF_ANNOTATION = "kilocard.io/image-pull-backoff"
NOT_READY_LABEL = "node-not-ready.stage.kwok.x-k8s.io"  # Ready=False: not-ready taint
# A dead kubelet: kwok stops managing the node (see cluster.py), so its Lease lapses, the controller
# manager marks it Unknown and taints it unreachable, and its pods are never confirmed deleted.
LOST_LABEL = "kilocard.io/node-lost"


def write_config(stage_dir: Path, target: Path) -> Path:
    """Concatenate the profile's stages into one multi-document kwok config file."""
    paths = [stage_dir / rel for rel in KWOK_PROFILE] + [OWN_STAGES / name for name in OWN_PROFILE]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"kwok stage {path} not found: rebuild with 'kilocard testbed build'")
    target.write_text("\n---\n".join(path.read_text().strip() for path in paths) + "\n")
    return target
