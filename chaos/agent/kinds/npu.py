"""npu-fault (the agent path of the toolkit kind npu-fault): a fault code on one Ascend NPU chip.

    params   code: the fault code (hex as DCMI reports it, or ClusterD's 9 digits), level: the device
             plugin's handling level (SeparateNPU), type chip|network (chip), speed 0..1: how fast the
             sick chip still runs (0.5 for chip faults at a level the plugin isolates, else 1)
    apply    network: hccn_tool -i <chip> -link -s down (MindCluster's own recipe for a parameter-plane
             link fault); chip: refused, as no tool injects a chip fault into DCMI on a real node
             (use the ClusterD path: npu-fault via clusterd)
    revert   network: hccn_tool -i <chip> -cfg recovery
On the testbed the fleet simulator plays the chip, the device plugin and npu-exporter.
"""

from __future__ import annotations

from typing import Any

from chaos import mindx
from chaos.agent import schema
from chaos.agent.kinds import ecc

NAME, FAULT, TARGET, SLOT, REFRESH = "npu-fault", None, "card", None, False
TYPES = ("chip", "network")


PARAMS = {
    "code": schema.Param("text", "a fault code of 1-16 upper-case hex digits", pattern="[0-9A-F]{1,16}", required=True),
    "level": schema.Param("choice", "the fault's handling level", choices=mindx.LEVELS, default="SeparateNPU"),
    "type": schema.Param("choice", "a chip's fault or its network's", choices=TYPES, default=TYPES[0]),
    "speed": schema.SPEED,
}


def unhealthy(p: dict[str, Any]) -> bool:
    """Does the device plugin report the chip Unhealthy (allocatable drops by one)?"""
    return p.get("level", "SeparateNPU") not in mindx.HEALTHY_LEVELS


def default_speed(p: dict[str, Any]) -> float:
    return ecc.DEFAULT_SPEED if p.get("type", "chip") == "chip" and unhealthy(p) else 1.0


def apply(fault: Any, host: Any) -> None:
    host.npu_link(fault, down=True)


def revert(fault: Any, host: Any) -> None:
    host.npu_link(fault, down=False)
