"""Checks of plan input that collect every problem instead of stopping at the first: each problem
is a line `<where>: <what was expected>, got <what was there>`, where `where` is a path like
`steps[2].timeout`; the loader prefixes the file."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import date
from typing import Any

# Kubernetes' names: a namespace is a DNS label, a ConfigMap a DNS subdomain.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def shown(value: Any) -> str:
    """A value as a message shows it: scalars as written, containers by their kind."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list" if value else "an empty list"
    if value is None:
        return "nothing"
    if isinstance(value, date):  # YAML reads an unquoted timestamp as one
        return value.isoformat()
    return repr(value)


class Problems:
    """Every problem found so far, in the order found."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.lines.append(f"{where}: {message}" if where else message)

    def fields(self, where: str, value: Any, allowed: Iterable[str],
               required: Mapping[str, str] | None = None) -> dict[str, Any] | None:
        """`value` as a mapping, each unknown field and each missing required one a problem
        (`required` maps a field to what it is); None when it is no mapping at all."""
        allowed = sorted({*allowed, *(required or {})})
        if not isinstance(value, Mapping):
            self.add(where, f"expected a mapping with {', '.join(allowed)}; got {shown(value)}")
            return None
        prefix = f"{where}." if where else ""
        for key in value:
            if key not in allowed:
                self.add(f"{prefix}{key}", f"unknown field; expected one of {', '.join(allowed)}")
        for key, what in (required or {}).items():
            if key not in value:
                self.add(f"{prefix}{key}", f"required: {what}")
        return dict(value)

    def text(self, where: str, value: Any) -> str | None:
        """Text, without the newline a YAML block (`>`) ends with."""
        if isinstance(value, str) and value.strip():
            return value.strip()
        self.add(where, f"expected text, got {shown(value)}")
        return None

    def seconds(self, where: str, value: Any) -> float | None:
        """A number of seconds above 0."""
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
            return float(value)
        self.add(where, f"expected seconds above 0, got {shown(value)}")
        return None

    def boolean(self, where: str, value: Any) -> bool | None:
        if isinstance(value, bool):
            return value
        self.add(where, f"expected true or false, got {shown(value)}")
        return None

    def config_map(self, where: str, value: Any) -> tuple[str, str] | None:
        """(namespace, name) of a `{namespace, name}` mapping."""
        found = self.fields(where, value, (), {"namespace": "the ConfigMap's namespace",
                                               "name": "the ConfigMap's name"})
        if found is None or "namespace" not in found or "name" not in found:
            return None
        namespace, name, ok = found["namespace"], found["name"], True
        if not (isinstance(namespace, str) and len(namespace) <= 63 and _DNS_LABEL.match(namespace)):
            self.add(f"{where}.namespace", f"expected a namespace name (lower-case letters, digits and '-', "
                                           f"up to 63), got {shown(namespace)}")
            ok = False
        if not (isinstance(name, str) and len(name) <= 253 and _DNS_SUBDOMAIN.match(name)):
            self.add(f"{where}.name", f"expected a ConfigMap name (lower-case letters, digits, '-' and '.', "
                                      f"up to 253), got {shown(name)}")
            ok = False
        return (namespace, name) if ok else None
