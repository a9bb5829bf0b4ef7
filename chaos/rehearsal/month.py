"""`kilocard rehearse`: many simulated months of failures on the fleet one snapshot shows, the
figures each model ends with, and the spares each needs to meet a target.

The spares search adds replicas to one model at a time (copies of one of its replicas, placed as
the scheduler would; the other models as they are), over the same months (the same seeds: the
failures drawn do not change with the spares), until 9 months in 10 lose no more SLO-minutes than
the target allows; the curve over the spares tried is kept. The field account's rule of thumb
(20 to 30 % more capacity than the demand needs) is set beside it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from chaos.rehearsal import outcome
from chaos.rehearsal.rates import FailureClass
from chaos.rehearsal.recoveries import Recoveries
from chaos.rehearsal.simulation import DAY, Month, simulate, spares
from probes.impact import Load, replicas_serving
from probes.snapshot import ClusterSnapshot

FIELD_ACCOUNT_HEADROOM = (0.2, 0.3)  # ../reference: 20% 到 30% 的容量冗余, on top of the KV formula


@dataclass(frozen=True)
class Plan:
    horizon_days: float = 30.0
    seeds: int = 20
    crews: int | None = None  # repairs at a time; None: as many as there are failures
    target_availability: float = 0.999  # of each model's SLO over the horizon
    max_spares: int = 8
    search: bool = True

    @property
    def allowed_minutes(self) -> float:
        return (1 - self.target_availability) * self.horizon_days * DAY / 60


def months(snapshot: ClusterSnapshot, classes: tuple[FailureClass, ...], recoveries: Recoveries, plan: Plan,
           seeds: range | None = None) -> list[Month]:
    return [simulate(snapshot, classes, recoveries, plan.horizon_days, seed, plan.crews)
            for seed in (seeds if seeds is not None else range(plan.seeds))]


def per_model(ms: list[Month], key: tuple[str, str], load: Load | None) -> dict[str, Any]:
    found = [outcome.of_month(m, key, load) for m in ms]
    horizon_minutes = ms[0].horizon / 60
    out: dict[str, Any] = {"replicas": ms[0].serving[key][0][1],
                           "replica_hours_down": outcome.Figure(tuple(f.replica_hours_down for f in found)).describe()}
    if load is None:
        return {**out, "slo": "unknown: no load figures"}
    slo = outcome.Figure(tuple(f.slo_minutes or 0.0 for f in found))
    worst = max(found, key=lambda f: f.worst_day_minutes or 0.0)
    return {**out, "slo_minutes": slo.describe(),
            "availability": round(1 - slo.mean / horizon_minutes, 6),
            "availability_p90_month": round(1 - slo.p90 / horizon_minutes, 6),
            "worst_day": {"minutes": outcome.Figure(tuple(f.worst_day_minutes or 0.0 for f in found)).describe(),
                          "worst_month_day": worst.worst_day,
                          "worst_month_minutes": round(worst.worst_day_minutes or 0, 1)},
            "no_spare_minutes": outcome.Figure(tuple(f.no_spare_minutes or 0.0 for f in found)).describe(),
            "fewest_replicas_for_slo": outcome.fewest(load, max(out["replicas"], 1) + 64),
            # Over its SLO with every replica serving: the month's failures are not what costs it.
            "short_before_failures": load.p95(out["replicas"]) > load.slo_seconds}


def search(snapshot: ClusterSnapshot, key: tuple[str, str], load: Load, classes: tuple[FailureClass, ...],
           recoveries: Recoveries, plan: Plan, baseline: list[Month]) -> dict[str, Any]:
    """Spares of one model against its SLO-minutes: the curve, and the fewest meeting the target."""
    curve: list[dict[str, Any]] = []
    enough = None
    for extra in range(plan.max_spares + 1):
        if extra == 0:
            ms = baseline
        else:
            grown, unplaced = spares(snapshot, {key: extra})
            if unplaced:
                curve.append({"spares": extra, "unplaced": unplaced[key]})
                break
            ms = months(grown, classes, recoveries, plan)
        slo = outcome.Figure(tuple(outcome.of_month(m, key, load).slo_minutes or 0.0 for m in ms))
        curve.append({"spares": extra, "slo_minutes": slo.describe(2)})
        if slo.p90 <= plan.allowed_minutes:
            enough = extra
            break
    replicas = baseline[0].serving[key][0][1]
    rule = [math.ceil(replicas * h) for h in FIELD_ACCOUNT_HEADROOM]
    return {"curve": curve, "fewest_meeting_target": enough, "field_account_rule": rule}


def rehearse(snapshot: ClusterSnapshot, loads: dict[tuple[str, str], Load], classes: tuple[FailureClass, ...],
             recoveries: Recoveries, plan: Plan, namespace: str | None = None) -> dict[str, Any]:
    """Everything `kilocard rehearse` reports, as plain data."""
    keys = sorted(replicas_serving(snapshot, namespace))
    recoveries.check({c.name for c in classes if c.per_day > 0}, {model for _ns, model in keys})
    started = time.monotonic()
    baseline = months(snapshot, classes, recoveries, plan)
    simulated = time.monotonic() - started
    cards = sum(n.cards_capacity for n in snapshot.nodes)
    found: dict[str, Any] = {
        "inputs": {"horizon_days": plan.horizon_days, "months": plan.seeds, "repair_crews": plan.crews,
                   "target_availability": plan.target_availability,
                   "allowed_slo_minutes": round(plan.allowed_minutes, 1), "nodes": len(snapshot.nodes), "cards": cards,
                   "classes": [{"name": c.name, "per": c.per, "per_day": c.per_day,
                                "expected_per_month": round(c.per_month(cards if c.per == "card" else
                                                                        len(snapshot.nodes)), 2),
                                "effect": c.effect, "repair_hours": c.repair_hours, "source": c.source,
                                "repair_source": c.repair_source} for c in classes],
                   "recoveries": recoveries.describe(),
                   "loads": {f"{ns}/{m}": {"qps": round(v.qps, 3), "service_rate": round(v.service_rate, 3),
                                           "slo_ttft_seconds": v.slo_seconds} for (ns, m), v in sorted(loads.items())}},
        "failures": {c.name: outcome.Figure(tuple(float(m.failures.get(c.name, 0)) for m in baseline)).describe()
                     for c in classes},
        "models": {f"{ns}/{m}": per_model(baseline, (ns, m), loads.get((ns, m))) for ns, m in keys},
        # The hour the failures cost most: a model over its SLO all along is not the failures' doing.
        "worst_hour": outcome.worst_hour(baseline, {k: v for k, v in loads.items() if k in keys
                                                    and v.p95(baseline[0].serving[k][0][1]) <= v.slo_seconds}),
        "seconds": {"months": round(simulated, 2)},  # wall time of each part
    }
    if plan.search:
        started = time.monotonic()
        found["spares"] = {f"{ns}/{m}": search(snapshot, (ns, m), loads[(ns, m)], classes, recoveries, plan, baseline)
                           for ns, m in keys if (ns, m) in loads}
        found["seconds"]["spares"] = round(time.monotonic() - started, 2)
    return found


def text(found: dict[str, Any]) -> list[str]:
    """The rehearsal for a terminal: its inputs, each model's month, the spares, the worst hour."""
    i = found["inputs"]
    lines = [f"{i['months']} months of {i['horizon_days']:g} days on {i['nodes']} nodes, {i['cards']} cards; "
             f"simulated in {found['seconds']['months']:.1f} s"
             + (f", spares searched in {found['seconds']['spares']:.1f} s" if "spares" in found["seconds"] else ""),
             "failures a month (mean [90th percentile]): " + ", ".join(
                 f"{name} {f['mean']:g} [{f['p90']:g}]" for name, f in found["failures"].items())]
    for c in i["classes"]:
        lines.append(f"  {c['name']}: {c['per_day']:.3g} per {c['per']}-day ({c['expected_per_month']:g} a month "
                     f"here), effect {c['effect']}, repair {c['repair_hours']:g} h ({c['repair_source']}); "
                     f"{c['source']}")
    lines.append(f"SLO-minutes lost a month, mean [95 % CI] and 9 months in 10 at most; target: availability "
                 f"{i['target_availability']} ({i['allowed_slo_minutes']:g} min)")
    for name, m in found["models"].items():
        if "slo_minutes" not in m:
            lines.append(f"  {name}: {m['replicas']} replicas, {m['replica_hours_down']['mean']:g} replica-hours "
                         f"down; SLO {m['slo']}")
            continue
        s, ci = m["slo_minutes"], m["slo_minutes"]["ci95"]
        short = "; OVER ITS SLO WITH EVERY REPLICA SERVING" if m["short_before_failures"] else ""
        lines.append(f"  {name}: {m['replicas']} replicas (SLO kept from {m['fewest_replicas_for_slo']}{short}): "
                     f"{s['mean']:g} min [{ci[0]:g}, {ci[1]:g}], p90 {s['p90']:g}; availability "
                     f"{m['availability']:.5f}; worst day {m['worst_day']['minutes']['mean']:g} min; no spare "
                     f"{m['no_spare_minutes']['mean']:g} min; {m['replica_hours_down']['mean']:g} replica-hours down")
    for name, search in found.get("spares", {}).items():
        steps = ", ".join(f"+{c['spares']}: {c['slo_minutes']['p90']:g}" if "slo_minutes" in c else
                          f"+{c['spares']}: no room" for c in search["curve"])
        enough = search["fewest_meeting_target"]
        rule = search["field_account_rule"]
        lines.append(f"  spares for {name} (p90 SLO-minutes): {steps}; "
                     + (f"+{enough} meets the target" if enough is not None else "the target is not met")
                     + f"; the field account's 20-30 % rule: +{rule[0]} to +{rule[1]}")
    hour = found.get("worst_hour")
    if hour:
        models = ", ".join(f"{k} {v:g}" for k, v in hour["models"].items())
        lines.append(f"worst hour: month {hour['month']}, from {hour['start_seconds'] / 3600:.0f} h: "
                     f"{hour['slo_minutes']:g} SLO-minutes ({models})")
    return lines
