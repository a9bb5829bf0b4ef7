"""What each verdict says, to the letter: representative cases of every deciding function (the
ones docs/verdicts.md names), their whole output (reason and figures) held in
tests/unit/golden/verdicts.json. A verdict "says what it means": a reason that names the wrong
replica, a figure off by a rounding, a namespace ignored, is a change this test shows. After a
deliberate change, rewrite the file and read its diff:

    KILOCARD_GOLDEN=update .venv/bin/python -m pytest -n 0 tests/unit/test_verdict_golden.py
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chaos import guards, judgement, stop
from chaos.errors import Exit
from chaos.vocabulary import TP_SIZE_LABEL
from probes import (
    budget,
    capacity,
    client_errors,
    device_taints,
    hung,
    incident,
    kv,
    placement,
    remediation,
    slo,
    spread,
    tp_groups,
)
from probes.errors import ProbeError
from probes.hung import Figures, Progress
from probes.slo import Recovery, Sample
from probes.snapshot import ClusterSnapshot, Moment, NodeView, PodView
from probes.verdict import Verdict

GOLDEN = Path(__file__).parent / "golden" / "verdicts.json"
T0 = 1_000_000.0
JIT = 0.00037  # sample times off the whole second: a figure rounded to 4 places instead of 3 shows
HOST = "kubernetes.io/hostname"
SHAPE = {"kilocard.io/layers": "32", "kilocard.io/kv-heads": "8", "kilocard.io/head-dim": "128",
         "kilocard.io/dtype": "bfloat16"}


def node(name: str, ready: bool = True, unschedulable: bool = False, taints: tuple[str, ...] = (),
         labels: dict[str, str] | None = None, cards: int = 8, used: int = 0) -> NodeView:
    return NodeView(name, {HOST: name, "kilocard.io/rack": f"r-{name[-1]}", **(labels or {})}, ready, unschedulable,
                    taints, cards, cards, used)


def pod(name: str, where: str | None = "n0", ready: bool = True, ns: str = "ns", model: str = "m",
        group: str | None = None, rank: int = 0, size: int | None = None, cards: int = 8, deleting: bool = False,
        since: float | None = None, **extra: Any) -> PodView:
    labels = {"kilocard.io/model": model, **SHAPE, **({"kilocard.io/group-size": str(size)} if size else {})}
    return PodView(ns, name, f"u-{ns}-{name}", where, model, ready, deleting, cards, group or f"{ns}/{name}", rank,
                   labels, ready_since=since, **extra)


NODES = (node("n0"), node("n1"), node("n2"))
OTHER = pod("x-0", "n1", ready=False, ns="other")  # the same model in another namespace, never Ready


def world(*pods: PodView, nodes: tuple[NodeView, ...] = NODES) -> ClusterSnapshot:
    return ClusterSnapshot((*pods, OTHER), nodes)


def out(v: Verdict) -> dict[str, Any]:
    return v.to_json()


CASES: dict[str, Callable[[], Any]] = {}


def case(name: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    def register(fn: Callable[[], Any]) -> Callable[[], Any]:
        CASES[name] = fn
        return fn
    return register


# --- slo -------------------------------------------------------------------------------------------------
def samples(points: list[dict[str, float] | None], pods: list[dict[str, bool] | None] | None = None,
            start: int = 0, impact: str = "") -> list[Sample]:
    return [Sample(T0 + start + i + JIT, p or {}, pods=None if pods is None else pods[i], impact=impact)
            for i, p in enumerate(points)]


ECC = Recovery(0.5, 30, 5, 4, True, 1.0)
HOLD = Recovery(0.5, 30, 5, 4, False, 1.0)
OK2 = {"a": 0.2, "b": 0.3}


@case("slo.judge held")
def _() -> Any:
    return out(slo.judge(samples([OK2] * 31), T0, HOLD, final=True))


@case("slo.judge recovered")
def _() -> Any:
    return out(slo.judge(samples([OK2] * 3 + [{"a": 0.2, "b": 0.9}] * 10 + [OK2] * 18), T0, ECC, final=True))


@case("slo.judge recovered after silence")
def _() -> Any:
    pods = [{"a": True, "b": True}] * 31
    return out(slo.judge(samples([OK2] * 3 + [{"a": 0.9}] * 4 + [{"a": 0.2}] * 4 + [OK2] * 20, pods), T0, ECC,
                         final=True))


@case("slo.judge not recovered, never back")
def _() -> Any:
    return out(slo.judge(samples([OK2] * 3 + [{"a": 0.2, "b": 0.9}] * 28), T0, ECC, final=True))


@case("slo.judge not recovered, not held")
def _() -> Any:
    return out(slo.judge(samples([OK2] * 3 + [{"b": 0.9}] * 25 + [OK2] * 3), T0, ECC, final=True))


@case("slo.judge decided early")
def _() -> Any:
    return out(slo.judge(samples([OK2] * 3 + [{"b": 0.9}] * 24), T0, ECC, final=False))


@case("slo.judge no impact")
def _() -> Any:
    return out(slo.judge(samples([OK2] * 31), T0, ECC, final=True))


@case("slo.judge no data")
def _() -> Any:
    return out(slo.judge([Sample(T0 + i + JIT, {}, "refused") for i in range(31)], T0, ECC, final=True))


@case("slo.judge already over")
def _() -> Any:  # over before the fault and still at the first breach counted: decided early
    return out(slo.judge(samples([{"a": 0.9}] * 3 + [OK2] * 29, start=-1), T0, ECC, final=False))


@case("slo.judge over before the fault, healthy, then the fault's breach")
def _() -> Any:
    return out(slo.judge(samples([{"a": 0.9}] + [OK2] * 2 + [{"a": 0.9}] * 5 + [OK2] * 24, start=-1), T0, ECC,
                         final=True))


@case("slo.judge no impact seen, gaps")
def _() -> Any:
    return out(slo.judge(samples([OK2] * 5 + [None] * 3 + [OK2] * 23), T0, ECC, final=True))


@case("slo.judge held with a gap before")
def _() -> Any:
    return out(slo.judge(samples([OK2] * 5 + [{"a": 0.2}] * 3 + [OK2] * 23), T0, HOLD, final=True))


@case("slo.judge not healthy by the deadline, no breach")
def _() -> Any:
    return out(slo.judge(samples([OK2] * 5 + [{"a": 0.2}] * 26), T0, HOLD, final=True))


@case("slo.judge per model")
def _() -> Any:
    model = Recovery(0.05, 30, 5, 4, True, 1.0, replicas=False)
    return out(slo.judge(samples([{"m": 0.01}] * 3 + [None] * 5 + [{"m": 0.5}] * 5 + [{"m": 0.01}] * 18,
                                 impact="the gateway failed 2.00 requests/s"), T0, model, final=True))


@case("slo.classify every state")
def _() -> Any:
    told = [Sample(T0, {"a": 0.2, "b": 0.2}), Sample(T0 + 1, {}, "refused"), Sample(T0 + 2, {"a": 0.7, "b": 0.2}),
            Sample(T0 + 3, {"a": 0.2}, pods={"a": True, "b": False}),
            Sample(T0 + 4, {}, pods={"a": False}), Sample(T0 + 5, {}, impact="failing"), Sample(T0 + 6, {}),
            Sample(T0 + 7, {"a": 0.2}, pods={"a": True, "b": True}, impact="failing"),
            Sample(T0 + 8, {"a": 0.2}, pods={"a": True, "b": True}), Sample(T0 + 9, {"a": 0.2}),
            Sample(T0 + 10, {"a": 0.2}, pods={"a": True}), Sample(T0 + 11, {"a": 0.5, "b": 0.4})]
    return [(x.state, x.why, x.over) for x in slo.classify(told, 0.5, True)]


class Prom:
    def __init__(self, found: dict[str, float]) -> None:
        self.found, self.asked = found, []

    def custom_query(self, query: str) -> list[dict[str, Any]]:
        self.asked.append(query)
        return [{"metric": {"pod": k}, "value": [T0, str(v)]} for k, v in self.found.items()]


@case("slo.under every outcome")
def _() -> Any:
    by_pod, by_model = slo.Indicator("m", "q", "10s", by="pod"), slo.Indicator("m", "q", "10s", by=None)
    return [out(slo.under(Prom({}), by_pod, 0.5, {"a"})), out(slo.under(Prom({"a": 0.7, "b": 0.2}), by_pod, 0.5)),
            out(slo.under(Prom({"a": 0.2}), by_pod, 0.5, {"a", "b", "c"})), out(slo.under(Prom({"a": 0.2}), by_pod, 0.5)),
            out(slo.under(Prom({"a": 0.5}), by_model, 0.5)), out(slo.under(raw := Prom({"x": 0.25}), "max(q)", 0.5)),
            raw.asked]


# --- budgets, TP groups, remediation -------------------------------------------------------------------------
def moments(*found: tuple[float, ClusterSnapshot]) -> list[Moment]:
    return [Moment(T0 + at, s) for at, s in found]


BROKEN = world(pod("a", "n0"), pod("b", None, ready=False))
WHOLE = world(pod("a", "n0"), pod("b", "n2"))


@case("budget.first_within recovered")
def _() -> Any:
    return out(budget.first_within(moments((-0.5, BROKEN), (0.25, BROKEN), (7.12345, WHOLE)),
                                   lambda s: tp_groups.recovered(s, "m", {"n1"}, "ns", 2), T0, 10, "the fault"))


@case("budget.first_within never")
def _() -> Any:
    return out(budget.first_within(moments((0.61234, BROKEN), (11, WHOLE)),
                                   lambda s: tp_groups.recovered(s, "m", set(), "ns", 2), T0, 10, "action 'k'"))


@case("budget.first_within no view")
def _() -> Any:
    return out(budget.first_within(moments((12, WHOLE)), lambda s: tp_groups.recovered(s, "m", set(), "ns", 2), T0, 10,
                                   "the fault"))


@case("budget.first_within at once")
def _() -> Any:
    return out(budget.first_within(moments((0.71234, WHOLE)), lambda s: tp_groups.recovered(s, "m", set(), "ns", 2),
                                   T0, 10, "the fault"))


@case("tp_groups.check every problem")
def _() -> Any:
    split = [pod(f"s-{r}", f"n{r}", group="ns/s", rank=r, size=2, cards=4) for r in range(2)]
    incomplete = [pod("i-0", "n0", group="ns/i", size=2)]
    half = [pod("h-0", "n2", group="ns/h", size=2), pod("h-1", "n2", ready=False, group="ns/h", rank=1, size=2)]
    none = [pod("z-0", "n1", ready=False)]
    pending = [pod("p-0", None, ready=False)]
    return [out(tp_groups.check(world(*split, *incomplete, *half, *none, *pending), "m", "ns")),
            out(tp_groups.check(world(), "m", "ns")), out(tp_groups.check(WHOLE, "m", "ns")),
            out(tp_groups.check(ClusterSnapshot((pod("c-0", "n0", cards=0), pod("c-1", "n1", cards=0, group="ns/c-0",
                                                                                    rank=1)), ()), None, "ns")),
            out(tp_groups.check(ClusterSnapshot((pod("c-0", "n0", cards=0), pod("c-1", "n1", cards=0, group="ns/c-0",
                                                                                    rank=1)),
                                                (node("n0", cards=1), node("n1", cards=1))), None, "ns"))]


@case("tp_groups.recovered every outcome")
def _() -> Any:
    stuck = world(pod("a", "n0"), pod("b", "n1"))
    return [out(tp_groups.recovered(BROKEN, "m", set(), "ns", 2)), out(tp_groups.recovered(WHOLE, "m", set(), "ns", 3)),
            out(tp_groups.recovered(stuck, "m", {"n1"}, "ns", 2)), out(tp_groups.recovered(WHOLE, "m", {"n1"}, "ns", 2))]


QUARANTINED = node("n0", unschedulable=True, taints=("nvidia.com/gpu-error=a=b:NoSchedule",))


@case("remediation.check every outcome")
def _() -> Any:
    labelled = node("n0", unschedulable=True, labels={"dgxc.nvidia.com/nvsentinel-state": "quarantined"})
    return [out(remediation.check(world(), "gone", ("m",), "ns")),
            out(remediation.check(world(pod("a", "n0")), "n0", ("m",), "ns")),
            out(remediation.check(world(pod("a", "n0"), nodes=(QUARANTINED,)), "n0", ("m",), "ns")),
            out(remediation.check(world(pod("a", "n1", ready=False), pod("c", "n2", ready=False),
                                        nodes=(labelled, node("n1"))), "n0", ("m",), "ns")),
            out(remediation.check(world(pod("a", "n1"), nodes=(QUARANTINED, node("n1"))), "n0", ("m",), "ns"))]


@case("remediation.out_of_service every outcome")
def _() -> Any:
    oos = node("n0", taints=("node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",))
    return [out(remediation.out_of_service(world(pod("a", "n1")), "n0", ("m",), "ns")),
            out(remediation.out_of_service(world(pod("a", "n0"), nodes=(oos,)), "n0", ("m",), "ns")),
            out(remediation.out_of_service(world(pod("a", "n1", ready=False), nodes=(oos, node("n1"))), "n0", ("m",),
                                           "ns")),
            out(remediation.out_of_service(world(pod("a", "n1"), nodes=(oos, node("n1"))), "n0", ("m",), "ns")),
            out(remediation.out_of_service(world(pod("a", "n1"), nodes=(node("n1"),)), "n0", ("m",), "ns"))]


@case("remediation.is_quarantined")
def _() -> Any:
    return [remediation.is_quarantined(QUARANTINED), remediation.is_quarantined(node("n0", unschedulable=True)),
            remediation.is_quarantined(node("n0", taints=QUARANTINED.taints))]


# --- placement, capacity ---------------------------------------------------------------------------------
ANTI = ("kubernetes.io/hostname",)


@case("placement.anti_affinity every outcome")
def _() -> Any:
    lone = ClusterSnapshot((pod("a", "n0"), pod("b", "nowhere")), (node("n0"), node("n1", ready=False)))
    bare = NodeView("n9", {}, cards_capacity=8, cards_allocatable=8)  # no hostname label at all
    return [out(placement.anti_affinity(world(pod("a", None)), "m", HOST, "ns")),
            out(placement.anti_affinity(world(pod("a", "n0"), pod("b", "n0")), "m", HOST, "ns", guaranteed=True)),
            out(placement.anti_affinity(world(pod("a", "n0", required_anti_affinity=ANTI),
                                              pod("b", "n0", required_anti_affinity=ANTI)), "m", HOST, "ns")),
            out(placement.anti_affinity(world(pod("a", "n0", required_anti_affinity=ANTI),
                                              pod("b", "n1", required_anti_affinity=ANTI)), "m", HOST, "ns")),
            out(placement.anti_affinity(world(pod("a", "n0"), pod("b", "n0"), pod("c", "n0")), "m", HOST, "ns")),
            out(placement.anti_affinity(world(pod("a", "n0", node_selector={"kilocard.io/rack": "r-0"}),
                                              pod("b", "n0")), "m", HOST, "ns")),
            out(placement.anti_affinity(lone, "m", "kilocard.io/rack")),
            out(placement.anti_affinity(ClusterSnapshot((pod("a", "n9"), pod("b", "n9"), OTHER), (bare, node("n0"))),
                                        "m", HOST, "ns"))]


@case("capacity.fits every outcome")
def _() -> Any:
    demand = capacity.Demand(20, 2048, 256, 8)
    groups = (pod("g-0", "n0", group="ns/g", size=2, cards=4), pod("g-1", "n1", ready=False, group="ns/g", rank=1,
                                                                   size=2, cards=4), pod("a", "n2"))
    return [out(capacity.fits(world(), "m", demand, namespace="ns")),
            out(capacity.fits(world(*groups), "m", demand, 0.25, 2**30, namespace="ns")),
            out(capacity.fits(world(*groups), "m", demand, 0.25, 2**36, ("n2",), "ns")),
            out(capacity.fits(world(*groups), "m", demand, 0.0, 2**36, namespace="ns"))]


@case("capacity.kv_bytes_per_token")
def _() -> Any:
    try:
        capacity.kv_bytes_per_token(32, 8, 128, "float6")
    except ProbeError as exc:
        return [capacity.kv_bytes_per_token(32, 8, 128, "int4"), str(exc)]
    return "no error"


@case("capacity.room every outcome")
def _() -> Any:
    nodes = (node("n0", used=8), node("n1", ready=False), node("n2", unschedulable=True),
             node("n3", taints=("gpu=bad:NoSchedule", "soft=x:PreferNoSchedule")),
             node("n4", labels={"pool": "b"}), node("n5", used=4), node("n6", used=4))
    pending = pod("p", None, ready=False, node_selector={"pool": "a"})
    spread = (pod("a", "n5", cards=4), pod("b", "n6", cards=4))
    return [out(capacity.room(world(), "m", namespace="ns")),
            out(capacity.room(ClusterSnapshot((pending, OTHER), nodes), "m", (), "ns")),
            out(capacity.room(ClusterSnapshot((pod("q", None, ready=False), OTHER), nodes), "m", (), "ns")),
            out(capacity.room(ClusterSnapshot((*spread, OTHER), (*nodes[:5], node("n5"), node("n6"))), "m",
                              namespace="ns")),
            out(capacity.room(ClusterSnapshot((pod("a", "n0", cards=4, required_anti_affinity=ANTI), OTHER),
                                              (node("n0", used=4), node("n4"))), "m", ("n0",), "ns")),
            out(capacity.room(ClusterSnapshot((pod("r", None, ready=False, required_anti_affinity=ANTI),
                                               pod("s", "n4", required_anti_affinity=ANTI), OTHER), nodes[1:5]),
                              "m", (), "ns"))]


# --- hung, device taints -------------------------------------------------------------------------------------
def group(name: str, where: str, size: int = 2, ready: bool = True, since: float = T0 - 600,
          ns: str = "ns") -> list[PodView]:
    members = [pod(f"{name}-{r}", where, ready, ns, group=f"{ns}/{name}", rank=r, size=size, cards=4, since=since)
               for r in range(size)]
    return members[::-1]  # rank 1 first: the lead is found by rank, not by order


@case("hung.judge every outcome")
def _() -> Any:
    fleet = world(*group("g0", "n0"), *group("g1", "n1"), *group("g2", "n2", since=T0 - 30),
                  *group("g3", "n2", since=T0 - 29))
    def judged(**by_lead: Progress | None) -> Any:
        return out(hung.judge(fleet, Figures(T0, {("ns", k.replace("_", "-")): v for k, v in by_lead.items()
                                                   if v is not None}, by_lead.pop("demand", None)), "m", "30s", "ns"))
    return [out(hung.judge(fleet, Figures(T0, {}, 5.0), "m", "30s", "ns")),
            out(hung.judge(world(*group("g0", "n0", since=T0 - 5)), Figures(T0, {("ns", "g0-0"): Progress(3)}), "m",
                           "30s", "ns")),
            judged(g0_0=Progress(0, 0, 0, 3), g1_0=Progress(1, 0, 0, 0), g2_0=Progress(1)),
            judged(g0_0=Progress(0, 0, 0, 0), g1_0=Progress(0, 0, 0, 0), g2_0=Progress(0, 0, 0, 0)),
            judged(g0_0=Progress(1, 0, 0, 1), g1_0=Progress(0, 0, 0, 0), g2_0=Progress(1), g3_0=Progress(0)),
            judged(g0_0=Progress(0, 1, 0, 0), g1_0=Progress(0, 0, 1, 0), g2_0=Progress(0, None, None, None)),
            out(hung.judge(fleet, Figures(T0, {("ns", "g0-0"): Progress(0), ("ns", "g1-0"): Progress(0),
                                                ("ns", "g2-0"): Progress(0)}, 1.0), "m", "30s", "ns"))]


def taint(card: int, added: float | None, effect: str = "NoSchedule", where: str = "n0") -> device_taints.DeviceTaint:
    return device_taints.DeviceTaint(where, f"gpu-{card}", "gpu.nvidia.com/xid", "79", effect, added)


@case("device_taints.judge every outcome")
def _() -> Any:
    fault = device_taints.XidFault
    faults = [fault("n0", 1, T0), fault("n0", 2, T0 + 0.4), fault("n0", 3, T0), fault("n0", 4, T0, reverted=True),
              fault("n0", 5, T0)]
    taints = [taint(1, T0 + 2), taint(1, None), taint(2, T0 - 0.5), taint(3, T0 - 5), taint(5, T0 + 12),
              taint(6, T0), taint(5, T0 + 1, "None")]
    return [out(device_taints.judge(taints, faults, 10, T0 + 20)), out(device_taints.judge([], [], 10, T0)),
            out(device_taints.judge(taints[:1], faults[:1] + [fault("n0", 7, T0 + 8.5)], 10, T0 + 11)),
            out(device_taints.judge([taint(1, T0 + 3), taint(2, T0 + 9.5)], faults[:2], 10, T0 + 12)),
            out(device_taints.judge([taint(3, T0 - 5)], faults[2:3], 10, T0 + 12)),
            out(device_taints.judge([], faults[3:4], 10, T0 + 12))]


# --- stop conditions, guards, the run's verdict ------------------------------------------------------------------
@case("stop.breach every outcome")
def _() -> Any:
    fleet = world(*group("g0", "n0", since=T0 - 61), *group("g1", "n1", since=T0 - 60),
                  *group("g2", "n2", since=T0 - 59), pod("u1", None, ready=False), pod("u2", "n0", ready=False),
                  pod("u3", "n1", ready=False), pod("u4", "n1", ready=False), pod("u5", "n1", ready=False),
                  pod("u6", "n1", ready=False))
    slo_ = stop.Condition("slo", "m", "ns", limit=0.5, window="30s")
    return [stop.breach(slo_, fleet, {"g0-0": 0.5, "g1-0": 0.2}, T0), stop.breach(slo_, fleet, {"g0-0": 0.51}, T0),
            stop.breach(slo_, fleet, {"g0-0": 0.5, "g1-0": 0.2, "g2-0": 0.1}, T0),
            stop.breach(slo_, fleet, {"g0-0": 0.5}, T0),
            stop.breach(stop.Condition("unhealthy", "m", "ns", max=5), fleet, None, T0),
            stop.breach(stop.Condition("unhealthy", "m", "ns", max=6), fleet, None, T0),
            stop.breach(stop.Condition("zero-ready", "m", "ns"), world(pod("a", "n0", ready=False)), None, T0),
            stop.breach(stop.Condition("hung-group", "m", "ns", window="30s"), fleet,
                        Figures(T0, {("ns", "g0-0"): Progress(0, 0, 0, 2), ("ns", "g1-0"): Progress(5)}), T0),
            stop.breach(stop.Condition("hung-group", "m", "ns", window="30s"), fleet, Figures(T0, {}), T0)]


@case("guards.judge every limit")
def _() -> Any:
    fleet = world(pod("a", "n0"), pod("b", "n1"), pod("c", "n2", ns="other"))
    taken = {("ns", "a"): fleet.pods[0], ("ns", "b"): fleet.pods[1], ("x", "sidecar"): None}
    r = guards.Radius(pods=taken, nodes={"n0", "n1"}, cards=20)
    r.room = {("ns", "m"): Verdict(False, "m: no room after losing n0")}
    return [guards.judge(r, fleet, guards.Limits(1, 1, 16, 1, True, True, ("prod",)), {"ns"}, "dev"),
            guards.judge(r, fleet, guards.Limits(3, 2, 20, 0, False, False), set(), None)]


def entry(name: str, output: Any = None, status: str = "succeeded", **activity: Any) -> dict[str, Any]:
    return {"activity": {"type": "probe", "name": name, **activity}, "output": output, "status": status,
            **({"exception": ["Traceback", "KeyError: 'x'"]} if status == "failed" else {})}


KILOCARD = {"type": "python", "module": "probes.chaostoolkit", "func": "tp_groups_whole"}


def verdict_of(output: dict[str, Any]) -> dict[str, Any]:
    return {"verdict": "ok" if output.get("ok") else "failed", "reason": "r", **output}


@case("judgement.verdict every outcome")
def _() -> Any:
    def journal(runs: list[dict[str, Any]], status: str = "completed", before: Any = True, after: Any = True,
                **extra: Any) -> Any:
        def state(met: Any) -> Any:
            if met in (True, None):
                return None if met is None else {"steady_state_met": True, "probes": []}
            return {"steady_state_met": False, "probes": met}
        return list(judgement.verdict({"status": status, "run": runs, "deviated": after not in (True, None),
                                 "steady_states": {"before": state(before), "after": state(after)}, **extra}))
    unknown = verdict_of({"ok": False, "outcome": "unknown", "reason": "no data"})
    failing = [entry("p1", verdict_of({"ok": False}), tolerance_met=False), entry("p2", None, "failed")]
    for e in failing:
        e["tolerance_met"] = False
    return [journal([], "interrupted"), journal([], "interrupted", kilocard_stop={"reason": "x", "blind": True}),
            journal([], before=failing), journal([], before=[]), journal([entry("p", None, "failed")]),
            journal([{"activity": {"type": "action"}, "status": "failed", "exception": ["E: x"]}]),
            journal([{"activity": {"name": "q"}, "status": "failed", "exception": ["E: y"]}]),
            journal([entry("p", unknown, provider=KILOCARD)]),
            journal([entry("p", {"verdict": "failed", "ok": False, "reason": "r", "judgement": "failed"})]),
            journal([entry("p", {"verdict": "ok", "judgement": "ok", "ok": True, "reason": "r", "outcome": "recovered"},
                           tolerance={"type": "regex", "target": "outcome", "pattern": "^held$"})]),
            journal([entry("p", {"verdict": "ok", "judgement": "ok", "ok": True, "reason": "r"},
                           tolerance={"type": "regex", "target": "outcome", "pattern": "^held$"})]),
            journal([{"activity": {"timeout": 2}, "status": "succeeded", "duration": 2.0},
                     {"activity": {"name": "w", "timeout": 2}, "status": "succeeded", "duration": 2.5}]),
            journal([], "aborted"), journal([], after=failing[1:]), journal([], before=None, after=None),
            journal([], before=None)]


@case("judgement.judged and unseen")
def _() -> Any:
    expect = judgement.Expectation(Exit.FAILED, "probe 'p' failed: ")
    landed = [{"status": "inconclusive", "evidence": "no read-back"}, None, {"status": "confirmed"}]
    return [judgement.judged(expect, Exit.PASSED, "fine"), judgement.judged(judgement.Expectation(Exit.ABORTED), Exit.FAILED, "x"),
            judgement.judged(expect, Exit.FAILED, "probe 'p' failed: r"), judgement.judged(expect, Exit.FAILED, "probe 'p' failed: r",
                                                                              judgement.UNKNOWN),
            judgement.unseen(landed, {"run": [entry("p", {"impact_seen": False})]}), judgement.unseen([None], {"run": []}),
            judgement.unseen([{"status": "mismatch"}], {"run": []})]


# --- edges: two of a kind (a list joined), another namespace's replicas, exact boundaries ------------------------
def lead_of(size: int, *members: PodView) -> list[PodView]:
    members[0].labels[TP_SIZE_LABEL] = str(size)
    return list(members)


@case("edges: tp groups, remediation, placement")
def _() -> Any:
    pending = [pod("p-0", None, ready=False, group="ns/p", size=2),
               pod("p-1", None, ready=False, group="ns/p", rank=1, size=2)]
    tp16 = lead_of(16, pod("t-0", "n0", group="ns/t", size=2, cards=4), pod("t-1", "n1", group="ns/t", rank=1, size=2,
                                                                          cards=4))
    tp4 = lead_of(4, pod("f-0", "n1", group="ns/f", size=2), pod("f-1", "n2", group="ns/f", rank=1, size=2))
    custom = node("n0", unschedulable=True, taints=("y.io/worse=:NoSchedule",))
    oos = node("n0", taints=("node.kubernetes.io/out-of-service=:NoExecute",))
    req = {"required_anti_affinity": ANTI}
    return [out(tp_groups.check(world(*pending, *tp16, *tp4), "m", "ns")),
            out(tp_groups.recovered(world(pod("a", "n0"), pod("b", "n1")), "m", {"n0", "n1"}, "ns", 2)),
            out(remediation.check(world(pod("b", "n0"), pod("a", "n0"), pod("o", "n0", ns="other"),
                                        nodes=(QUARANTINED, node("n1"))), "n0", ("m",), "ns")),
            out(remediation.check(world(nodes=(custom,)), "n0", ("m",), "ns", ("x.io/bad", "y.io/worse"))),
            out(remediation.check(world(nodes=(node("n0", unschedulable=True),)), "n0", ("m",), "ns",
                                  ("x.io/bad", "y.io/worse"))),
            out(remediation.out_of_service(world(pod("a", "n0"), pod("b", "n0"), nodes=(oos,)), "n0", ("m",), "ns")),
            out(placement.anti_affinity(world(*(pod(x, f"n{i // 2}", **req) for i, x in enumerate("abcd"))), "m", HOST,
                                        "ns")),
            out(placement.anti_affinity(world(pod("a", "n0", node_selector={"kilocard.io/rack": "r-0"}),
                                              pod("b", "n0"), nodes=(node("n0"), node("x0"), node("n1"))),
                                        "m", HOST, "ns"))]


@case("edges: capacity")
def _() -> Any:
    rack = {"required_anti_affinity": ("kilocard.io/rack",)}
    per_token = capacity.kv_bytes_per_token(32, 8, 128, "bfloat16")
    groups = (pod("g-0", "n0", group="ns/g", size=2, cards=4), pod("g-1", "n1", group="ns/g", rank=1, size=2, cards=4),
              pod("a", "n2"))
    return [out(capacity.room(ClusterSnapshot((pod("s", None, ready=False, cards=4), pod("b", None, ready=False),
                                               OTHER), (node("n0"), node("n1", used=4))), "m", (), "ns")),
            out(capacity.room(ClusterSnapshot((pod("a", "n0", **rack), pod("b", "n1", **rack), OTHER),
                                              (node("n0", used=8), node("n1", used=8), node("x0"))), "m", ("n0",), "ns")),
            out(capacity.room(world(pod("a", "n0"), pod("b", "n1")), "m", ("n1", "gone", "n0"), "ns")),
            out(capacity.room(ClusterSnapshot((pod("a", "n0"), OTHER), (node("n0", used=8), node("n2"))), "m",
                              namespace="ns")),
            out(capacity.room(ClusterSnapshot((pod("p", None, ready=False, node_selector={"pool": "a"}), OTHER),
                                              (node("n4", labels={"pool": "b"}), node("n5", labels={"pool": "a"}))),
                              "m", (), "ns")),
            out(capacity.room(ClusterSnapshot((pod("q", None, ready=False), OTHER),
                                              (node("n3", taints=("soft=x:PreferNoSchedule",)),)), "m", (), "ns")),
            out(capacity.fits(ClusterSnapshot((pod("a", "n0", cards=1), OTHER), NODES), "m", capacity.Demand(1, 1, 0, 1),
                              0.0, per_token, namespace="ns")),
            out(capacity.fits(world(*groups), "m", capacity.Demand(20, 2048, 256, 8), 0.25, 2**36, ("n2", "n1"),
                              "ns"))]


@case("edges: device taints")
def _() -> Any:
    fault = device_taints.XidFault
    taints = [taint(1, T0 + 5), taint(1, T0 + 2), taint(2, T0 + 3, "NoExecute"), taint(2, T0 + 3),
              taint(3, T0 + 1, "None"), taint(3, T0 + 2, "None")]
    return [out(device_taints.judge(taints, [fault("n0", c, T0) for c in (1, 2, 3, 4)], 10, T0 + 20)),
            out(device_taints.judge([], [fault("n0", 1, T0)], 10, T0 + 10)),
            out(device_taints.judge([taint(1, T0 + 10)], [fault("n0", 1, T0)], 10, T0 + 12))]


@case("edges: hung and stop conditions")
def _() -> Any:
    fleet = world(*group("g0", "n0", since=T0 - 61), *group("g1", "n1", since=T0 - 61),
                  *group("g2", "n2", since=T0 - 61), *group("o0", "n2", since=T0 - 61, ns="other"))
    figures = Figures(T0, {("ns", "g0-0"): Progress(5), ("ns", "g1-0"): Progress(5), ("ns", "g2-0"): Progress(5),
                           ("other", "o0-0"): Progress(0, 0, 0, 2)})
    return [stop.breach(stop.Condition("slo", "m", "ns", limit=0.5, window="30s"), fleet, {"g2-0": 0.2}, T0),
            stop.breach(stop.Condition("hung-group", "m", "ns", window="30s"), fleet, figures, T0),
            out(hung.judge(fleet, figures, "m", "30s", "ns")),
            out(hung.judge(world(*group("g0", "n0")), Figures(T0, {("ns", "g0-0"): Progress(0, 0, 0, 1)}), "m", "30s",
                           "ns"))]


@case("edges: slo")
def _() -> Any:
    at = [Sample(T0 + i + 0.4, p) for i, p in enumerate([OK2] * 3 + [{"b": 0.9}] * 5 + [OK2] * 23)]
    exact = [Sample(T0, {}, "refused")] + [Sample(T0 + i, OK2) for i in range(1, 31)]
    two_gaps = samples([OK2] * 5) + [Sample(T0 + 5, {}, "refused"), Sample(T0 + 6, {})] + samples([OK2] * 24, start=7)
    edge = Recovery(0.5, 4, 4, 0, True, 1.0)
    late = [Sample(T0 + i, OK2) for i in range(25)] + [Sample(T0 + 25, {"b": 0.9})]
    classified = slo.classify([Sample(T0, {"a": .2, "b": .2, "c": .2}),
                               Sample(T0 + 1, {"a": .2}, pods={"a": True, "b": False, "c": False}),
                               Sample(T0 + 2, {"a": .2}, pods={"a": True, "b": True, "c": True})], 0.5, True)
    per_model = slo.classify([Sample(T0, {"m1": .2, "m2": .2}), Sample(T0 + 1, {"m1": .2})], 0.5, False)
    return [out(slo.judge(samples([{"a": 0.9}] + [OK2] * 30), T0, ECC, final=True)),
            out(slo.judge(at, T0, ECC, final=True)),
            out(slo.judge(samples([OK2] * 3 + [{"a": 0.5}] * 28, [{"a": True, "b": True}] * 31,
                                  impact="the gateway failed 1.00 requests/s"), T0, ECC, final=True)),
            out(slo.judge(exact, T0, HOLD, final=True)), out(slo.judge(two_gaps, T0, HOLD, final=True)),
            out(slo.judge(samples([OK2] * 4), T0, HOLD, final=True)),
            out(slo.judge([Sample(T0, OK2), Sample(T0 + 1, {"b": 0.9})], T0, edge, final=False)),
            out(slo.judge(late, T0, ECC, final=False)),
            [(x.state, x.why) for x in classified + per_model],
            out(slo.judge([Sample(T0 + i, {"a": 0.45 if i == 1 else 0.2, "b": 0.3}) for i in range(31)], T0, ECC,
                          final=True)),
            out(slo.judge(samples([{"a": 0.2}]), T0, ECC, final=True))]


@case("edges: run")
def _() -> Any:
    nameless = {"activity": {"type": "probe"}, "output": None, "status": "failed", "tolerance_met": False,
                "exception": ["KeyError: 'x'"]}
    return [list(judgement.verdict({"status": "completed", "run": [], "deviated": False, "steady_states": {
                "before": {"steady_state_met": False, "probes": [nameless]}, "after": None}})),
            list(judgement.verdict({"status": "interrupted", "kilocard_stop": {"reason": "zero-ready m", "blind": False}})),
            # No hypothesis, a method probe that passed without a name: said as "?", not dropped.
            list(judgement.verdict({"status": "completed", "deviated": False, "steady_states": {"before": None, "after": None},
                              "run": [{"activity": {"type": "probe"}, "output": {"ok": True, "reason": "fine"},
                                       "status": "succeeded", "tolerance_met": True}]}))]


# --- incident -------------------------------------------------------------------------------------------
SICK = {"alert": "Slow", "labels": {"model_name": "m", "pod": "old-1"}, "firing_at": 10.0, "resolved_at": 30.0}
LOST = {"owner": "rs", "pod": "rs-a", "deleted": 12.0, "started": 20.0}


def firing(at: float, lasted: float | None, **labels: str) -> incident.Firing:
    return incident.Firing("Slow", {"model_name": "m", "pod": "new-1", **labels}, at,
                           None if lasted is None else at + lasted)


@case("incident: reproduced")
def _() -> Any:
    both = {"tolerance": 5.0, "alerts": [SICK], "replicas": [LOST, {**LOST, "pod": "rs-b", "deleted": 30.0,
                                                                    "started": 38.0}]}
    replaced = [incident.Replacement("rs", "rs-x", 7.0, 15.0), incident.Replacement("rs", "rs-y", 35.0, 43.0)]
    return [out(incident.reproduced(both, [firing(15.0, 3.0)], replaced, 48.0)),  # every edge exactly at tolerance
            out(incident.reproduced(both, [firing(15.0001, 3.0)], replaced, 48.0)),
            out(incident.reproduced(both, [firing(5.0, None), firing(-1.0, 2.0)], replaced[:1], 48.0)),
            out(incident.reproduced(both, [firing(9.0, 1.0, model_name="other")], replaced, 14.9)),
            out(incident.reproduced(both, [firing(9.0, 1.0)], [incident.Replacement("rs", "rs-x", 12, None)], 24.9)),
            out(incident.reproduced(both, [firing(9.0, 1.0)], [incident.Replacement("rs", "rs-x", 12, None)], 25.0)),
            out(incident.reproduced({"alerts": [SICK]}, [firing(-3.0, None)], [], 60.0))]


@case("incident: fixed")
def _() -> Any:
    symptoms = {"alerts": [SICK], "replicas": [LOST]}
    fix = {"alerts": {"Slow": {"resolved_within": 10.0}}, "replicas": {"started_within": 8.0}}
    return [out(incident.fixed(symptoms, fix, [firing(4.0, 10.0)], [incident.Replacement("rs", "x", 12, 20)], 60)),
            out(incident.fixed(symptoms, fix, [firing(4.0, 10.0001)], [], 60)),
            out(incident.fixed(symptoms, fix, [], [incident.Replacement("rs", "x", 12, 20.0001)], 60)),
            out(incident.fixed(symptoms, fix, [firing(52.0, None)], [incident.Replacement("rs", "x", 52, None)], 60)),
            out(incident.fixed(symptoms, fix, [firing(50.0, None)], [], 60)),
            out(incident.fixed(symptoms, {}, [firing(4.0, 1.0)], [], 60)),
            out(incident.fixed(symptoms, {}, [], [incident.Replacement("rs", "x", 12, 50)], 60))]


@case("incident: every row")
def _() -> Any:
    """Each row a symptom can end in, once: what the table says, not only the verdict."""
    at_zero = {"alert": "Slow", "labels": {"model_name": "m"}, "firing_at": 0.0, "resolved_at": None}
    unstarted = {"owner": "rs", "pod": "rs-a", "deleted": 30.0}  # recorded before its replacement started
    far = {"tolerance": 5.0, "replicas": [{**LOST, "deleted": 30.0}]}
    return [
        # A firing at exactly time zero counts as the replay's; an alert nobody fired did not fire.
        out(incident.reproduced({"tolerance": 5.0, "alerts": [at_zero, {**SICK, "alert": "Other"}]},
                                [firing(0.0, 2.0)], [], 60.0)),
        # A firing at exactly time zero, far from its recorded offset: the replay's own, off its
        # offset (not "already firing"); nothing fired, watched to exactly the offset plus the tolerance.
        out(incident.reproduced({"tolerance": 5.0, "alerts": [{**at_zero, "firing_at": 20.0}]}, [firing(0.0, 2.0)],
                                [], 60.0)),
        out(incident.reproduced({"tolerance": 5.0, "alerts": [SICK]}, [], [], 15.0)),
        # A replica with no recorded start: deleted near its offset is enough. Two deleted within
        # the tolerance: the earlier one (the later in the list) is matched.
        out(incident.reproduced({"tolerance": 5.0, "replicas": [{**unstarted, "deleted": 12.0}]},
                                [], [incident.Replacement("rs", "rs-late", 14.0, 20.0),
                                     incident.Replacement("rs", "rs-early", 11.0, 19.0)], 60.0)),
        # Its replacement started off the recorded start.
        out(incident.reproduced({"tolerance": 5.0, "replicas": [LOST]}, [],
                                [incident.Replacement("rs", "rs-x", 12.0, 40.0)], 60.0)),
        # None deleted within the tolerance: the closest (not the first) is named.
        out(incident.reproduced(far, [], [incident.Replacement("rs", "rs-far", 45.0, 50.0),
                                          incident.Replacement("rs", "rs-farther", 10.0, 18.0)], 60.0)),
        # Fixed: already firing before the replay; a recorded alert never resolved; two firings as
        # long as each other (the first is named); only replica symptoms with no budget: nothing judged.
        out(incident.fixed({"alerts": [at_zero]}, {}, [firing(-2.0, None)], [], 60.0)),
        out(incident.fixed({"alerts": [at_zero]}, {"alerts": {"Slow": {"resolved_within": 9.0}}},
                           [firing(20.0, 5.0), firing(4.0, 5.0)], [], 60.0)),
        out(incident.fixed({"replicas": [LOST]}, {}, [], [incident.Replacement("rs", "x", 12, 20)], 60.0)),
        # Every phase recorded: scheduled and Ready each exactly at the tolerance's edge, then Ready
        # just past it; a fix judged to Ready, exactly at its budget, then just over it.
        out(incident.reproduced({"tolerance": 5.0, "replicas": [{**LOST, "scheduled": 13.0, "ready": 30.0}]}, [],
                                [incident.Replacement("rs", "rs-x", 12.0, 20.0, 18.0, 35.0)], 60.0)),
        out(incident.reproduced({"tolerance": 5.0, "replicas": [{**LOST, "scheduled": 13.0, "ready": 30.0}]}, [],
                                [incident.Replacement("rs", "rs-x", 12.0, 20.0, 18.0, 35.0001)], 60.0)),
        out(incident.fixed({"replicas": [LOST]}, {"replicas": {"ready_within": 10.0}}, [],
                           [incident.Replacement("rs", "x", 12, 15, 13, 22)], 60.0)),
        out(incident.fixed({"replicas": [LOST]}, {"replicas": {"ready_within": 10.0}}, [],
                           [incident.Replacement("rs", "x", 12, 15, 13, 22.0001)], 60.0)),
    ]


@case("incident: slo")
def _() -> Any:
    """An SLO symptom's rows: the breach on the worst replica at the tolerance's edge, a silent
    replica, one already over; fixed within its budget, over it, and silence after a breach."""
    breach = {"model": "m", "namespace": "ns", "indicator": "ttft_p95", "threshold": 0.5, "window": "30s",
              "breached_at": 6.0, "recovered_at": 20.0}
    key = incident.slo_key(breach)

    def seen(*points: tuple[float, dict[str, float] | None]) -> dict[str, list[incident.Reading]]:
        return {key: [incident.Reading(at, v) for at, v in points]}

    calm, sick, alone = {"a": 0.2, "b": 0.3}, {"a": 0.2, "b": 0.9}, {"a": 0.2}
    edge = seen(*((float(t), sick if 11 <= t < 20 else calm) for t in range(-3, 40)))  # +11: 5 s after +6
    late = seen(*((float(t), sick if 12 <= t < 20 else calm) for t in range(-3, 40)))
    silent = seen(*((float(t), alone if t >= 2 else calm) for t in range(-3, 40)))
    over = seen(*((float(t), sick) for t in range(-3, 40)))
    hushed = seen(*((float(t), sick if 8 <= t < 12 else None if t >= 12 else calm) for t in range(-3, 40)))
    symptoms, fix = {"tolerance": 5.0, "slo": [breach]}, {"slo": {"m": {"recovered_within": 9.0}}}
    return [out(incident.reproduced(symptoms, [], [], 39.0, edge)),
            out(incident.reproduced(symptoms, [], [], 39.0, late)),
            out(incident.reproduced(symptoms, [], [], 39.0, silent)),
            out(incident.reproduced(symptoms, [], [], 39.0, over)),
            out(incident.fixed(symptoms, fix, [], [], 39.0, edge)),
            out(incident.fixed(symptoms, fix, [], [], 39.0, seen(*((float(t), sick if 11 <= t < 21 else calm)
                                                                    for t in range(-3, 40))))),
            out(incident.fixed(symptoms, fix, [], [], 39.0, hushed)),
            out(incident.fixed(symptoms, {}, [], [], 39.0, silent))]


# --- KV cache, the clients' view ---------------------------------------------------------------------------
@case("capacity.fits a fixed cache, a shared prefix, pods gone")
def _() -> Any:
    fixed = [pod(f"r{i}", f"n{i}", cards=1, kv_cache_tokens=32_768) for i in range(3)]
    demand = capacity.Demand(20, 3072, 64, 1.93, 1536)
    return [out(capacity.fits(world(*fixed), "m", demand, namespace="ns")),
            out(capacity.fits(world(*fixed), "m", demand, namespace="ns", without=frozenset({("ns", "r0")}))),
            out(capacity.fits(world(*fixed), "m", capacity.Demand(20, 3072, 64, 1.93), namespace="ns"))]


def kv_samples(counts: list[dict[str, float]], usage: list[dict[str, float]], ready: frozenset[str] | None = None,
               start: int = -2) -> list[kv.Sample]:
    # Off the whole second by 0.4 s: a time rounded to whole seconds instead of to 3 places shows.
    return [kv.Sample(T0 + start + i + 0.4 + JIT, c, u, ready)
            for i, (c, u) in enumerate(zip(counts, usage, strict=True))]


@case("kv.judge every outcome")
def _() -> Any:
    calm = {"a": 0.43217, "b": 0.61234}
    bounds = kv.Bounds(10.0)
    return [out(kv.judge(kv_samples([{"a": 0.0, "b": 0.0}] * 13, [calm] * 13), T0, bounds)),
            out(kv.judge(kv_samples([{"a": 2.0, "b": 0.0}] * 5 + [{"a": 4.25, "b": 1.5}] * 8, [calm] * 13), T0,
                         bounds)),
            out(kv.judge(kv_samples([{"a": 0.0, "b": 0.0}] * 13, [calm] * 6 + [{"a": 0.97654, "b": 0.5}] * 7), T0,
                         kv.Bounds(10.0, max_usage=0.95))),
            out(kv.judge(kv_samples([{"a": 0.0}] * 13, [{"a": 0.5}] * 13, frozenset({"a", "b"})), T0, bounds)),
            out(kv.judge(kv_samples([{"a": 0.0, "b": 0.0}] * 13, [{"a": 0.00321, "b": 0.0}] * 13), T0,
                         kv.Bounds(10.0, min_usage=0.3))),
            out(kv.judge([], T0, bounds))]


@case("kv.judge edges")
def _() -> Any:
    """A replica at its bound of preemptions exactly (allowed, not counted as preempting); a silent
    replica that shows one of its two series; no usage series at all is idle, never within."""
    at_bound = [{"a": 0.0, "b": 0.0}] * 3 + [{"a": 1.0, "b": 3.0}] * 10
    calm = [{"a": 0.5, "b": 0.5}] * 13
    return [out(kv.judge(kv_samples(at_bound, calm), T0, kv.Bounds(10.0, max_preemptions=1))),
            out(kv.judge(kv_samples([{"a": 0.0, "b": 0.0}] * 13, [{"a": 0.5}] * 13, frozenset({"a", "b", "c"})), T0,
                         kv.Bounds(10.0))),
            out(kv.judge(kv_samples([{"a": 0.0}] * 13, [{}] * 13), T0, kv.Bounds(10.0)))]


@case("client_errors.judge every outcome")
def _() -> Any:
    def sent(*spans: tuple[float, float, str | None, bool]) -> list[client_errors.Request]:
        return [client_errors.Request(T0 + at + JIT, error, aborted) for start, end, error, aborted in spans
                for at in [start + 0.5 * i for i in range(int((end - start) / 0.5))]]

    rule = client_errors.Rule(5.0, 6.0)
    return [out(client_errors.judge(sent((0, 11, None, False)), T0, rule)),
            out(client_errors.judge(sent((0, 1, "connection_reset", True), (1, 3, "http_503", False),
                                         (3, 11, None, False)), T0, rule)),
            out(client_errors.judge(sent((0, 7, "http_503", False), (7, 11, None, False)), T0, rule)),
            out(client_errors.judge(sent((0, 4, "timeout", False), (4, 11, None, False)), T0,
                                    client_errors.Rule(5.0, 6.0, max_window=2.5))),
            out(client_errors.judge(sent((0, 11, None, False)), T0, rule, (T0 + 4.2,))),
            out(client_errors.judge(sent((0, 1, "http_503", False), (10.5, 11, None, False)), T0, rule)),
            out(client_errors.judge(sent((0, 0.5, None, False)), T0, rule))]


@case("client_errors.judge edges")
def _() -> Any:
    """Times on the interval's bounds exactly: a failure sent at the budget is inside the window, one
    sent at the interval's end is judged, as is a request in flight sent then; a window whose ends
    are off the whole second by different amounts."""
    rule = client_errors.Rule(5.0, 6.0, min_requests=1)
    answered = [client_errors.Request(T0 + 5.5 + i) for i in range(5)]
    return [out(client_errors.judge([client_errors.Request(T0 + 5.0, "http_503"), *answered], T0, rule)),
            out(client_errors.judge([*answered, client_errors.Request(T0 + 11.0, "http_503")], T0, rule)),
            out(client_errors.judge(answered, T0, rule, (T0 + 11.0,))),
            out(client_errors.judge([client_errors.Request(T0 + 0.1234, "timeout"),
                                     client_errors.Request(T0 + 2.00049, "timeout"), *answered], T0, rule))]


def finished(rates: list[dict[str, float]], ready: frozenset[str] | None = None, start: float = -10.0,
             error_at: float | None = None) -> list[spread.Sample]:
    """A sample every 2 s from `start` s, each replica's counter rising by its rate a second (one
    dict per sample; a replica absent from a dict shows no series there)."""
    counters: dict[str, float] = {}
    out_: list[spread.Sample] = []
    for i, rate in enumerate(rates):
        at = start + 2 * i
        for r, per_second in rate.items():
            counters[r] = counters.get(r, 0.0) + per_second * 2
        out_.append(spread.Sample(T0 + at + JIT, {r: v for r, v in counters.items() if r in rate}, ready,
                                  "timeout" if error_at == at else ""))
    return out_


@case("spread.judge every outcome")
def _() -> Any:
    even, rule = {"a": 4.0, "b": 4.0, "c": 3.0}, spread.Rule(10.0, 10.0, 10.0, 0.5)
    return [out(spread.judge(finished([even] * 21), T0, rule)),
            out(spread.judge(finished([even] * 5 + [{"a": 4.0, "b": 4.0, "c": 0.0}] * 3 + [even] * 18), T0,
                             spread.Rule(20.0, 10.0, 10.0, 0.5))),
            out(spread.judge(finished([even] * 8 + [{"a": 4.0, "b": 4.0, "c": 0.0}] * 4 + [even] * 9), T0, rule)),
            out(spread.judge(finished([{"a": 4.0, "b": 4.0, "c": 1.123}] * 21), T0, rule)),
            out(spread.judge(finished([{"a": 0.0, "b": 0.0, "c": 0.0}] * 21), T0, rule)),
            out(spread.judge(finished([even] * 12 + [{"a": 4.0, "b": 4.0}] * 9, frozenset("abc")), T0, rule)),
            out(spread.judge(finished([even] * 21, error_at=16.0), T0, rule)),
            out(spread.judge(finished([even] * 8), T0, rule))]


@case("spread.judge edges")
def _() -> Any:
    """A share at the bound exactly (even); a sample at the budget exactly (before it: may be
    uneven); a replica Ready through only part of a window (not judged there); a restart."""
    rule = spread.Rule(10.0, 10.0, 10.0, 0.5)
    at_bound = finished([{"a": 4.0, "b": 4.0, "c": 2.0}] * 21)
    ready = [spread.Sample(s.at, s.finished, frozenset("ab") if s.at < T0 + 4 else frozenset("abc"))
             for s in finished([{"a": 4.0, "b": 4.0, "c": 4.0}] * 21)]
    restarted = [spread.Sample(s.at, {**s.finished, "c": s.finished["c"] - 80 if s.at > T0 + 8 else s.finished["c"]})
                 for s in finished([{"a": 4.0, "b": 4.0, "c": 4.0}] * 21)]
    return [out(spread.judge([spread.Sample(s.at, s.finished) for s in at_bound], T0,
                             spread.Rule(10.0, 10.0, 10.0, 0.6))),
            out(spread.judge(finished([{"a": 4.0, "b": 4.0, "c": 0.0}] * 11 + [{"a": 4.0, "b": 4.0, "c": 40.0}]
                                      + [{"a": 4.0, "b": 4.0, "c": 4.0}] * 9, start=-10.0 - JIT), T0, rule)),
            out(spread.judge(ready, T0, rule)),
            out(spread.judge(restarted, T0, rule))]


@case("spread.judge what is unseen, and times off the second")
def _() -> Any:
    """Each reason a sample is unseen (no sample a window before it, no series, nobody Ready through
    its window); a trickle of requests (under one in the window) is still a spread; an uneven
    sample at time zero exactly; times half a second off, so a figure's rounding shows."""
    rule, even = spread.Rule(5.0, 10.0, 10.0, 0.5), {"a": 4.0, "b": 4.0}
    late = [spread.Sample(s.at, s.finished) for s in finished([even] * 11, start=0.0)]
    empty = [s if s.at < T0 + 8 else spread.Sample(s.at, {}) for s in finished([even] * 16)]
    moved = [spread.Sample(s.at, s.finished, frozenset("ab") if s.at < T0 + 2 else frozenset("cd"))
             for s in finished([{"a": 4.0, "b": 4.0, "c": 4.0, "d": 4.0}] * 16)]
    # c serves nothing in the window up to time zero, then its share: uneven at zero exactly, then even.
    at_zero = [spread.Sample(T0 + t, {"a": 4.0 * (t + 20), "b": 4.0 * (t + 20), "c": max(0.0, 4.0 * t)})
               for t in (-20, -10, 0, 10, 12, 14, 16, 18, 20)]
    half = [spread.Sample(s.at + 0.5, s.finished, s.ready, s.error) for s in finished(
        [even] * 8 + [{"a": 4.0, "b": 0.0}] * 13, error_at=None)]
    return [out(spread.judge(late, T0, rule)), out(spread.judge(empty, T0, rule)),
            out(spread.judge(moved, T0, rule)),
            out(spread.judge(finished([{"a": 0.01, "b": 0.01, "c": 0.01}] * 16), T0, rule)),
            out(spread.judge(at_zero, T0, spread.Rule(10.0, 10.0, 10.0, 0.5))),
            out(spread.judge(half, T0, rule)),
            out(spread.judge(finished([even] * 6 + [{"a": 4.0, "b": 0.5}] * 4 + [even] * 10, start=-10.5), T0,
                             spread.Rule(15.0, 5.0, 10.0, 0.5))),
            out(spread.judge(finished([even] * 21, error_at=13.5, start=-10.5), T0, rule)),
            out(spread.judge(finished([even] * 8 + [{"a": 0.0, "b": 0.0}] * 13, start=-10.5), T0, rule))]


