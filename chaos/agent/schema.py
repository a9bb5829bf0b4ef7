"""Reading a fault request's fields, with errors that name the field. Shared by the protocol and
every agent fault kind's parameter schema (chaos.agent.kinds)."""

from __future__ import annotations

import ipaddress
import math
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


def number(params: dict[str, Any], name: str, low: float, high: float, required: bool,
           default: float | None = None) -> float | None:
    if name not in params:
        if required:
            raise FaultError(f"params.{name}", "required")
        return default
    value = params[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not low <= value <= high:
        raise FaultError(f"params.{name}", f"expected a number from {low:g} to {high:g}, got {value!r}")
    return float(value)


def integer(params: dict[str, Any], name: str, low: int, high: int, default: int) -> int:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise FaultError(f"params.{name}", f"expected an integer from {low} to {high}, got {value!r}")
    return value


def choice(params: dict[str, Any], name: str, choices: tuple[str, ...]) -> str:
    value = params.get(name, choices[0])
    if value not in choices:
        raise FaultError(f"params.{name}", f"expected {' or '.join(repr(c) for c in choices)}, got {value!r}")
    return str(value)


def scope(params: dict[str, Any]) -> None:
    """Optional destination scoping of nftables faults: CIDRs, ports, protocol."""
    cidrs = params.get("cidrs", [])
    if not isinstance(cidrs, list):
        raise FaultError("params.cidrs", f"expected a list of CIDRs, got {cidrs!r}")
    for c in cidrs:
        try:
            ipaddress.ip_network(c, strict=False)
        except (TypeError, ValueError):
            raise FaultError("params.cidrs", f"not a CIDR: {c!r}") from None
    ports = params.get("ports", [])
    if not isinstance(ports, list) or not all(isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536
                                              for p in ports):
        raise FaultError("params.ports", f"expected a list of ports 1-65535, got {ports!r}")
    if ports and params.get("protocol") not in ("tcp", "udp"):
        raise FaultError("params.protocol", "ports need a protocol: 'tcp' or 'udp'")
    if "protocol" in params and params["protocol"] not in ("tcp", "udp"):
        raise FaultError("params.protocol", f"expected 'tcp' or 'udp', got {params['protocol']!r}")


SCOPE = ("cidrs", "ports", "protocol")
