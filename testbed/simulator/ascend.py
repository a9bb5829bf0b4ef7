"""The Ascend side of the fleet simulator, in MindX DL's formats (chaos.mindx): the device plugin,
ClusterD's public-fault intake, and npu-exporter.

- **Device plugin.** Each node's `kube-system/mindx-dl-deviceinfo-<node>` ConfigMap is written
  whenever what it reports changes: chips by state, their fault codes, UpdateTime and CheckCode.
  The chips under `ManuallySeparateNPU` are taken out of service (Unhealthy, allocatable down by
  one each), and the plugin's writes leave that key as it found it. The real plugin honours an
  addition only when it restarts (docs/research/ascend-sources.md); this one honours it at once,
  as a restarted plugin would. Like the real one it evicts nothing. It annotates each pod with
  the chips it mounted (`huawei.com/AscendReal`).
- **ClusterD's intake.** ConfigMaps labelled `mc-consumer-publicfault=true`, in any namespace:
  an NPU or Network fault whose code ClusterD's default configuration lists takes effect on its
  chips at `occur` and ends at `recover`; deleting the ConfigMap clears nothing, as in ClusterD.
  On the testbed a reported fault stands for a chip that really failed, so the simulator plays
  that chip (slower, Unhealthy to the plugin and npu-exporter).
- **npu-exporter.** Every chip's health, network health, error codes, HBM and utilisation, with
  the exporter's names and labels, plus `node`, the label a pod scrape's relabelling adds.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from chaos import mindx
from chaos.agent.protocol import MAX_TTL_SECONDS, FaultError
from chaos.errors import Conflict
from chaos.kube import Kube
from testbed.simulator.state import Card
from testbed.simulator.world import World

# A chip npu-exporter reports unhealthy: what the reference remediator and the testbed's alert act on.
FATAL_QUERY = "max by (node, id) (npu_chip_info_health_status == 0)"
PUBLIC_FAULT_RUN = "clusterd"  # the run id the intake's faults carry in the simulator's fault store
HBM_MB = 65536  # 64 GB per chip (Ascend 910B3)


def _worst(levels: list[str]) -> str:
    return max(levels, key=mindx.LEVELS.index)


def device_info(world: World, node: str) -> mindx.DeviceInfo:
    """What the node's plugin reports now (call with the world's lock held)."""
    r = world.card_resource
    out = world.out_of_service(node)
    chips = range(world.node_cards.get(node, 0))
    cards = {i: world.cards[(node, i)] for i in chips if (node, i) in world.cards}
    faults = []
    for i, card in sorted(cards.items()):
        if card.npu:
            entries = sorted(card.npu.values(), key=lambda e: e[3])
            kind = "CardUnhealthy" if any(t == "chip" for _c, _l, t, _a in entries) else "CardNetworkUnhealthy"
            faults.append(mindx.ChipFault(mindx.chip_name(r, i), _worst([lv for _c, lv, _t, _a in entries]),
                                          tuple(c for c, *_ in entries), kind, tuple(a for *_, a in entries)))
    return mindx.DeviceInfo(
        r, healthy=tuple(mindx.chip_name(r, i) for i in chips if i not in out),
        unhealthy=tuple(mindx.chip_name(r, i) for i in sorted(out)),
        network_unhealthy=tuple(mindx.chip_name(r, i) for i, c in sorted(cards.items()) if c.npu_unhealthy("network")),
        faults=tuple(faults))


def publish(kube: Kube, world: World, node: str, seen: dict[str, dict[str, str]]) -> None:
    """Write the node's device info if its device list changed (create the ConfigMap if missing)."""
    with world.lock:
        if node not in world.node_cards:
            return
        info = device_info(world, node)
    wanted = info.device_list()
    if seen.get(node) == wanted:
        return
    name = mindx.device_info_name(node)
    text = info.render(int(time.time()))

    def change(cm: dict[str, Any]) -> dict[str, Any] | None:
        current = (cm.get("data") or {}).get(mindx.DEVICE_INFO_KEY)
        try:
            if current and mindx.device_list_of(current) == wanted:
                return None
        except ValueError:
            pass  # not ours to understand: the plugin rewrites it
        return {"data": {mindx.DEVICE_INFO_KEY: text}}

    if node not in seen:  # as the plugin starts: create it, else (it is there) update it
        try:
            kube.create_config_map(mindx.DEVICE_INFO_NAMESPACE, {
                "metadata": {"name": name, "namespace": mindx.DEVICE_INFO_NAMESPACE,
                             "labels": {mindx.DEVICE_INFO_LABEL: "true"}},
                "data": {mindx.DEVICE_INFO_KEY: text, mindx.SEPARATED_KEY: ""}})
            seen[node] = wanted
            return
        except Conflict:
            pass
    kube.update_config_map(mindx.DEVICE_INFO_NAMESPACE, name, change)
    seen[node] = wanted


