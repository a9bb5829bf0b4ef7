"""Figures the reliability tests measure, for bench/reliability.py (docs/reliability.md): with
KILOCARD_FIGURES=<dir>, `record` appends one JSON line to <dir>/<name>.jsonl; unset, nothing is
written and a test is only its assertions."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def record(name: str, figure: dict[str, Any]) -> None:
    where = os.environ.get("KILOCARD_FIGURES")
    if not where:
        return
    Path(where).mkdir(parents=True, exist_ok=True)
    with (Path(where) / f"{name}.jsonl").open("a") as out:
        out.write(json.dumps(figure, sort_keys=True) + "\n")
