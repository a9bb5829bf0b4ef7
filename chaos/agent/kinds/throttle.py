"""throttle (toolkit kind gpu-throttle): the slow card that looks healthy. The card keeps serving,
every health check stays green, and its TP group runs at its pace.

    params   fraction 0.05..1: the share of its speed the card keeps (0.6); via power|clocks (power):
             cap its power limit at `fraction` of its default limit (never under the card's
             minimum), or lock its graphics clocks at `fraction` of its maximum; ramp_seconds
             0..3600 (0): from full speed down to `fraction` over this long, a heat soak's story
             (re-applied while active, each step lower)
    apply    NVML (nvidia-ml-py): power: the limit in force read first and kept with the fault,
             then nvmlDeviceSetPowerManagementLimit; clocks: nvmlDeviceSetGpuLockedClocks(min, cap)
    revert   power: the limit read before restored exactly; clocks: nvmlDeviceResetGpuLockedClocks
             (NVML cannot read a lock another tool set: where one does, use via: power)
    observe  confirmed when the card's power limit (or its graphics clock, under load) is at most
             the cap, with NVML's clock event reasons; mismatch when the limit is above it
    refused  an Ascend NPU's node has no NVML: 501 (no vendor tool caps an NPU's clocks or power
             from a node agent that kilocard knows of)
"""

from __future__ import annotations

import time
from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "throttle", "gpu-throttle", "card", "throttle", True
DESCRIPTION = ("A card slowed while every health check stays green: its power capped or its clocks locked "
               "through NVML, optionally ramped down over minutes; undone exactly.")
DEFAULT_FRACTION = 0.6
VIA = ("power", "clocks")

PARAMS = {
    "fraction": schema.Param("number", "the share of its speed the card keeps", 0.05, 1, default=DEFAULT_FRACTION),
    "via": schema.Param("choice", "what is capped: the card's power limit or its graphics clocks", choices=VIA,
                        default=VIA[0]),
    "ramp_seconds": schema.Param("number", "from full speed down to fraction over this long (0: at once)", 0, 3600,
                                 default=0),
}
EXAMPLE = {"fraction": 0.6, "via": "power", "ramp_seconds": 120}


def fraction_at(params: dict[str, Any], since: float) -> float:
    """The share of its speed the card keeps `since` seconds after the fault began: linear from 1
    down to `fraction` over `ramp_seconds`, then `fraction`."""
    floor = float(params.get("fraction", DEFAULT_FRACTION))
    ramp = float(params.get("ramp_seconds", 0))
    if ramp <= 0 or since >= ramp:
        return floor
    return 1.0 - (1.0 - floor) * max(0.0, since) / ramp


def apply(fault: Any, host: Any) -> None:
    host.nvml_throttle(fault, fraction_at(fault.params, time.time() - fault.created_at))


def revert(fault: Any, host: Any) -> None:
    host.nvml_unthrottle(fault)


def observe(fault: Any, host: Any) -> tuple[str, str]:
    # A ramp is re-applied twice a second: the cap in force may be up to a second behind it.
    return host.nvml_throttled(fault, fraction_at(fault.params, time.time() - fault.created_at - 1.0))
