"""The simulation's worst hour as an incident timeline `kilocard replay` plays: its failures as the
catalog's faults at their offsets, its SLO breaches as the symptoms to reproduce, every time
divided by `compress` (the testbed's timing runs production's ten times faster), and the
observed SLO-minutes of the replay read back to set beside the simulated ones.

    failure class (effect)     fault
    gpu (node)                 gpu-ecc, double-bit, on the card drawn: the platform's remediation
                               quarantines and drains the node, as the recoveries were measured
    host, network (node)       node-kubelet-stop: the node is lost to the control plane
    any (card)                 card-isolate of the card drawn
    engine (replica)           pod-kill of the replica's pods, at once

The failures that begin in the hour are replayed (one repaired after it ends lasts the hour).
The replay starts from the cluster as it is, not as the month had left it by that hour: a part
that failed before the hour and is still under repair is not replayed (on the cluster, its
fault would drive off the replicas the month had moved away long before), and is named in the
description.
"""

from __future__ import annotations

from typing import Any

from probes import slo

MIN_FAULT_SECONDS = 1.0


def fault_of(f: dict[str, Any], effect: str, ttl: float) -> list[dict[str, Any]]:
    """The faults that replay one failure (an entry of the worst hour's `faults`)."""
    if effect == "replica":
        return [{"kind": "pod-kill", "namespace": pod.split("/", 1)[0], "field_selector":
                 f"metadata.name={pod.split('/', 1)[1]}", "grace_seconds": 0, "allow_empty": True} for pod in f["pods"]]
    if effect == "card":
        return [{"kind": "card-isolate", "nodes": [f["node"]], "card": f["card"], "ttl_seconds": ttl}]
    if f["class"] == "gpu":
        return [{"kind": "gpu-ecc", "nodes": [f["node"]], "card": f["card"], "params": {"type": "dbe"},
                 "ttl_seconds": ttl}]
    return [{"kind": "node-kubelet-stop", "nodes": [f["node"]], "ttl_seconds": ttl}]


def incident(hour: dict[str, Any], effects: dict[str, str], thresholds: dict[str, float], compress: float,
             tolerance: float = 15.0) -> dict[str, Any]:
    """The timeline file (as plain data) that replays `hour` (outcome.worst_hour's) compressed;
    `effects` by class, `thresholds` (the SLO's P95 TTFT) by namespace/model."""
    faults = []
    before = [f for f in hour["faults"] if f["at"] < 0]
    for f in (f for f in hour["faults"] if f["at"] >= 0):
        at = f["from"] / compress
        span = max(MIN_FAULT_SECONDS, (f["to"] - f["from"]) / compress)
        for fault in fault_of(f, effects[f["class"]], round(span + 300, 1)):
            entry: dict[str, Any] = {"at": round(at, 1), "fault": fault,
                                     "note": f"{f['class']} on {f['node']}, {f['at'] / 60:+.1f} min into the hour"}
            if fault["kind"] != "pod-kill":
                entry["for"] = round(span, 1)
            faults.append(entry)
    first = min((e["at"] for e in faults), default=0.0)
    for e in faults:  # offsets count from the first fault, as a recorded incident's do
        e["at"] = round(e["at"] - first, 1)
    symptoms = [{"model": name.split("/", 1)[1], "namespace": name.split("/", 1)[0], "indicator": "ttft_p95",
                 "threshold": thresholds[name], "window": "10s",
                 "breached_at": round(max(0.0, a / compress - first), 1),
                 "recovered_at": round(max(0.0, b / compress - first), 1)}
                for name, spans in hour["breaches"].items() for a, b in spans]
    return {"title": f"kilocard rehearse: the worst hour (month {hour['month']}, from hour "
                     f"{hour['start_seconds'] / 3600:.0f}), {compress:g}x compressed",
            "description": f"{hour['slo_minutes']:g} SLO-minutes in the simulation "
                           f"({', '.join(f'{k} {v:g}' for k, v in hour['models'].items())}). Not replayed, failed "
                           f"before the hour and still under repair: "
                           f"{', '.join(f['class'] + ' on ' + f['node'] for f in before) or 'none'}.",
            "source": {"from": "kilocard rehearse"},
            "faults": faults, "observe": round(3600 / compress - first, 1),
            "symptoms": {"tolerance": tolerance, "slo": symptoms}}


def observed_minutes(prom: Any, model: str, namespace: str, threshold: float, start: float, end: float,
                     compress: float, step: float = 2.0) -> float | None:
    """SLO-minutes the replay showed, in the simulation's time: the time the model's worst
    replica's P95 TTFT was over the threshold between `start` and `end` (epoch seconds), or no
    replica had a series (nothing served: silence is not health), times `compress`; None where
    every query failed."""
    ind = slo.indicator(prom, "ttft_p95", model, namespace, "10s")
    seen = [s for s in slo.history(prom, ind, start, end, step) if not s.error]
    if not seen:
        return None
    over = sum(1 for s in seen if (worst := s.worst()) is None or worst[1] > threshold)
    return over * step * compress / 60
