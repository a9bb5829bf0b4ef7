"""What the read commands print for a machine: -o/--output text|json|yaml, as kubectl's."""

from __future__ import annotations

import argparse
import json
from typing import Any

import yaml


def output_flag(p: argparse.ArgumentParser, what: str = "json, yaml: machine-readable, on stdout") -> None:
    """-o/--output text|json|yaml, as kubectl's; --json stays as the short way to say -o json."""
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text", help=what)
    p.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")


def emit(data: Any, output: str) -> bool:
    """Print `data` as asked: True when printed (json, yaml), False for text (the caller's own)."""
    if output == "json":
        print(json.dumps(data, indent=2, default=str))
    elif output == "yaml":
        print(yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False), end="")
    return output != "text"
