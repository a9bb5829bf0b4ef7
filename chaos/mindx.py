"""Huawei MindX DL's cluster-facing formats for Ascend NPUs, as its public sources define them
(docs/research/ascend-sources.md names each file): the Ascend device plugin's per-node
device-info ConfigMap and ClusterD's public-fault ConfigMap. Pure data in, data out: the
npu-isolate and npu-fault kinds write these, the testbed's fake device plugin and fake ClusterD
read them, and nothing here talks to a cluster.

Device info: ConfigMap `kube-system/mindx-dl-deviceinfo-<node>`, label `mx-consumer-cim=true`
(ClusterD's informer selects on it), key `DeviceInfoCfg`:

    {"DeviceInfo": {"DeviceList": {"huawei.com/Ascend910": "Ascend910-0,...", "<resource>-Unhealthy": ...,
                                   "<resource>-NetworkUnhealthy": ..., "<resource>-Fault": "[...]"},
                    "UpdateTime": <unix s>},
     "SuperPodID": -1, "ServerIndex": -1, "CheckCode": sha256 of DeviceInfo as Go's json.Marshal writes it}

and key `ManuallySeparateNPU`: chip names an operator (or policy) took out of service.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

DEVICE_INFO_NAMESPACE = "kube-system"
DEVICE_INFO_PREFIX = "mindx-dl-deviceinfo-"
DEVICE_INFO_LABEL = "mx-consumer-cim"
DEVICE_INFO_KEY = "DeviceInfoCfg"
SEPARATED_KEY = "ManuallySeparateNPU"
PUBLIC_FAULT_LABEL = "mc-consumer-publicfault"
PUBLIC_FAULT_KEY = "PublicFault"
POD_CHIPS_ANNOTATION = "huawei.com/AscendReal"  # the chips the plugin mounted into a pod, e.g. Ascend910-0,...
CLUSTERD_NAMESPACE = "mindx-dl"
CLUSTERD_SERVICE = "clusterd-grpc-svc"  # where ClusterD runs, its gRPC service (port 8899)
PUBLIC_FAULT_TYPES = ("NPU", "Node", "Network")
ASSERTIONS = ("occur", "recover", "once")
# The device plugin's fault handling levels, least to most serious (fault_code.go).
LEVELS = ("NotHandleFault", "SubHealthFault", "RestartRequest", "RestartBusiness", "FreeRestartNPU",
          "RestartNPU", "PreSeparateNPU", "SeparateNPU", "ManuallySeparateNPU")
HEALTHY_LEVELS = ("NotHandleFault", "SubHealthFault")  # the plugin still reports such a chip Healthy
# ClusterD's default publicFaultConfiguration.json: a code it does not list is discarded.
PUBLIC_SEPARATE_CODES = tuple(f"2200010{i:02d}" for i in range(1, 8)) + (
    "120001001", "120001002", "120001003", "020001001", "020001003", "020001004")
PUBLIC_PRESEPARATE_CODES = ("110001022", "110001023")
# ... and its default publicFaultResource: who may report a public fault.
PUBLIC_REPORTERS = ("CCAE", "fd-online", "pingmesh", "Netmind", "dpcStorage", "dtfsStorage")


def device_info_name(node: str) -> str:
    return f"{DEVICE_INFO_PREFIX}{node}"


def chip_type(card_resource: str) -> str:
    """`huawei.com/Ascend910` -> `Ascend910`: the prefix of the resource's chip names."""
    return card_resource.split("/", 1)[-1]


def chip_name(card_resource: str, index: int) -> str:
    return f"{chip_type(card_resource)}-{index}"


def chip_index(name: str) -> int | None:
    """The physical id after the last '-' (`Ascend910-3` -> 3), as the plugin parses it."""
    head, _, tail = name.strip().rpartition("-")
    return int(tail) if head and tail.isdigit() else None


def separated(text: str | None) -> list[str]:
    """The chip names in a `ManuallySeparateNPU` value, in order ("" and None: none)."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def go_json(value: Any) -> str:
    """What Go's encoding/json writes: compact, map keys sorted (the callers build structs in field
    order), `<`, `>`, `&` and U+2028/9 escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                         ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def check_code(device_info: dict[str, Any]) -> str:
    return hashlib.sha256(go_json(device_info).encode()).hexdigest()


