"""card-isolate: take one card out of service; allocatable drops by one, its pod's process ends.

    params   none
    apply    nvidia-smi drain -p <the card's PCI bus id> -m 1
    revert   nvidia-smi drain -p <bus id> -m 0
A card is isolated once: a second isolation of the same card (any run) is refused.
"""

from __future__ import annotations

from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "card-isolate", "card-isolate", "card", "drain", False
EVICTS = "cards"  # the process on a drained card ends


def params(p: dict[str, Any]) -> dict[str, Any]:
    schema.only(p)
    return p


def apply(fault: Any, host: Any) -> None:
    host.drain(fault, "1")


def revert(fault: Any, host: Any) -> None:
    host.drain(fault, "0")
