"""A fleet at its steady state: what `testbed up --fleet`, the twin and the tests' fleets wait for
before they call a fleet Ready.

Ready pods are not enough. The replicas Ready first carry their model's whole load until the others
are, their queues stay in the rate window the catalog's steady-state probes read, and a run begun
then fails its steady state against a fleet that is only starting (README's first command did, at
its first step). So Ready means serving: every replica whole and Ready and exporting its series,
and every model's indicators under the thresholds the shipped catalog's steady-state probes use,
each held for the window those probes read.

    pure:  criteria (the catalog's steady-state SLO probes, the strictest of each indicator),
           Watch.see (one look's findings, how long each has held)
    fetch: wait (a look a second, until every model held each criterion for its window)
"""

from __future__ import annotations

import inspect
import string
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from chaos.errors import KilocardError
from chaos.kube import Kube
from chaos.vocabulary import CATALOG
from probes import chaostoolkit, slo, snapshot
from probes.errors import ProbeError

LOOK_SECONDS = 1.0  # the testbed scrapes the engines every second (its small profile)
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


def _substituted(value: Any, configuration: dict[str, Any]) -> Any:
    """An argument with the experiment's ${names} filled in, as chaoslib would (a whole
    `${name}` keeps its value's type)."""
    if not isinstance(value, str):
        return value
    if value.startswith("${") and value.endswith("}") and value[2:-1] in configuration:
        return configuration[value[2:-1]]
    return string.Template(value).safe_substitute({k: str(v) for k, v in configuration.items()})


def criteria(folder: Path = CATALOG) -> tuple[Criterion, ...]:
    """The catalog's steady-state `slo_under` probes (its experiments, not its game days), one
    criterion per indicator and per: the lowest threshold and the longest window any of them
    uses, so a fleet that meets these meets every steady state of the catalog."""
    defaults = {name: p.default for name, p in inspect.signature(chaostoolkit.slo_under).parameters.items()
                if p.default is not inspect.Parameter.empty}
    found: dict[tuple[str, str], Criterion] = {}
    for path in sorted(folder.glob("*.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        configuration = {k: v for k, v in (data.get("configuration") or {}).items()
                         if isinstance(v, (str, int, float))}
        for probe in (data.get("steady-state-hypothesis") or {}).get("probes") or []:
            provider = probe.get("provider") or {}
            if provider.get("module") != chaostoolkit.__name__ or provider.get("func") != "slo_under":
                continue
            args = {**defaults, **{k: _substituted(v, configuration)
                                   for k, v in (provider.get("arguments") or {}).items()}}
            if args["indicator"] == "promql":  # a query of its own names no indicator a fleet has
                continue
            c = Criterion(str(args["indicator"]), str(args["per"]), float(args["threshold"]), str(args["window"]))
            was = found.get((c.indicator, c.per))
            if was is not None:
                c = Criterion(c.indicator, c.per, min(was.threshold, c.threshold),
                              max(was.window, c.window, key=slo.seconds))
            found[(c.indicator, c.per)] = c
    return tuple(found[k] for k in sorted(found))


Key = tuple[str, str, Criterion]  # (namespace, model, criterion)


@dataclass
class Watch:
    """How long each model has met each criterion, look after look."""

    criteria: tuple[Criterion, ...]
    since: dict[Key, float] = field(default_factory=dict)  # met without a break since
    why: dict[Key, str] = field(default_factory=dict)  # the last look's reason it was not met
    first: list[str] = field(default_factory=list)  # what the first look found unmet

    def see(self, now: float, looked: dict[Key, str | None]) -> bool:
        """Record one look (None: met); True when every model has met every criterion for its
        whole window, without a break."""
        for key, reason in looked.items():
            if reason is None:
                self.since.setdefault(key, now)
                self.why.pop(key, None)
            else:
                self.since.pop(key, None)
                self.why[key] = reason
        if not self.first:
            self.first = self.unsettled(now) if self.why else ["nothing"]
        return bool(looked) and all(
            key in self.since and now - self.since[key] >= slo.seconds(key[2].window) for key in looked)

    def unsettled(self, now: float) -> list[str]:
        """What had not settled at the last look, and by which figure."""
        said = [f"{ns}/{model}: {c.indicator}: {why}" for (ns, model, c), why in sorted(
            self.why.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2].indicator))]
        said += [f"{ns}/{model}: {c.indicator} met for {now - t:.0f} s of its {c.window} window"
                 for (ns, model, c), t in sorted(self.since.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                                      kv[0][2].indicator))
                 if now - t < slo.seconds(c.window)]
        return said


def look(prom: Any, s: snapshot.ClusterSnapshot, namespace: str, model: str, c: Criterion) -> str | None:
    """Why the model does not meet the criterion now; None when it does."""
    replicas = s.replicas(model, namespace)
    leads = snapshot.ready_leads(replicas)
    groups = {p.group for p in replicas}
    if len(leads) < len(groups):
        return f"{len(groups) - len(leads)} of {len(groups)} replicas not whole and Ready"
    try:
        ind = slo.indicator(prom, c.indicator, model, namespace, c.window,
                            by=slo.REPLICA if c.per == "replica" else None)
        verdict = slo.under(prom, ind, c.threshold, set(leads) if ind.by else None)
    except ProbeError as exc:  # the metric is not known until a replica has served
        return f"no series yet ({exc})"
    return None if verdict.ok else verdict.reason


def wait(kube: Kube, prometheus_url: str, namespaces: list[str], timeout: float,
         say: Callable[[str], None] = print, found: tuple[Criterion, ...] | None = None) -> float:
    """Until every model of the namespaces (their pods' models, by kilocard's label or as their
    serving stack says) meets the criteria (the catalog's, by default), each held for its window;
    the seconds it took. KilocardError at the timeout, saying what did not settle and by which
    figure."""
    watch = Watch(found if found is not None else criteria())
    prom = slo.connect(prometheus_url)
    started = time.monotonic()
    while True:
        looked: dict[Key, str | None] = {}
        for ns in namespaces:
            s = snapshot.fetch(kube, namespace=ns)
            for model in s.models():
                for c in watch.criteria:
                    looked[(ns, model, c)] = look(prom, s, ns, model, c)
        now = time.monotonic()
        if watch.see(now, looked):
            break
        if now - started > timeout:
            said = watch.unsettled(now) or ["no model's pods found"]
            raise KilocardError(f"fleet not serving at its steady state within {timeout:.0f} s "
                                f"({'; '.join(map(str, watch.criteria))}): {'; '.join(said)}")
        time.sleep(LOOK_SECONDS)
    seconds = time.monotonic() - started
    say(f"fleet serving at its steady state after {seconds:.1f} s more "
        f"({', '.join(map(str, watch.criteria))}, each held for its window; unmet at first: "
        f"{'; '.join(watch.first[:3])}{' ...' if len(watch.first) > 3 else ''})")
    return seconds