@dataclass(frozen=True)
class ChipFault:
    """One chip's entry in `<resource>-Fault` (the plugin's DeviceFault)."""

    npu_name: str
    level: str
    codes: tuple[str, ...]  # upper-case hex without 0x, as DCMI reports them
    fault_type: str = "CardUnhealthy"  # or CardNetworkUnhealthy, NodeUnhealthy
    times_ms: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"fault_type": self.fault_type, "npu_name": self.npu_name, "large_model_fault_level": self.level,
                "fault_level": self.level, "fault_handling": self.level, "fault_code": ",".join(self.codes),
                "fault_time_and_level_map": {code: {"fault_time": at, "fault_level": self.level}
                                             for code, at in zip(self.codes, self.times_ms, strict=False)}}


@dataclass(frozen=True)
class DeviceInfo:
    """What one node's plugin reports: chips by state, and their faults."""

    card_resource: str
    healthy: tuple[str, ...]
    unhealthy: tuple[str, ...] = ()
    network_unhealthy: tuple[str, ...] = ()
    faults: tuple[ChipFault, ...] = field(default=())

    def device_list(self) -> dict[str, str]:
        r = self.card_resource
        listed = {r: ",".join(self.healthy), f"{r}-Unhealthy": ",".join(self.unhealthy),
                  f"{r}-NetworkUnhealthy": ",".join(self.network_unhealthy), f"{r}-Recovering": "",
                  f"{r}-Fault": go_json([f.to_json() for f in self.faults])}
        return dict(sorted(listed.items()))

    def render(self, update_time: int, super_pod_id: int = -1, server_index: int = -1) -> str:
        """The `DeviceInfoCfg` value, its CheckCode computed as the plugin computes it."""
        info = {"DeviceList": self.device_list(), "UpdateTime": int(update_time)}
        return go_json({"DeviceInfo": info, "SuperPodID": super_pod_id, "ServerIndex": server_index,
                        "CheckCode": check_code(info)})


def parse_device_info(text: str) -> dict[str, Any]:
    """A `DeviceInfoCfg` value as data; ValueError when it is not JSON of that shape."""
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("DeviceInfo"), dict):
        raise ValueError("no DeviceInfo object")
    return data


def valid(text: str) -> bool:
    """Does the CheckCode match its DeviceInfo (what ClusterD checks before trusting a ConfigMap)?"""
    try:
        data = parse_device_info(text)
    except ValueError:
        return False
    return data.get("CheckCode") == check_code(data["DeviceInfo"])


def device_list_of(text: str) -> dict[str, str]:
    return dict(parse_device_info(text)["DeviceInfo"].get("DeviceList") or {})


def listed(device_list: dict[str, str], card_resource: str, suffix: str = "") -> list[str]:
    """The chip names under `<resource><suffix>` ("" healthy, "-Unhealthy", "-NetworkUnhealthy")."""
    return separated(device_list.get(f"{card_resource}{suffix}"))


def public_fault(message_id: str, timestamp_ms: int, faults: list[dict[str, Any]], resource: str = "CCAE"
                 ) -> str:
    """A `PublicFault` value (ClusterD's public fault API, version 1.0)."""
    return go_json({"id": message_id, "timestamp": timestamp_ms, "version": "1.0", "resource": resource,
                    "faults": faults})


def npu_public_fault(fault_id: str, fault_type: str, code: str, at_ms: int, assertion: str,
                     influence: list[tuple[str, list[int]]], description: str) -> dict[str, Any]:
    """One entry of a public fault's `faults`: which chips (`deviceIds`) of which nodes."""
    return {"faultId": fault_id, "faultType": fault_type, "faultCode": code, "faultTime": at_ms,
            "assertion": assertion,
            "influence": [{"nodeName": node, "deviceIds": list(devices)} for node, devices in influence],
            "description": description}


def public_level(code: str) -> str | None:
    """The level ClusterD's default configuration gives a public fault code (None: not listed)."""
    if code in PUBLIC_SEPARATE_CODES:
        return "SeparateNPU"
    if code in PUBLIC_PRESEPARATE_CODES:
        return "PreSeparateNPU"
    return None
