"""Reference remediator: what a platform like NVIDIA's NVSentinel does with a fatal card error.

Loop, every `--interval` seconds:
  1. ask Prometheus for cards with volatile double-bit ECC errors or a critical XID
     (dcgm-exporter metrics, the same signal a production remediator alerts on), or on Ascend
     (`--accelerator ascend`) for chips npu-exporter reports unhealthy, and keep those that have
     been failing for `--for-seconds` (an alert's `for:`: a blip is not a verdict);
  2. at once (before that grace, as NVSentinel's monitors report before it quarantines), write
     the failing cards' health conditions on their nodes as its platform connector does
     (GpuMemWatch, SysLogsXIDError: status True, "ErrorCode:<code> GPU:<index> ...;"; False,
     "No Health Failures", once healthy);
  3. quarantine each such node not yet quarantined (nodes labelled
     `k8saas.nvidia.com/ManagedByNVSentinel=false` opt out): cordon, taint `nvidia.com/gpu-error=fatal:NoSchedule`,
     label `dgxc.nvidia.com/nvsentinel-state=quarantined` and its cordon-by/-reason/-timestamp
     labels (`k8saas.nvidia.com/`), annotate the health event, unless the
     circuit breaker is open (more than `--max-fraction` of the nodes already quarantined);
  4. drain quarantined nodes through the Eviction API (PodDisruptionBudgets are honoured: a 429
     is retried on the next round); when empty, label `drain-succeeded`;
  5. when a quarantined node's cards are healthy again (the card was reset), lift the quarantine
     (as after a successful reboot) and label `remediation-succeeded`;
  6. on NVIDIA, unless `--no-slow-cards`, a slow card counts as failing too: held back while serving
     by a power or thermal reason (dcgm-exporter's clock throttle reasons) for `--slow-for-seconds`
     (longer than a fatal error's grace: a slow card is a loss of speed, not of service), the
     slow card that looks healthy (the field account's day four): its node is quarantined and
     drained as for a fatal error, and released once the card runs free (no such reason, drained
     and idle or not: an idle card's clock proves nothing);
  7. on Ascend, as MindX DL's ClusterD and scheduler do: evict each pod holding a chip its node's
     device-info ConfigMap has listed as Unhealthy (separated by hand or by policy, or faulty) for
     `--for-seconds`, found by the chips the plugin annotated on it (`huawei.com/AscendReal`), so
     it is rescheduled on healthy chips; the node's other chips keep serving.
`python -m testbed.remediator --kubeconfig K --prometheus-url U`; SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from typing import Any

from prometheus_api_client import PrometheusConnect

from chaos import mindx
from chaos.errors import NotFound, TooManyRequests
from chaos.kube import Kube
from chaos.vocabulary import HOLDING_STATES, STATE_LABEL
from testbed.simulator import ascend, dcgm

EVENT_ANNOTATION = "kilocard.io/quarantine-event"
COMPONENT = "kilocard-remediator"  # the source of its Events (a postmortem reads them: kilocard record)
TAINT = {"key": "nvidia.com/gpu-error", "value": "fatal", "effect": "NoSchedule"}
OPT_OUT_LABEL = "k8saas.nvidia.com/ManagedByNVSentinel"  # "false": leave this node alone
# Per accelerator: the query for fatal cards, the labels naming the host, the card's label.
SIGNALS = {"nvidia": (dcgm.FATAL_QUERY, ("Hostname", "hostname"), "gpu"),
           "ascend": (ascend.FATAL_QUERY, ("node",), "id")}


def fatal_cards(prom: Any, accelerator: str = "nvidia", query: str | None = None) -> dict[str, list[str]]:
    """Node -> cards with a fatal error now (or what `query` finds, by the same labels)."""
    fatal, hosts, card = SIGNALS[accelerator]
    found: dict[str, list[str]] = {}
    for sample in prom.custom_query(query or fatal):
        labels = sample["metric"]
        host = next((labels[h] for h in hosts if labels.get(h)), None)
        if host:
            found.setdefault(host, []).append(labels[card])
    return found


CORDON_LABELS = ("k8saas.nvidia.com/cordon-by", "k8saas.nvidia.com/cordon-reason", "k8saas.nvidia.com/cordon-timestamp")


def health_conditions(prom: Any) -> dict[str, dict[str, str]]:
    """Node -> condition type -> message, for the cards failing now (NVIDIA only): a failure per
    card, in NVSentinel's message format."""
    found: dict[str, dict[str, list[str]]] = {}
    for query, check, code, text, action in dcgm.HEALTH_CHECKS:
        for sample in prom.custom_query(query):
            labels = sample["metric"]
            host = labels.get("Hostname") or labels.get("hostname")
            if host:
                failure = (f"ErrorCode:{code.format(**labels)} GPU:{labels['gpu']} {text.format(**labels)} "
                           f"Recommended Action={action};")
                found.setdefault(host, {}).setdefault(check, []).append(failure)
    return {node: {check: "".join(sorted(parts)) for check, parts in checks.items()} for node, checks in found.items()}


