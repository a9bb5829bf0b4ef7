"""kilocard's Helm chart rendered by the real helm (built the first time a test asks for it), for the
chart's unit tests and for the testbed tests that install it."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from testbed import build

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "chart" / "kilocard"
NAMESPACE = "kilocard-system"


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    binary = build.ensure(build.HELM, say=lambda _m: None) / "helm"
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=120)


def rendered(*sets: str, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The objects `helm template` renders with these --set strings and values."""
    with tempfile.TemporaryDirectory() as here:
        args = ["template", "kilocard", str(CHART), "--namespace", NAMESPACE]
        for given in sets:
            args += ["--set", given]
        if values is not None:
            (Path(here) / "values.yaml").write_text(yaml.safe_dump(values))
            args += ["-f", str(Path(here) / "values.yaml")]
        done = helm(*args)
    assert done.returncode == 0, done.stderr
    return [o for o in yaml.safe_load_all(done.stdout) if o]
