"""Between two experiments of one `kilocard run`: the models the one before touched are whole
again before the next starts. Every TP group whole and Ready, and as many pods as their workloads
ask for (probes.tp_groups.recovered), followed live (the pods' watch) up to a timeout. A folder
run must not judge the next experiment against the wreckage of the last: S9 run right after S7
has killed every llama-3-70b replica finds them still starting, and its guard refuses it.

    pure:    touched (the models a journal's plan touched)
    fetch:   settle (one watch per model, until whole or the timeout)
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

from chaos.vocabulary import MODEL_LABEL
from probes import budget, tp_groups
from probes import snapshot as snap

if TYPE_CHECKING:
    from chaos.kube import Kube


def touched(journal: dict[str, Any]) -> list[tuple[str, str]]:
    """(namespace, model) of each model the run's plan touched (its blast radius)."""
    radius = ((journal.get("kilocard") or {}).get("plan") or {}).get("blast_radius") or {}
    return sorted({tuple(name.split("/", 1)) for name in radius.get("models") or [] if "/" in name})  # type: ignore[misc]


def settle(kube: Kube, models: list[tuple[str, str]], timeout: float,
           card_resource: str | None = None) -> tuple[float, list[str]]:
    """(seconds it took, what was still not whole when the timeout ran out: empty when all settled)."""
    start = time.time()
    left = []
    for namespace, model in models:
        wanted = tp_groups.desired(kube, model, namespace)
        found = snap.moments(kube, card_resource, namespace, f"{MODEL_LABEL}={model}", time.time(), start + timeout)
        whole = functools.partial(tp_groups.recovered, model=model, faulted=set(), namespace=namespace, desired=wanted)
        verdict = budget.first_within(found, whole, start, timeout, "the settle began")  # one deadline for all
        if not verdict.ok:
            left.append(f"{namespace}/{model}: {verdict.reason}")
    return time.time() - start, left