def _taints_but_ours(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The node's taints (plain JSON, `timeAdded` kept) without the remediator's own."""
    return [t for t in (node.get("spec") or {}).get("taints") or [] if t["key"] != TAINT["key"]]


class Remediator:
    def __init__(self, kube: Kube, prom: Any, max_fraction: float = 0.5,
                 for_seconds: float = 10.0, say: Any = print, accelerator: str = "nvidia",
                 slow_cards: bool = True, slow_for_seconds: float = 30.0) -> None:
        self.kube = kube
        self.slow_for_seconds = slow_for_seconds
        self.slow_cards = slow_cards and accelerator == "nvidia"
        self.slow: set[str] = set()  # nodes failing only by a slow card
        self.accelerator = accelerator
        self.prom = prom
        self.max_fraction = max_fraction
        self.for_seconds = for_seconds
        self.say = say
        self.failing_since: dict[str, float] = {}
        self.chips_since: dict[tuple[str, str], float] = {}  # Ascend: (node, chip) Unhealthy since
        self.reported: dict[str, dict[str, str]] = {}  # node -> the health conditions written on it

    def round(self) -> None:
        now = time.monotonic()
        failing = fatal_cards(self.prom, self.accelerator)
        slow = fatal_cards(self.prom, self.accelerator, dcgm.SLOW_QUERY) if self.slow_cards else {}
        held = set(fatal_cards(self.prom, self.accelerator, dcgm.HELD_QUERY)) if self.slow_cards else set()
        self.slow = set(slow) - set(failing)
        for node, cards in slow.items():
            failing.setdefault(node, []).extend(c for c in cards if c not in failing[node])
        if self.accelerator == "nvidia":
            self.report_health(health_conditions(self.prom))
        self.failing_since = {n: self.failing_since.get(n, now) for n in failing}
        fatal = {n: c for n, c in failing.items()
                 if now - self.failing_since[n] >= (self.slow_for_seconds if n in self.slow else self.for_seconds)}
        # Only the quarantined nodes each round (a selector: the apiserver filters); every node
        # only when a new one is to be quarantined (the circuit breaker counts them).
        quarantined = {n["metadata"]["name"]: n for n in self.kube.list_nodes_raw(
            f"{STATE_LABEL} in ({','.join(sorted(HOLDING_STATES))})")}
        if set(fatal) - set(quarantined):
            nodes = self.kube.list_nodes_raw()
            managed = {n["metadata"]["name"] for n in nodes if _labels(n).get(OPT_OUT_LABEL) != "false"}
            for name, cards in sorted(fatal.items()):
                if name in quarantined or name not in managed:
                    continue
                if (len(quarantined) + 1) > self.max_fraction * len(nodes):
                    self.say(f"circuit breaker open: {len(quarantined)}/{len(nodes)} nodes quarantined; "
                             f"not quarantining {name}")
                    continue
                self.quarantine(name, cards)
                quarantined[name] = self.kube.read_node_raw(name)
        for name, node in quarantined.items():
            if name not in failing and name not in held:
                self.release(node)
            else:
                self.drain(name)
        if self.accelerator == "ascend":
            self.reschedule_off_unhealthy_chips(quarantined)

    def report_health(self, now: dict[str, dict[str, str]]) -> None:
        """Write each node's health conditions when they change: unhealthy (True, the failures), and
        healthy again (False, "No Health Failures") once its checks pass."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for node in sorted(set(now) | set(self.reported)):
            was, checks = self.reported.get(node, {}), now.get(node, {})
            changed = [{"type": check, "status": "True", "reason": f"{check}IsNotHealthy", "message": message,
                        "lastTransitionTime": stamp, "lastHeartbeatTime": stamp}
                       for check, message in checks.items() if was.get(check) != message]
            changed += [{"type": check, "status": "False", "reason": f"{check}IsHealthy",
                         "message": "No Health Failures", "lastTransitionTime": stamp, "lastHeartbeatTime": stamp}
                        for check in was if check not in checks]
            if changed:
                try:
                    self.kube.patch_node_status(node, {"status": {"conditions": changed}})
                except NotFound:
                    pass  # a node gone: nothing to say on it
            if checks:
                self.reported[node] = checks
            else:
                self.reported.pop(node, None)

    def reschedule_off_unhealthy_chips(self, quarantined: dict[str, dict[str, Any]]) -> None:
        now = time.monotonic()
        unhealthy: dict[str, set[str]] = {}
        for cm in self.kube.list_config_maps(mindx.DEVICE_INFO_NAMESPACE, f"{mindx.DEVICE_INFO_LABEL}=true"):
            try:
                listed = mindx.device_list_of((cm.get("data") or {}).get(mindx.DEVICE_INFO_KEY) or "")
            except ValueError:
                continue  # garbled: ClusterD would not trust it either
            unhealthy[cm["metadata"]["name"].removeprefix(mindx.DEVICE_INFO_PREFIX)] = {
                chip for key in listed if key.endswith("-Unhealthy") for chip in mindx.separated(listed[key])}
        self.chips_since = {(n, c): self.chips_since.get((n, c), now) for n, chips in unhealthy.items() for c in chips}
        for node, chips in unhealthy.items():
            bad = {c for c in chips if now - self.chips_since[(node, c)] >= self.for_seconds}
            if not bad or node in quarantined:  # a quarantined node is drained whole
                continue
            try:
                labels = _labels(self.kube.read_node_raw(node))
            except NotFound:
                continue  # a ConfigMap its plugin left behind for a node that is gone
            if labels.get(OPT_OUT_LABEL) == "false":
                continue
            for pod in self.kube.list_pods_raw(field_selector=f"spec.nodeName={node}"):
                held = set(mindx.separated((pod["metadata"].get("annotations") or {}).get(mindx.POD_CHIPS_ANNOTATION)))
                if held & bad and not pod["metadata"].get("deletionTimestamp"):
                    self.evict(pod, f"chips {', '.join(sorted(held & bad))} of {node} are unhealthy")

    def evict(self, pod: dict[str, Any], why: str) -> bool:
        """Evict through the Eviction API; False when a PodDisruptionBudget says not now."""
        meta = pod["metadata"]
        try:
            self.kube.evict_pod(meta["namespace"], meta["name"])
            self.kube.record_event("Pod", meta["name"], meta["namespace"], "Evicted", f"evicted: {why}",
                                   COMPONENT, meta["uid"])
            self.say(f"evicted {meta['namespace']}/{meta['name']}: {why}")
        except TooManyRequests:
            return False
        except NotFound:
            pass
        return True

    def quarantine(self, name: str, cards: list[str]) -> None:
        now = time.gmtime()
        reason = "slow card" if name in self.slow else "fatal card error"
        event = {"reason": reason, "cards": cards, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", now)}
        cordon = dict(zip(CORDON_LABELS, (COMPONENT, reason.replace(" ", "-"),
                                          time.strftime("%Y-%m-%dT%H-%M-%SZ", now)), strict=True))
        # Read-modify-write with the node's resourceVersion: a taint someone adds meanwhile stays.
        self.kube.update_node(name, lambda node: {
            "spec": {"unschedulable": True, "taints": _taints_but_ours(node) + [TAINT]},
            "metadata": {"labels": {STATE_LABEL: "quarantined", **cordon},
                         "annotations": {EVENT_ANNOTATION: json.dumps(event)}},
        })
        self.kube.record_event("Node", name, "default", "Quarantined", f"{reason} on cards {', '.join(cards)}: "
                               "cordoned, tainted, to be drained", COMPONENT)
        self.say(f"quarantined {name} (cards {', '.join(cards)})")

    def drain(self, name: str) -> None:
        left = 0
        for pod in self.kube.list_pods_raw(field_selector=f"spec.nodeName={name}"):
            if not pod["metadata"].get("deletionTimestamp") and not self.evict(pod, f"node {name} is quarantined"):
                left += 1  # a PodDisruptionBudget says not now: next round
        state = "drain-succeeded" if not left else "draining"
        self.kube.patch_node(name, {"metadata": {"labels": {STATE_LABEL: state}}})

    def release(self, node: dict[str, Any]) -> None:
        """As NVSentinel after a successful remediation: uncordon and lift its own taint."""
        name = node["metadata"]["name"]
        self.kube.update_node(name, lambda current: {
            "spec": {"unschedulable": False, "taints": _taints_but_ours(current)},
            "metadata": {"labels": {STATE_LABEL: "remediation-succeeded", **dict.fromkeys(CORDON_LABELS)},
                         "annotations": {EVENT_ANNOTATION: None}},
        })
        self.say(f"released {name}: its cards are healthy again")


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return obj["metadata"].get("labels") or {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.remediator")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--prometheus-url", required=True)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--max-fraction", type=float, default=0.5)
    parser.add_argument("--for-seconds", type=float, default=10.0)
    parser.add_argument("--accelerator", choices=sorted(SIGNALS), default="nvidia")
    parser.add_argument("--no-slow-cards", action="store_true", help="quarantine fatal card errors only")
    parser.add_argument("--slow-for-seconds", type=float, default=30.0)
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    remediator = Remediator(Kube.from_kubeconfig(args.kubeconfig), PrometheusConnect(args.prometheus_url),
                            args.max_fraction, args.for_seconds, say=lambda m: print(f"remediator: {m}", flush=True),
                            accelerator=args.accelerator, slow_cards=not args.no_slow_cards,
                            slow_for_seconds=args.slow_for_seconds)
    while not stop.wait(args.interval):
        try:
            remediator.round()
        except Exception as exc:  # noqa: BLE001 - Prometheus or the apiserver away: next round
            print(f"remediator: round failed: {exc}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
