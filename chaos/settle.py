"""A fleet still starting is not judged as a fleet that fails.

Between two experiments of one `kilocard run`: the models the one before touched are whole
again before the next starts. Every TP group whole and Ready, as many pods as their workloads ask
for (probes.tp_groups.recovered), followed live (the pods' watch) up to a timeout, and then each
pod Ready long enough for its SLO series to cover a probe's window. A folder
run must not judge the next experiment against the wreckage of the last: S9 run right after S7
has killed every llama-3-70b replica finds them still starting, and its guard refuses it.

Before a run's method: a steady state not met while a model its failing probe names is still
starting (a pod not Ready, or one Ready for less than `seconds`: the replicas Ready first carried
the model's whole load, and their queues are still in the rate window) is looked at again until
it is met, the model is no longer starting, or `seconds` pass. Then the run judges it as always.
A model whose replicas have all served longer than that fails at the first look: a cluster whose
SLO is breached before the experiment is not waited for.

    pure:    touched (the models a journal's plan touched), starting (why named models are still starting)
    fetch:   settle (one watch per model, until whole or the timeout), before (the steady state
             looked at again while its models start)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from chaos.errors import KilocardError
from probes import budget, tp_groups
from probes import snapshot as snap
from probes.errors import ProbeError
from probes.verdict import Contract, Verdict

if TYPE_CHECKING:
    from chaos.kube import Kube


def touched(journal: dict[str, Any]) -> list[tuple[str, str]]:
    """(namespace, model) of each model the run's plan touched (its blast radius)."""
    radius = ((journal.get("kilocard") or {}).get("plan") or {}).get("blast_radius") or {}
    return sorted({(namespace, model) for name in radius.get("models") or [] if "/" in name
                   for namespace, model in [name.split("/", 1)]})


# A replica's SLO series cover a probe's window only once it has been Ready that long (a hung-group
# check over 20 s judges no replica Ready for less): the catalog's windows are 30 s at most.
READY_FOR = 30.0


def settle(kube: Kube, models: list[tuple[str, str]], timeout: float, card_resource: str | None = None,
           ready_for: float = READY_FOR) -> tuple[float, list[str]]:
    """(seconds it took, what had not settled when the timeout ran out: empty when all did). A
    model settles when it is whole (probes.tp_groups.recovered) and every pod of it has been Ready
    for `ready_for` s; one deadline for them all."""
    start = time.time()
    left = [why for namespace, model in models
            if (why := _unsettled(kube, namespace, model, start, timeout, card_resource, ready_for))]
    return time.time() - start, left


def _unsettled(kube: Kube, namespace: str, model: str, start: float, timeout: float, card_resource: str | None,
               ready_for: float) -> str | None:
    """Why the model has not settled `timeout` s after `start`; None once it has."""
    wanted = tp_groups.desired(kube, model, namespace)
    seen: list[snap.ClusterSnapshot] = []

    def whole(s: snap.ClusterSnapshot) -> Verdict:
        seen.append(s)
        return tp_groups.recovered(s, model, set(), namespace, wanted)

    deadline = start + timeout
    found = snap.moments(kube, card_resource, namespace, model, time.time(), deadline)
    verdict = budget.first_within(found, whole, start, timeout, "the settle began")
    if not verdict.ok:
        return f"{namespace}/{model}: {verdict.reason}"
    newest = max((p.ready_since or 0.0 for p in seen[-1].replicas(model, namespace)), default=0.0)
    if newest + ready_for > deadline:
        return f"{namespace}/{model}: whole, but a pod Ready for less than {ready_for:g} s when the timeout ran out"
    time.sleep(max(newest + ready_for - time.time(), 0.0))
    return None


