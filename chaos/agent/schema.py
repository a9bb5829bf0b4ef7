"""Reading a fault request's fields, with errors that name the field. Shared by the protocol and
every agent fault kind, whose parameters are declared once (`Param`, in the kind's module): the
node agent checks a request by the declaration, with no dependency, and the toolkit's JSON Schema
and docs are made from the same declaration (chaos.schemas), so the two cannot disagree."""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass
from typing import Any


class FaultError(ValueError):
    """Bad fault request; `field` names the offending field, `status` the HTTP status to answer."""

    def __init__(self, field_name: str, message: str, status: int = 400) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.status = status


def only(params: dict[str, Any], *names: str) -> None:
    """Refuse parameters the kind does not know (a typo must not be silently ignored)."""
    unknown = sorted(set(params) - set(names))
    if unknown:
        expected = f"expected {', '.join(names)}" if names else "this kind takes none"
        raise FaultError(f"params.{unknown[0]}", f"unknown parameter; {expected}")


@dataclass(frozen=True)
class Param:
    """One parameter of an agent kind, declared once. `type`: number, integer, choice (one of
    `choices`), text (matching `pattern`, described by `description`), cidrs (a list of CIDRs) or
    ports (a list of ports 1-65535). `needed_by`: required once that other parameter is a
    non-empty list (the ports' protocol). `why`: said before a choice's expected values. texts: a
    non-empty list of strings, each matching `pattern` (registry names)."""

    type: str
    description: str
    low: float = 0
    high: float = 0
    choices: tuple[str, ...] = ()
    pattern: str = ""
    required: bool = False
    default: Any = None
    example: Any = None
    needed_by: str = ""
    why: str = ""

    def check(self, params: dict[str, Any], name: str) -> None:
        where = f"params.{name}"
        if name not in params:
            if self.required:
                raise FaultError(where, "required")
            if self.needed_by and params.get(self.needed_by):
                raise FaultError(where, f"{self.needed_by} need a {name}: {_either(self.choices)}")
            return
        value = params[name]
        if self.type in ("number", "integer"):
            whole = self.type == "integer"
            if (isinstance(value, bool) or not isinstance(value, int if whole else (int, float))
                    or math.isnan(value) or not self.low <= value <= self.high):
                bounds = f"from {int(self.low)} to {int(self.high)}" if whole else f"from {self.low:g} to {self.high:g}"
                raise FaultError(where, f"expected {'an integer' if whole else 'a number'} {bounds}, got {value!r}")
        elif self.type == "choice":
            if value not in self.choices:
                said = f"{self.why}: " if self.why else ""
                raise FaultError(where, f"{said}expected {_either(self.choices)}, got {value!r}")
        elif self.type == "text":
            if not isinstance(value, str) or not re.fullmatch(self.pattern, value):
                raise FaultError(where, f"expected {self.description}, got {value!r}")
        elif self.type == "texts":
            if not isinstance(value, list) or not value:
                raise FaultError(where, f"expected a non-empty list of {self.description}, got {value!r}")
            for v in value:
                if not isinstance(v, str) or not re.fullmatch(self.pattern, v):
                    raise FaultError(where, f"not one of {self.description}: {v!r}")
        elif self.type == "cidrs":
            if not isinstance(value, list):
                raise FaultError(where, f"expected a list of CIDRs, got {value!r}")
            for c in value:
                try:
                    ipaddress.ip_network(c, strict=False)
                except (TypeError, ValueError):
                    raise FaultError(where, f"not a CIDR: {c!r}") from None
        elif not isinstance(value, list) or not all(isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536
                                                    for p in value):
            raise FaultError(where, f"expected a list of ports 1-65535, got {value!r}")

    def schema(self) -> dict[str, Any]:
        """The parameter as JSON Schema (the toolkit validates experiments with it)."""
        found: dict[str, Any] = {
            "number": {"type": "number", "minimum": self.low, "maximum": self.high},
            "integer": {"type": "integer", "minimum": self.low, "maximum": self.high},
            "choice": {"enum": list(self.choices)},
            "text": {"type": "string", "pattern": f"^(?:{self.pattern})$"},
            "texts": {"type": "array", "minItems": 1,
                      "items": {"type": "string", "pattern": f"^(?:{self.pattern})$"}},
            "cidrs": {"type": "array", "items": {"type": "string", "format": "cidr"}},
            "ports": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 65535}},
        }[self.type]
        found["description"] = self.description
        if self.default is not None:
            found["default"] = self.default
        if self.example is not None:
            found["examples"] = [self.example]
        return found


def _either(choices: tuple[str, ...]) -> str:
    return " or ".join(repr(c) for c in choices)


def check(params: dict[str, Any], declared: dict[str, Param]) -> dict[str, Any]:
    """A request's parameters by the kind's declaration: unknown names refused, each checked."""
    only(params, *declared)
    for name, param in declared.items():
        param.check(params, name)
    return params


SPEED = Param("number", "how fast the sick card still runs (1: full speed)", 0, 1, example=0.5)
# Optional destination scoping of nftables faults.
SCOPE = {
    "cidrs": Param("cidrs", "only traffic to these destinations (default: all)", example=["10.0.0.0/8"]),
    "ports": Param("ports", "only traffic to these ports (needs a protocol)", example=[8000]),
    "protocol": Param("choice", "the ports' protocol", choices=("tcp", "udp"), needed_by="ports"),
}
