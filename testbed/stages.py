"""kwok's behaviour as data: the stage files that make fake nodes and pods act like kubelets.
Most ship in the kwok module (copied beside its binary at build time); testbed/kwok/ holds ours.

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
OWN = Path(__file__).parent / "kwok"
NOT_READY_LABEL = "node-not-ready.stage.kwok.x-k8s.io"  # Ready=False: not-ready taint
LOST_LABEL = "kilocard.io/node-lost"  # Ready=Unknown: unreachable taint (testbed/kwok/node-lost.yaml)


def write_config(stage_dir: Path, target: Path) -> Path:
    """Concatenate the profile's stages into one multi-document kwok config file."""
    docs = []
    for rel in PROFILE:
        path = stage_dir / rel
        if not path.is_file():
            raise FileNotFoundError(f"kwok stage {rel} not found in {stage_dir}: rebuild with 'kilocard testbed build'")
        docs.append(path.read_text().strip())
    docs += [path.read_text().strip() for path in sorted(OWN.glob("*.yaml"))]
    target.write_text("\n---\n".join(docs) + "\n")
    return target