def _separated_chips(world: World, data: dict[str, str]) -> set[int]:
    prefix = mindx.chip_type(world.card_resource)
    chips = set()
    for name in mindx.separated(data.get(mindx.SEPARATED_KEY)):
        index = mindx.chip_index(name)
        if index is not None and name.rsplit("-", 1)[0] == prefix:
            chips.add(index)
    return chips


def follow_device_info(kube: Kube, world: World, seen: dict[str, dict[str, str]], stop: threading.Event) -> None:
    """Keep `world.separated` and what each ConfigMap last said (`seen`) current."""
    def take(cm: dict[str, Any], deleted: bool = False) -> None:
        name = cm["metadata"]["name"]
        if not name.startswith(mindx.DEVICE_INFO_PREFIX):
            return
        node = name[len(mindx.DEVICE_INFO_PREFIX):]
        data = cm.get("data") or {}
        try:
            if deleted:
                raise ValueError("deleted")
            seen[node] = mindx.device_list_of(data.get(mindx.DEVICE_INFO_KEY) or "")
        except ValueError:
            seen.pop(node, None)  # gone or garbled: the plugin writes it anew
            with world.lock:
                world.actions.append(("device-info", node, None))
        world.separate(node, set() if deleted else _separated_chips(world, data))

    for kind, obj in kube.events("configmaps", namespace=mindx.DEVICE_INFO_NAMESPACE,
                                 label_selector=f"{mindx.DEVICE_INFO_LABEL}=true", stop=stop, raw=True):
        for cm in obj if kind == "SYNC" else [obj]:
            take(cm, kind == "DELETED")


def follow_public_faults(kube: Kube, world: World, stop: threading.Event) -> None:
    """ClusterD's intake of public faults, in every namespace (what is in effect lives in the world,
    so a restarted watch does not apply a fault twice nor forget one)."""
    for kind, obj in kube.events("configmaps", label_selector=f"{mindx.PUBLIC_FAULT_LABEL}=true", stop=stop,
                                 raw=True):
        if kind == "DELETED":
            continue  # deleting the ConfigMap clears nothing: only a recover does
        for cm in obj if kind == "SYNC" else [obj]:
            text = (cm.get("data") or {}).get(mindx.PUBLIC_FAULT_KEY)
            try:
                take_public_fault(world, json.loads(text or ""))
            except (ValueError, KeyError, TypeError) as exc:
                meta = cm["metadata"]
                print(f"simulator: clusterd: public fault {meta['namespace']}/{meta['name']} discarded: {exc}",
                      file=sys.stderr, flush=True)


