"""ecc (toolkit kind gpu-ecc): double- or single-bit ECC errors on one card.

    params   type dbe|sbe (dbe), count 1..10^6 (1), speed 0..1: how fast the sick card still runs
             (0.5; the fleet simulator slows the card's TP group to it)
    apply    dcgmi test --inject of DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (311) or _SBE_ (310) = count,
             re-injected while active (the next real sample overwrites an injected one)
    revert   the same field injected back to 0
"""

from __future__ import annotations

from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "ecc", "gpu-ecc", "card", None, True
DESCRIPTION = "Double- or single-bit ECC errors on cards (DCGM injection, re-injected while active)."
FIELDS = {"dbe": 311, "sbe": 310}
DEFAULT_SPEED = 0.5


PARAMS = {
    "type": schema.Param("choice", "double- or single-bit errors", choices=("dbe", "sbe"), default="dbe"),
    "count": schema.Param("integer", "the error count injected", 1, 10**6, default=1),
    "speed": schema.SPEED,
}
EXAMPLE = {"type": "dbe", "count": 4, "speed": 0.5}


def apply(fault: Any, host: Any) -> None:
    host.dcgm_inject(fault, FIELDS[fault.params.get("type", "dbe")], int(fault.params.get("count", 1)))


def revert(fault: Any, host: Any) -> None:
    host.dcgm_inject(fault, FIELDS[fault.params.get("type", "dbe")], 0)
