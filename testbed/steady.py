"""A fleet at its steady state: what `testbed up --fleet`, the twin and the tests' fleets wait for
before they call a fleet Ready.

Ready pods are not enough. The replicas Ready first carry their model's whole load until the others
are, their queues stay in the rate window the catalog's steady-state probes read, and a run begun
then fails its steady state against a fleet that is only starting (README's first command did, at
its first step). So Ready means serving: every replica whole and Ready and exporting its series,
and every model's indicators under the thresholds the shipped catalog's steady-state probes use,
now and at every step of the window before.

    pure:  criteria (the catalog's steady-state SLO probes, the strictest of each indicator)
    fetch: look (one model, one criterion: now and over the window before), wait (a look a
           second until every model meets every criterion)
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from chaoslib import substitute  # type: ignore[import-untyped]  # chaoslib ships no types

from chaos import input_file
from chaos.errors import KilocardError
from chaos.kube import Kube
from chaos.vocabulary import CATALOG
from probes import chaostoolkit, slo, snapshot
from probes.errors import ProbeError

LOOK_SECONDS = 1.0  # the testbed scrapes the engines every second (its small profile)
STEP = "1s"  # the resolution the indicator is judged at over the window before now
# Seconds a fleet all Ready may take to serve at its steady state: the first replicas' queues drain
# and the rate windows fill.
TIMEOUT = 180.0


@dataclass(frozen=True)
class Criterion:
    """One steady-state SLO probe's test: `indicator` per `per` (replica or model) at or under
    `threshold` over a `window` rate window."""

    indicator: str
    per: str
    threshold: float
    window: str

    def __str__(self) -> str:
        return f"{self.indicator} per {self.per} <= {self.threshold:g} over {self.window}"


def criteria(folder: Path = CATALOG) -> tuple[Criterion, ...]:
    """The catalog's steady-state `slo_under` probes (its experiments, not its game days), one
    criterion per indicator and per: the lowest threshold and the longest window any of them
    uses, so a fleet that meets these meets every steady state of the catalog."""
    defaults = {name: p.default for name, p in inspect.signature(chaostoolkit.slo_under).parameters.items()
                if p.default is not inspect.Parameter.empty}
    found: dict[tuple[str, str], Criterion] = {}
    for path in sorted(folder.glob("*.yaml")):
        data = input_file.read(path) or {}
        configuration = {k: v for k, v in (data.get("configuration") or {}).items()
                         if isinstance(v, (str, int, float))}
        for probe in (data.get("steady-state-hypothesis") or {}).get("probes") or []:
            provider = probe.get("provider") or {}
            if provider.get("module") != chaostoolkit.__name__ or provider.get("func") != "slo_under":
                continue
            args = {**defaults, **substitute(dict(provider.get("arguments") or {}), configuration, {})}
            if args["indicator"] == "promql":  # a query of its own names no indicator a fleet has
                continue
            c = Criterion(str(args["indicator"]), str(args["per"]), float(args["threshold"]), str(args["window"]))
            was = found.get((c.indicator, c.per))
            if was is not None:
                c = Criterion(c.indicator, c.per, min(was.threshold, c.threshold),
                              max(was.window, c.window, key=slo.seconds))
            found[(c.indicator, c.per)] = c
    return tuple(found[k] for k in sorted(found))


def look(prom: Any, s: snapshot.ClusterSnapshot, namespace: str, model: str, c: Criterion) -> str | None:
    """Why the model does not meet the criterion; None when it does: every replica whole and
    Ready with its series now, and the indicator at or under the threshold now and at every step
    of the window before (each a rate over its own window: the last two windows' requests are
    judged, as a hold of one window after it was first met would judge them)."""
    replicas = s.replicas(model, namespace)
    leads = snapshot.ready_leads(replicas)
    groups = {p.group for p in replicas}
    if len(leads) < len(groups):
        return f"{len(groups) - len(leads)} of {len(groups)} replicas not whole and Ready"
    try:
        ind = slo.indicator(prom, c.indicator, model, namespace, c.window,
                            by=slo.REPLICA if c.per == "replica" else None)
        now = slo.under(prom, ind, c.threshold, set(leads) if ind.by else None)
        if not now.ok:
            return now.reason
        held = slo.under(prom, replace(ind, query=f"max_over_time(({ind.query})[{c.window}:{STEP}])"), c.threshold)
    except ProbeError as exc:  # the metric is not known until a replica has served
        return f"no series yet ({exc})"
    return None if held.ok else f"{held.reason} within the last {c.window}"


def wait(kube: Kube, prometheus_url: str, namespaces: list[str], timeout: float,
         say: Callable[[str], None] = print, found: tuple[Criterion, ...] | None = None) -> float:
    """Until every model of the namespaces (their pods' models, by kilocard's label or as their
    serving stack says) meets the criteria (the catalog's, by default) at one look; the seconds it
    took. KilocardError at the timeout, saying what did not settle and by which figure."""
    criteria_ = found if found is not None else criteria()
    prom = slo.connect(prometheus_url)
    started = time.monotonic()
    first: list[str] | None = None
    while True:
        unmet = []
        for ns in namespaces:
            s = snapshot.fetch(kube, namespace=ns)
            unmet += [f"{ns}/{model}: {c.indicator}: {why}" for model in s.models() for c in criteria_
                      if (why := look(prom, s, ns, model, c)) is not None]
            if not s.models():
                unmet.append(f"{ns}: no model's pods found")
        first = unmet if first is None else first
        if not unmet:
            break
        if time.monotonic() - started > timeout:
            raise KilocardError(f"fleet not serving at its steady state within {timeout:.0f} s "
                                f"({'; '.join(map(str, criteria_))}): {'; '.join(unmet)}")
        time.sleep(LOOK_SECONDS)
    seconds = time.monotonic() - started
    said = "; ".join(first[:3]) + (" ..." if len(first) > 3 else "") if first else "nothing"
    say(f"fleet serving at its steady state after {seconds:.1f} s more ({', '.join(map(str, criteria_))}, "
        f"now and over the window before; unmet at first: {said})")
    return seconds
