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
DESCRIPTION = ("Take cards out of service through the node agent (GPU drain): allocatable drops, the pod on the card "
               "ends.")
EVICTS = "cards"  # the process on a drained card ends


PARAMS: dict[str, schema.Param] = {}
EXAMPLE: dict[str, object] = {}


def apply(fault: Any, host: Any) -> None:
    host.drain(fault, "1")


def revert(fault: Any, host: Any) -> None:
    host.drain(fault, "0")
