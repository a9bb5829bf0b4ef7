"""xid (toolkit kind gpu-xid): an XID error on one card (79: fallen off the bus).

    params   xid 1..1000 (required), speed 0..1 (1, or 0 for XID 79)
    apply    dcgmi test --inject of DCGM_FI_DEV_XID_ERRORS (230) = xid, re-injected while active
    revert   the field injected back to 0
"""

from __future__ import annotations

from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "xid", "gpu-xid", "card", None, True
DESCRIPTION = "An XID error on cards (79: fallen off the bus)."
FIELD = 230
OFF_THE_BUS = 79


PARAMS = {
    "xid": schema.Param("integer", "the XID (79: fallen off the bus)", 1, 1000, required=True, example=79),
    "speed": schema.SPEED,
}
EXAMPLE = {"xid": 79}


def default_speed(p: dict[str, Any]) -> float:
    return 0.0 if int(p["xid"]) == OFF_THE_BUS else 1.0


def apply(fault: Any, host: Any) -> None:
    host.dcgm_inject(fault, FIELD, int(fault.params["xid"]))


def revert(fault: Any, host: Any) -> None:
    host.dcgm_inject(fault, FIELD, 0)
