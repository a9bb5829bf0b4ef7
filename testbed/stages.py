"""kwok's behaviour as data: the stage files that make fake nodes and pods act like kubelets,
as they ship in the kwok module (copied beside its binary at build time).

kwok v0.8.0 has no built-in stages, so the testbed always passes this set with `-c`."""

from __future__ import annotations

from pathlib import Path

# Relative to kwok's kustomize/stage folder. "fast" pods become Ready at once; the chaos stage
# turns a node NotReady while it carries the label node-not-ready.stage.kwok.x-k8s.io=true.
PROFILE = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "node/chaos/node-not-ready.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
)
NOT_READY_LABEL = "node-not-ready.stage.kwok.x-k8s.io"  # Ready=False: not-ready taint
# A dead kubelet: kwok stops managing the node (see cluster.py), so its Lease lapses, the controller
# manager marks it Unknown and taints it unreachable, and its pods are never confirmed deleted.
LOST_LABEL = "kilocard.io/node-lost"


def write_config(stage_dir: Path, target: Path) -> Path:
    """Concatenate the profile's stages into one multi-document kwok config file."""
    docs = []
    for rel in PROFILE:
        path = stage_dir / rel
        if not path.is_file():
            raise FileNotFoundError(f"kwok stage {rel} not found in {stage_dir}: rebuild with 'kilocard testbed build'")
        docs.append(path.read_text().strip())
    target.write_text("\n---\n".join(docs) + "\n")
    return target
