"""Between two experiments of one `kilocard run`: the models the one before touched are whole
again before the next starts. Every TP group whole and Ready, as many pods as their workloads ask
for (probes.tp_groups.recovered), followed live (the pods' watch) up to a timeout, and then each
pod Ready long enough for its SLO series to cover a probe's window. A folder
run must not judge the next experiment against the wreckage of the last: S9 run right after S7
has killed every llama-3-70b replica finds them still starting, and its guard refuses it.

    pure:    touched (the models a journal's plan touched)
    fetch:   settle (one watch per model, until whole or the timeout)
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from probes import budget, tp_groups
from probes import snapshot as snap
from probes.verdict import Verdict

if TYPE_CHECKING:
    from chaos.kube import Kube


def touched(journal: dict[str, Any]) -> list[tuple[str, str]]:
    """(namespace, model) of each model the run's plan touched (its blast radius)."""
    radius = ((journal.get("kilocard") or {}).get("plan") or {}).get("blast_radius") or {}
    return sorted({tuple(name.split("/", 1)) for name in radius.get("models") or [] if "/" in name})  # type: ignore[misc]


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