@case("spread.judge who counts in an even share")
def _() -> Any:
    """Replicas not Ready through the window still count in the even share once they served (even
    a fraction of a request), never when they served nothing; two silent replicas named; a served
    figure off the third place."""
    rule = spread.Rule(5.0, 10.0, 10.0, 0.5)
    ab = frozenset("ab")
    idle_c = finished([{"a": 4.0, "b": 2.2, "c": 0.0}] * 16, ab)  # b at 55 % of two, 37 % of three
    trickle_c = finished([{"a": 4.0, "b": 2.6, "c": 0.05}] * 16, ab)  # c's 1 a window counts: b at 64 % of three
    silent = [spread.Sample(s.at, {"a": s.finished["a"]}, frozenset("abc")) for s in finished([{"a": 4.0}] * 16)]
    odd = finished([{"a": 4.12345, "b": 0.5}] * 16, start=-10.5)
    # No readiness record: the replicas judged are those with a series at both ends of the window (a
    # newcomer, d from 4 s, is not judged until it has been seen a whole window).
    newcomer = [spread.Sample(s.at, {**s.finished, **({"d": s.finished["a"]} if s.at >= T0 + 4 else {})})
                for s in finished([{"a": 4.0, "b": 4.0}] * 16)]
    return [out(spread.judge(idle_c, T0, rule)), out(spread.judge(trickle_c, T0, spread.Rule(5.0, 10.0, 10.0, 0.7))),
            out(spread.judge(silent, T0, rule)), out(spread.judge(odd, T0, rule)),
            out(spread.judge(newcomer, T0, rule))]


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def test_every_verdict_says_what_it_said():
    found = {name: _jsonable(fn()) for name, fn in CASES.items()}
    if os.environ.get("KILOCARD_GOLDEN") == "update":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    held = json.loads(GOLDEN.read_text())
    assert sorted(held) == sorted(found), "cases added or removed: rewrite the golden file (see the docstring)"
    for name in CASES:
        assert found[name] == held[name], name


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_gives_a_verdict(name):
    """Every case runs clean on its own: no case leans on another's state."""
    assert CASES[name]() is not None
