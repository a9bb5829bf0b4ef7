"""Each fault of a run as Kubernetes Events on what it hit, where `kubectl describe` and every cluster
dashboard already look: KilocardFaultApplied when the ledger says applied, KilocardFaultReverted
when reverted, KilocardFaultFailed (a Warning) when it failed, on the pod (in its namespace) or the
node a fault targets (a node's Events in default, as the kubelet's); a fault aimed at neither (a
NetworkPolicy partition of a namespace) has none. Told from the announcer's thread
(chaos.announce): an apiserver that refuses loses the Event, never the run; the journal counts them
(`kilocard.events`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.announce import Announcer, describe
from chaos.events import Event

if TYPE_CHECKING:
    from chaos.kube import Kube

COMPONENT = "kilocard"
REASONS = {"applied": ("KilocardFaultApplied", "Normal"), "reverted": ("KilocardFaultReverted", "Normal"),
           "failed": ("KilocardFaultFailed", "Warning")}


def involved(target: dict[str, Any]) -> tuple[str, str, str, str | None] | None:
    """(kind, name, namespace, uid) of the object an Event about this target belongs to."""
    if target.get("name") and target.get("namespace") and target.get("uid"):
        return "Pod", str(target["name"]), str(target["namespace"]), str(target["uid"])
    if target.get("node"):
        return "Node", str(target["node"]), "default", None  # a node's Events live in default
    return None


class FaultEvents:
    """The run's fault transitions as Events on their targets (see the module's doc)."""

    def __init__(self, kube: Kube, run_id: str) -> None:
        self.kube, self.run_id = kube, run_id
        self._announcer = Announcer(run_id, self._record, "events")

    def start(self) -> FaultEvents:
        self._announcer.start()
        return self

    def stop(self) -> dict[str, Any]:
        return self._announcer.stop()

    def _record(self, event: Event) -> int:
        reason = REASONS.get(str(event.get("state")))
        target = event.get("target") or {}
        on = involved(target)
        if reason is None or on is None:
            return 0
        kind, name, namespace, uid = on
        what = f"{event['kind']} on {describe(target)}"
        message = {"applied": f"{what} applied by kilocard run {self.run_id}",
                   "reverted": f"{what} reverted by kilocard run {self.run_id}",
                   "failed": f"{what} failed in kilocard run {self.run_id}: {event.get('error') or 'no reason given'}"}
        self.kube.record_event(kind, name, namespace, reason[0], message[str(event["state"])], COMPONENT, uid,
                               event_type=reason[1])
        return 1