CONTRACTS = (
    Contract(
        "the steady state before the method, while the fleet starts", "runner",
        asserts="a steady state not met is judged (the run fails) unless a model a failing probe names is still "
                "starting: a pod of it not Ready, or Ready for less than kilocard_settle_seconds (120 s); then the "
                "hypothesis is looked at again every 2 s until it is met, no model it names is starting, or "
                "kilocard_settle_seconds pass, and the run judges the last look as always",
        time_zero="the run's first look at its steady state, after its load started and before its method",
        interval="[time zero, time zero + kilocard_settle_seconds], a look every 2 s; each pod's Ready time "
                 "from the cluster",
        missing="a pod whose Ready time is not known is not starting; a probe that names no model, or a model "
                "with no pod, is not waited for",
        exceptions="a probe that raised is not waited for: the run judges it at once (probe raised); a cluster "
                   "that could not be read to tell is not waited for either",
        outcomes=(("met", "the steady state met, at once or after waiting (the journal's kilocard.settle says how "
                          "long and why)"),
                  ("not met", "the run fails its steady state; after a wait, its reason says how long it waited "
                              "and what was still starting")),
        judge=("chaos.settle.starting",)),
)


def starting(s: snap.ClusterSnapshot, models: Iterable[tuple[str | None, str]], now: float,
             young: float) -> list[str]:
    """Pure: why each model (namespace, model; namespace None: any) is still starting: a pod of
    it not Ready, or its newest replica Ready for less than `young` s. Empty: none is."""
    said = []
    for namespace, model in sorted(set(models), key=lambda m: (m[0] or "", m[1])):
        pods = s.replicas(model, namespace)
        waiting = sorted(p.name for p in pods if not p.ready)
        if waiting:
            said.append(f"{model}: {waiting[0]} not Ready" + (f" (and {len(waiting) - 1} more)" if waiting[1:] else ""))
            continue
        since = [(p.ready_since, p.name) for p in pods if p.ready_since is not None]
        if since:
            newest, name = max(since)
            if now - newest < young:
                said.append(f"{model}: {name} Ready {max(now - newest, 0.0):.0f} s ago")
    return said


@dataclass(frozen=True)
class Look:
    """One look at a steady-state hypothesis: met, or which models its failing probe names, and
    whether that probe raised (a raise is judged at once)."""

    met: bool
    models: tuple[tuple[str | None, str], ...] = ()
    raised: bool = False
    reason: str = ""


@dataclass(frozen=True)
class Settling:
    """What the run's look before its method found (journal: kilocard.settle)."""

    met: bool
    waited_seconds: float
    looks: int
    starting: tuple[str, ...]  # what was starting at the first look that waited
    reason: str  # the last look's failing probes, "" when met

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "starting": list(self.starting)}

    def said(self) -> str:
        """Words for a run's reason: empty when it did not wait."""
        if self.looks <= 1:
            return ""
        return f"waited {self.waited_seconds:.0f} s for the fleet to settle ({'; '.join(self.starting)})"


def before(look: Callable[[], Look], cluster: Callable[[], snap.ClusterSnapshot], seconds: float,
           interval: float = 2.0, say: Callable[[str], None] = lambda _m: None) -> Settling:
    """Look at the steady state until it is met, or until no model its failing probe names is
    starting (`starting`, its newest replica Ready for less than `seconds`; a cluster that cannot
    be read tells none is), or `seconds` pass."""
    started = time.time()
    first: list[str] = []
    looks = 0
    while True:
        found = look()
        looks += 1
        now = time.time()
        if found.met:
            return Settling(True, round(now - started, 1), looks, tuple(first), "")
        try:
            why = [] if found.raised or not found.models else starting(cluster(), found.models, now, seconds)
        except (KilocardError, ProbeError):
            why = []
        if not why or now - started + interval > seconds:
            return Settling(False, round(now - started, 1), looks, tuple(first or why), found.reason)
        if not first:
            first = why
            say(f"steady state not met yet ({found.reason}) while the fleet starts ({'; '.join(why)}): looking "
                f"again for up to {seconds:.0f} s")
        time.sleep(interval)