def take_public_fault(world: World, message: dict[str, Any]) -> None:
    held = world.public_faults
    for fault in message["faults"]:
        level = mindx.public_level(str(fault["faultCode"]))
        if fault["faultType"] not in ("NPU", "Network") or level is None:
            raise ValueError(f"fault {fault.get('faultId')}: type {fault['faultType']} code {fault['faultCode']} "
                             "is not one this intake acts on (NPU or Network, a code publicFaultCode lists)")
        for influence in fault["influence"]:
            node = influence["nodeName"]
            for chip in influence["deviceIds"]:
                key = (fault["faultId"], node, int(chip))
                if fault["assertion"] == "occur" and key not in held:
                    body = {"kind": "npu-fault", "target": {"card": int(chip)}, "ttl_seconds": MAX_TTL_SECONDS,
                            "run_id": PUBLIC_FAULT_RUN,
                            "params": {"code": str(fault["faultCode"]), "level": level,
                                       "type": "chip" if fault["faultType"] == "NPU" else "network"}}
                    try:
                        held[key] = world.add_fault(node, body).id
                    except FaultError as exc:
                        raise ValueError(f"node {node} chip {chip}: {exc}") from None
                elif fault["assertion"] == "recover" and key in held:
                    try:
                        world.delete_fault(node, held.pop(key))
                    except KeyError:
                        pass  # ended already (its node went away)


def _label(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _codes(card: Card) -> list[int]:
    """DCMI's codes as npu-exporter reports them: numbers, at most ten. A public fault's code is
    ClusterD's, not DCMI's, so it shows only as the chip's health."""
    hex_codes = [code for code, *_ in card.npu.values() if len(code) == 8]
    return [int(code, 16) for code in hex_codes][:10]


class NpuRenderer:
    """npu-exporter's text format for every chip of every live node."""

    def __init__(self, world: World) -> None:
        self.world = world

    def render(self) -> str:
        w = self.world
        series: dict[str, list[str]] = {}
        docs = {
            "npu_chip_info_health_status": "the npu health status: 1 healthy, 0 unhealthy",
            "npu_chip_info_network_status": "the npu network health status: 1 healthy, 0 unhealthy",
            "npu_chip_info_error_code": "the npu error code",
            "npu_chip_info_utilization": "the ai core utilization",
            "npu_chip_info_hbm_used_memory": "the npu hbm used memory (MB)",
            "npu_chip_info_hbm_total_memory": "the npu hbm total memory (MB)",
            "npu_chip_info_temperature": "the npu temperature",
            "npu_chip_info_power": "the npu power",
            "npu_chip_info_link_status": "the npu link status: 1 UP, 0 DOWN",
        }
        with w.lock:
            for (node, index), card in sorted(w.cards.items()):
                if node in w.lost:
                    continue  # a dead node's exporter is not scraped
                pod = w.pod_on_card(node, index)
                labels = {"id": str(index), "model_name": w.product, "vdie_id": card.uuid.removeprefix("GPU-").upper(),
                          "pcie_bus_info": f"0000:{0xC1 + index:02X}:00.0",
                          "namespace": pod.namespace if pod else "", "pod_name": pod.name if pod else "",
                          "container_name": "vllm" if pod else "", "node": node}
                text = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
                network_ok = not card.npu_unhealthy("network")
                values = {
                    "npu_chip_info_health_status": 0 if card.npu_unhealthy() else 1,
                    "npu_chip_info_network_status": 1 if network_ok else 0,
                    "npu_chip_info_utilization": round(100 * card.utilisation),
                    "npu_chip_info_hbm_used_memory": round(58000 * (card.utilisation > 0) + 3000),
                    "npu_chip_info_hbm_total_memory": HBM_MB,
                    "npu_chip_info_temperature": round(38 + 35 * card.utilisation),
                    "npu_chip_info_power": round(90 + 300 * card.utilisation * card.pace(), 1),
                    "npu_chip_info_link_status": 1 if network_ok else 0,
                }
                for name, value in values.items():
                    series.setdefault(name, []).append(f"{name}{{{text}}} {value}")
                for i, code in enumerate(_codes(card)):  # absent when the chip has no error
                    name = "npu_chip_info_error_code" + (f"_{i}" if i else "")
                    series.setdefault(name, []).append(f"{name}{{{text}}} {code}")
        lines = []
        for name, rows in series.items():
            base = name.rstrip("_0123456789") if name.startswith("npu_chip_info_error_code_") else name
            lines += [f"# HELP {name} {docs[base]}", f"# TYPE {name} gauge", *rows]
        return "\n".join(lines) + "\n"
