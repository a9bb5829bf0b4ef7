"""The production verdicts against their oracles (tests/unit/oracles.py, written from
docs/verdicts.md) on generated timelines: replicas' series with gaps, NaN (a missing value) and
series that vanish, pods' readiness over time, several faults, time zero, budgets, deadlines and
holds, probes that start late. Every counter-example hypothesis shrank to is kept below as an
explicit case (`@example`), with what it found."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from chaos import judgement, run, settle, stop
from probes import budget, device_taints, hung, incident, kv, slo, spread, tp_groups
from probes.hung import Figures, Progress
from probes.pulls import PodAt
from probes.slo import Recovery, Sample
from probes.snapshot import ClusterSnapshot, Moment, NodeView, PodView
from tests.unit import oracles

T0 = 1_000_000.0
EXAMPLES = settings(max_examples=400, deadline=None)
NAMES = ("a", "b", "c")


# --- slo_recovered_within -----------------------------------------------------------------------------
@st.composite
def slo_cases(draw: st.DrawFn) -> oracles.SloCase:
    deadline = draw(st.sampled_from([12.0, 20.0, 30.0]))
    hold = draw(st.sampled_from([0.0, 2.0, 5.0]))
    blind = draw(st.sampled_from([0.0, 2.0, 4.0]))
    scrape = draw(st.sampled_from([0.0, 1.0, 2.0]))
    replicas = draw(st.booleans())
    names = NAMES if replicas else ("m",)
    settle = draw(st.sampled_from([-3, *range(-3, int(deadline) + 1)]))  # from here on, mostly healthy
    calm = draw(st.sampled_from([0.0, 0.8, 0.95, 1.0, 1.0]))
    readiness_known = draw(st.booleans())
    # A replica's first series may come late: one that had served no rate window at time zero.
    first = {n: draw(st.sampled_from([-3, -3, 0, 3, 8])) for n in names}
    expected = frozenset(draw(st.sets(st.sampled_from(names)))) if replicas else frozenset()
    samples = []
    alive = {n: True for n in names}
    for t in range(-3, int(deadline) + 1 + draw(st.integers(0, 2))):
        quiet = t >= settle and draw(st.floats(0.0, 1.0)) < calm
        if not quiet and draw(st.integers(0, 15)) == 0:
            samples.append(Sample(T0 + t, {}, "connection refused"))
            continue
        values, pods = {}, {}
        for n in names:
            if not quiet and draw(st.integers(0, 8)) == 0:
                alive[n] = not alive[n]  # a replica goes (its pod NotReady or deleted) or comes back
            kind = "healthy" if quiet else draw(st.sampled_from(["healthy", "healthy", "over", "silent"]))
            if alive[n] and kind != "silent" and t >= first[n]:
                values[n] = draw(st.sampled_from([0.1, 0.4, 0.5])) if kind == "healthy" else draw(
                    st.sampled_from([0.6, 2.0]))
            if readiness_known and (alive[n] or draw(st.booleans())):
                pods[n] = alive[n] or draw(st.booleans())
        impact = "" if quiet or draw(st.integers(0, 4)) else "the gateway failed 1.00 requests/s"
        # Replicas settled by now (all pods Ready a rate window and a scrape): known whether seen or not.
        due = frozenset(n for n in names if replicas and readiness_known and pods.get(n) and draw(st.integers(0, 3)) == 0)
        samples.append(Sample(T0 + t, values, pods=pods if readiness_known else None, impact=impact, expected=due))
    return oracles.SloCase(samples, T0, 0.5, deadline, hold, blind, scrape, draw(st.booleans()), replicas,
                           expected)


def _recovery(case: oracles.SloCase) -> Recovery:
    return Recovery(case.threshold, case.deadline, case.hold, case.blind, case.expect_impact, case.scrape,
                    case.replicas, case.expected)


@EXAMPLES
@given(slo_cases())
def test_slo_recovered_within_agrees_with_its_oracle(case):
    v = slo.judge(case.samples, case.fault_at, _recovery(case), final=True)
    ok, outcome, after = oracles.slo_recovered(case)
    assert (v.ok, v.details["outcome"]) == (ok, outcome), v.reason
    if ok:
        assert v.details["recovered_after_seconds"] == after


@EXAMPLES
@given(slo_cases(), st.floats(0.0, 1.0))
def test_an_early_slo_verdict_is_the_one_the_deadline_would_give(case, cut):
    """A probe following live decides before the deadline only what no later sample can change."""
    ordered = sorted(case.samples, key=lambda s: s.at)
    prefix = ordered[:int(len(ordered) * cut)]
    early = slo.judge(prefix, case.fault_at, _recovery(case), final=False)
    if early is not None:
        final = slo.judge(ordered, case.fault_at, _recovery(case), final=True)
        assert not early.ok and (early.ok, early.details["outcome"]) == (final.ok, final.details["outcome"])


@EXAMPLES
@given(st.dictionaries(st.sampled_from(NAMES), st.sampled_from([0.1, 0.5, 0.7])),
       st.frozensets(st.sampled_from(NAMES)))
def test_slo_under_agrees_with_its_contract(found, expected):
    class Prom:
        def custom_query(self, query):
            return [{"metric": {"pod": k}, "value": [T0, str(v)]} for k, v in found.items()]

    v = slo.under(Prom(), slo.Indicator("m", "q", "10s", by="pod"), 0.5, set(expected))
    if not found:
        assert v.judgement == "unknown"
    elif max(found.values()) > 0.5:
        assert v.judgement == "failed" and v.details["worst"] == max(found, key=found.get)
    elif set(expected) - set(found):
        assert v.judgement == "unknown"
    else:
        assert v.ok


# --- tp_groups_recovered_within (and the first moment within a budget) --------------------------------------
NODES = (NodeView("n0", {"kubernetes.io/hostname": "n0"}, cards_capacity=8, cards_allocatable=8),
         NodeView("n1", {"kubernetes.io/hostname": "n1"}, cards_capacity=8, cards_allocatable=8))


@st.composite
def moments(draw: st.DrawFn) -> tuple[list[Moment], float, float, set[str], int | None]:
    budget_ = draw(st.sampled_from([2.0, 5.0, 8.0]))
    sizes = draw(st.lists(st.sampled_from([1, 2]), min_size=1, max_size=3))
    times = sorted(set(draw(st.lists(st.integers(-4, 24), min_size=1, max_size=8))))
    found = []
    for t in times:
        pods = []
        for g, size in enumerate(sizes):
            for rank in range(size):
                if draw(st.integers(0, 6)) == 0:
                    continue  # a rank missing
                labels = {"kilocard.io/model": "m", "kilocard.io/group-size": str(size)}
                node = draw(st.sampled_from(["n0", "n1", None])) if draw(st.integers(0, 3)) == 0 else f"n{g % 2}"
                pods.append(PodView("ns", f"g{g}-{rank}", f"u{g}-{rank}-{t}", node, "m", draw(st.booleans()) or
                                    draw(st.booleans()), draw(st.integers(0, 9)) == 0, 4, f"ns/g{g}", rank, labels))
        found.append(Moment(T0 + t * 0.5, ClusterSnapshot(tuple(pods), NODES)))
    faulted = draw(st.sampled_from([set(), {"n1"}]))
    desired = draw(st.sampled_from([None, sum(sizes)]))
    return found, T0, budget_, faulted, desired


def _one_replica(*pods: PodView) -> ClusterSnapshot:
    return ClusterSnapshot(pods, NODES)


WHOLE = PodView("ns", "g0-0", "u0", "n0", "m", True, False, 4, "ns/g0", 0,
                {"kilocard.io/model": "m", "kilocard.io/group-size": "1"})


@EXAMPLES
@given(moments())
# Found: the model whole half a second before time zero and gone at time zero passed "0.0 s after the
# fault": a moment before time zero was judged although a later one stood at zero.
@example(([Moment(T0 - 0.5, _one_replica(WHOLE)), Moment(T0, _one_replica())], T0, 2.0, set(), None))
def test_tp_groups_recovered_within_agrees_with_its_oracle(case):
    found, zero, budget_, faulted, desired = case
    v = budget.first_within(found, lambda s: tp_groups.recovered(s, "m", faulted, "ns", desired), zero, budget_,
                            "the fault")
    judgement, after = oracles.first_moment(found, lambda s: oracles.recovered(s, "m", faulted, desired),
                                            zero, budget_, 0.5)
    assert v.judgement == judgement, v.reason
    assert v.details["recovered_after_seconds"] == after


@EXAMPLES
@given(moments())
def test_tp_groups_whole_agrees_with_its_oracle(case):
    for m in case[0]:
        assert tp_groups.check(m.snapshot, "m", "ns").ok == oracles.whole(m.snapshot, "m")


# --- no_hung_groups -----------------------------------------------------------------------------------
@st.composite
def hung_cases(draw: st.DrawFn) -> tuple[ClusterSnapshot, Figures]:
    pods, replicas = [], {}
    for g in range(draw(st.integers(1, 3))):
        size = draw(st.sampled_from([1, 2]))
        labels = {"kilocard.io/model": "m", "kilocard.io/group-size": str(size)}
        for rank in range(size if draw(st.integers(0, 5)) else size - 1 or 1):
            ready = draw(st.integers(0, 4)) > 0
            since = T0 - draw(st.sampled_from([5, 60, 600])) if ready else None
            pods.append(PodView("ns", f"g{g}-{rank}", f"u{g}{rank}", "n0", "m", ready, False, 4, f"ns/g{g}", rank,
                                labels, ready_since=since))
        if draw(st.integers(0, 4)):
            gauge = st.one_of(st.none(), st.sampled_from([0.0, 2.0]))
            replicas[("ns", f"g{g}-0")] = Progress(draw(st.sampled_from([0.0, 0.0, 12.0])), draw(gauge), draw(gauge),
                                                   draw(gauge))
    return ClusterSnapshot(tuple(pods), NODES), Figures(T0, replicas, draw(st.sampled_from([None, 0.0, 30.0])))


@EXAMPLES
@given(hung_cases())
def test_no_hung_groups_agrees_with_its_oracle(case):
    snapshot, figures = case
    v = hung.judge(snapshot, figures, "m", "30s")
    assert v.details["outcome"] == oracles.hung_outcome(snapshot, figures, "m", 30.0), v.reason
    assert v.ok == (v.details["outcome"] == "progressing")


# --- devices_tainted_within -----------------------------------------------------------------------------
@st.composite
def taint_cases(draw: st.DrawFn) -> tuple[list, list, float, float]:
    faults = [device_taints.XidFault("n0", card, T0 + draw(st.integers(0, 5)), draw(st.integers(0, 4)) == 0)
              for card in draw(st.sets(st.integers(0, 3), max_size=3))]
    taints = []
    for f in faults:  # mostly the driver's own taint on a faulted card, some early, late, informational or undated
        if draw(st.integers(0, 3)):
            added = draw(st.one_of(st.none(), st.integers(-3, 20).map(lambda s, at=f.applied_at: at + s)))
            effect = draw(st.sampled_from(["NoSchedule", "NoSchedule", "NoExecute", "None"]))
            taints.append(device_taints.DeviceTaint("n0", f"gpu-{f.card}", "gpu.nvidia.com/xid", "79", effect, added))
    for _ in range(draw(st.integers(0, 2))):  # and taints elsewhere
        taints.append(device_taints.DeviceTaint(draw(st.sampled_from(["n0", "n1"])), f"gpu-{draw(st.integers(0, 7))}",
                                                "gpu.nvidia.com/xid", "79", "NoSchedule", T0))
    return taints, faults, float(draw(st.sampled_from([3, 10]))), T0 + draw(st.integers(0, 25))


@EXAMPLES
@given(taint_cases())
# Found (against a change of the code, then made a change of the contract): a card untainted at
# exactly its budget's end; a taint stamped then is in time, so until then it is pending.
@example(([], [device_taints.XidFault("n0", 2, T0)], 3.0, T0 + 3.0))
def test_devices_tainted_within_agrees_with_its_oracle(case):
    taints, faults, budget_, now = case
    v = device_taints.judge(taints, faults, budget_, now)
    assert v.details["outcome"] == oracles.taint_outcome(taints, faults, budget_, now), v.reason
    assert v.ok == (v.details["outcome"] == "tainted")


# --- stop conditions ----------------------------------------------------------------------------------
@st.composite
def stop_cases(draw: st.DrawFn) -> tuple[str, ClusterSnapshot | None, dict | None, int]:
    pods = []
    for g in range(draw(st.integers(0, 3))):
        size = draw(st.sampled_from([1, 2]))
        for rank in range(size if draw(st.integers(0, 4)) else 1):
            ready = draw(st.booleans())
            pods.append(PodView("ns", f"g{g}-{rank}", f"u{g}{rank}", "n0", "m", ready, False, 4, f"ns/g{g}", rank,
                                {"kilocard.io/model": "m", "kilocard.io/group-size": str(size)},
                                ready_since=T0 - draw(st.sampled_from([10, 100])) if ready else None))
    snapshot = None if draw(st.integers(0, 5)) == 0 else ClusterSnapshot(tuple(pods), NODES)
    values = draw(st.one_of(st.none(), st.dictionaries(st.sampled_from([f"g{g}-0" for g in range(3)]),
                                                       st.sampled_from([0.2, 0.9]))))
    return draw(st.sampled_from(["zero-ready", "unhealthy", "slo"])), snapshot, values, draw(st.integers(0, 2))


@EXAMPLES
@given(stop_cases())
def test_stop_conditions_agree_with_their_oracle(case):
    kind, snapshot, values, most = case
    c = stop.Condition(kind, "m", "ns", max=most, limit=0.5, window="30s")
    fired = stop.breach(c, snapshot, values if kind == "slo" else None, T0) is not None
    assert fired == oracles.stop_fires(kind, snapshot, "m", 0.5, most, values, T0, 30.0)


# --- the run's verdict, its expectation, and faults nothing saw land -------------------------------------------
OURS = {"type": "python", "module": "probes.chaostoolkit", "func": "tp_groups_whole"}
REGEX = {"type": "regex", "target": "verdict", "pattern": "^ok$"}


@st.composite
def probe_entries(draw: st.DrawFn, steady: bool = False) -> dict:
    judgement = draw(st.sampled_from(["ok", "failed", "unknown"]))
    output = {"verdict": "ok" if judgement == "ok" else "failed", "ok": judgement == "ok", "reason": "r",
              "judgement": judgement, "impact_seen": draw(st.booleans())}
    entry = {"activity": {"type": "probe", "name": "p", "provider": OURS}, "output": output, "status": "succeeded"}
    if draw(st.booleans()) or steady:
        entry["activity"]["tolerance"] = REGEX
    if draw(st.integers(0, 5)) == 0:
        entry.update(status="failed", output=None, exception=["Traceback", "KeyError: x"])
    if steady:
        entry["tolerance_met"] = entry["status"] == "succeeded" and judgement == "ok"
    return entry


@st.composite
def journals(draw: st.DrawFn) -> dict:
    runs = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            runs.append(draw(probe_entries()))
        else:
            runs.append({"activity": {"type": "action", "name": "a", "timeout": draw(st.sampled_from([None, 5]))},
                         "status": draw(st.sampled_from(["succeeded"] * 4 + ["failed"])),
                         "duration": draw(st.sampled_from([1.0, 7.0]))})

    def state(met: bool | None) -> dict | None:
        if met is None:
            return None
        probes = draw(st.lists(probe_entries(steady=True), min_size=1, max_size=2))
        return {"steady_state_met": all(p["tolerance_met"] for p in probes), "probes": probes}

    before, after = state(draw(st.sampled_from([True, None]))), state(draw(st.sampled_from([True, None])))
    journal = {"status": draw(st.sampled_from(["completed"] * 5 + ["interrupted", "aborted", "failed"])),
               "deviated": bool(after and not after["steady_state_met"]), "run": runs,
               "steady_states": {"before": before, "after": after}}
    if journal["status"] == "interrupted" and draw(st.booleans()):
        journal["kilocard_stop"] = {"reason": "r", "blind": draw(st.booleans())}
    return journal


@EXAMPLES
@given(journals(), st.sampled_from([0, 1, 3]))
def test_the_runs_verdict_and_its_expectation_agree_with_their_oracle(journal, expected_exit):
    code, reason, basis = judgement.verdict(journal)
    assert (int(code), basis) == oracles.run_verdict(journal)
    expect = judgement.Expectation(run.Exit(expected_exit), reason[:10])
    met = judgement.judged(expect, code, reason, basis)[0] == run.Exit.PASSED
    assert met == oracles.expectation_met(expected_exit, reason[:10], int(code), reason, basis)


@EXAMPLES
@given(st.lists(st.one_of(st.none(), st.sampled_from(["confirmed", "inconclusive", "mismatch"]).map(
    lambda s: {"status": s, "evidence": "e"})), max_size=3), journals())
def test_a_fault_nothing_saw_land_agrees_with_its_oracle(landed, journal):
    outputs = [r.get("output") for r in journal["run"]]
    assert (judgement.unseen(landed, journal) is not None) == oracles.unseen(landed, outputs)


# --- placement_holds, capacity_fits, remediated_within, the guards ---------------------------------------------
@st.composite
def fleets(draw: st.DrawFn) -> ClusterSnapshot:
    nodes = tuple(NodeView(f"n{i}", {"kubernetes.io/hostname": f"n{i}", "kilocard.io/rack": f"r{i % 2}"},
                           ready=draw(st.integers(0, 5)) > 0, unschedulable=draw(st.integers(0, 5)) == 0,
                           taints=("nvidia.com/gpu-error=x:NoSchedule",) if draw(st.integers(0, 3)) == 0 else (),
                           cards_capacity=8, cards_allocatable=8) for i in range(draw(st.integers(1, 4))))
    required = ("kubernetes.io/hostname",) if draw(st.booleans()) else ()
    spread = ("kubernetes.io/hostname",) if draw(st.integers(0, 3)) == 0 else ()
    pods = []
    for g in range(draw(st.integers(0, 4))):
        size = draw(st.sampled_from([1, 2]))
        for rank in range(size):
            node = draw(st.sampled_from([None, *[n.name for n in nodes]]))
            pods.append(PodView("ns", f"g{g}-{rank}", f"u{g}{rank}", node, "m", node is not None and draw(st.booleans()),
                                draw(st.integers(0, 8)) == 0, 4, f"ns/g{g}", rank,
                                {"kilocard.io/model": "m", "kilocard.io/group-size": str(size),
                                 "kilocard.io/layers": "32", "kilocard.io/kv-heads": "8", "kilocard.io/head-dim": "128",
                                 "kilocard.io/dtype": "bfloat16"},
                                required_anti_affinity=required, hard_spread=spread,
                                kv_cache_tokens=draw(st.sampled_from([None, None, 4096, 200_000]))))
    return ClusterSnapshot(tuple(pods), nodes)


@EXAMPLES
@given(fleets(), st.sampled_from(["kubernetes.io/hostname", "kilocard.io/rack"]), st.integers(0, 2), st.booleans())
def test_placement_holds_agrees_with_its_oracle(snapshot, key, skew, guaranteed):
    from probes import placement

    v = placement.anti_affinity(snapshot, "m", key, "ns", skew, guaranteed)
    assert v.ok == oracles.placement_ok(snapshot, "m", key, skew, guaranteed), v.reason


@EXAMPLES
@given(fleets(), st.sampled_from([0.5, 5.0, 50.0]), st.sampled_from([0.0, 0.25]), st.sampled_from([(), ("n0",)]),
       st.sampled_from([0, 1536]), st.sampled_from([frozenset(), frozenset({("ns", "g0-0")})]))
def test_capacity_fits_agrees_with_its_oracle(snapshot, qps, headroom, losing, shared, without):
    from probes import capacity

    demand = capacity.Demand(qps, 2048, 256, 8.0, shared)
    per_card = 2**30
    v = capacity.fits(snapshot, "m", demand, headroom, per_card, losing, "ns", without)
    per_token = capacity.kv_bytes_per_token(32, 8, 128, "bfloat16")
    assert v.ok == oracles.capacity_ok(snapshot, "m", qps * 8.0 * (2048 - shared + 256), per_token, headroom, per_card,
                                       losing, shared, without)


@EXAMPLES
@given(st.lists(fleets(), min_size=1, max_size=5), st.lists(st.integers(-4, 16), min_size=1, max_size=5),
       st.sampled_from([2.0, 6.0]))
def test_remediated_within_agrees_with_its_oracle(fleets_, times, budget_):
    from chaos.vocabulary import QUARANTINE_LABELS, QUARANTINE_TAINTS
    from probes import remediation

    found = [Moment(T0 + t * 0.5, s) for t, s in zip(sorted(set(times)), fleets_, strict=False)]
    v = budget.first_within(found, lambda s: remediation.check(s, "n0", ("m",), "ns"), T0, budget_, "the fault")
    judgement, after = oracles.first_moment(
        found, lambda s: oracles.quarantined_and_drained(s, "n0", ("m",), QUARANTINE_TAINTS, QUARANTINE_LABELS),
        T0, budget_, 0.5)
    assert (v.judgement, v.details["recovered_after_seconds"]) == (judgement, after), v.reason


@EXAMPLES
@given(fleets(), st.data())
def test_the_guards_agree_with_their_oracle(snapshot, data):
    from chaos import guards
    from probes.verdict import failed, passed

    live = [p for p in snapshot.pods if not p.deleting]
    taken = {(p.namespace, p.name): p for p in data.draw(st.lists(st.sampled_from(live), unique=True))} if live else {}
    if data.draw(st.booleans()):
        taken[("other", "sidecar")] = None  # a pod of no model
    r = guards.Radius(pods=taken, nodes=set(data.draw(st.lists(st.sampled_from(["n0", "n1", "n2"]), unique=True))),
                      cards=data.draw(st.integers(0, 40)))
    room_ok = {("ns", "m"): data.draw(st.booleans())} if data.draw(st.booleans()) else {}
    r.room = {k: passed("room") if ok else failed("no room") for k, ok in room_ok.items()}
    lim = guards.Limits(max_pods=data.draw(st.integers(0, 4)), max_nodes=data.draw(st.integers(0, 3)),
                        max_cards=data.draw(st.sampled_from([8, 64])), min_ready=data.draw(st.integers(0, 2)),
                        room=data.draw(st.booleans()), require_opt_in=data.draw(st.booleans()),
                        contexts=data.draw(st.sampled_from([(), ("prod",)])))
    opted = set(data.draw(st.lists(st.sampled_from(["ns", "other"]), unique=True)))
    context = data.draw(st.sampled_from([None, "prod", "dev"]))
    said = guards.judge(r, snapshot, lim, opted, context)
    refused = {name for name in ("max_pods", "max_nodes", "max_cards", "min_ready", "room", "contexts")
               if any(line.startswith(name) or f"'s {name} " in line for line in said)}
    refused |= {"require_opt_in"} if any("opted in" in line for line in said) else set()
    assert refused == oracles.guard_refusals(taken, r.nodes, r.cards, snapshot, lim, opted, room_ok, context), said


# --- incident_symptoms --------------------------------------------------------------------------------
OFFSETS = st.sampled_from([-5.0, 0.0, 3.0, 10.0, 14.0, 15.0, 16.0, 30.0, 44.0, 45.0, 60.0])
OWNERS = ("rs-a", "rs-b")


@st.composite
def incidents(draw: st.DrawFn) -> tuple[dict, dict, list, list, float]:
    """Symptoms as record writes them, a replay's firings and replacements, how long it watched."""
    alerts = draw(st.lists(st.fixed_dictionaries({
        "alert": st.sampled_from(["Slow", "Down"]), "labels": st.sampled_from([{}, {"model_name": "m"}]),
        "firing_at": OFFSETS.filter(lambda x: x >= 0)}), max_size=2))
    took = st.one_of(st.none(), st.sampled_from([1.0, 5.0, 20.0]))  # each phase, from the deletion
    replicas = draw(st.lists(st.builds(
        lambda owner, deleted, phases: {"owner": owner, "pod": f"{owner}-x", "deleted": deleted,
                                        **{p: deleted + t for p, t in phases.items() if t is not None}},
        st.sampled_from(OWNERS), OFFSETS.filter(lambda x: x >= 0),
        st.fixed_dictionaries({"scheduled": took, "started": took, "ready": took})), max_size=4))
    symptoms = {"tolerance": draw(st.sampled_from([0.0, 5.0, 15.0])), "alerts": alerts, "replicas": replicas}
    firings = draw(st.lists(st.builds(
        lambda name, labels, at, lasted: incident.Firing(name, labels, at, None if lasted is None else at + lasted),
        st.sampled_from(["Slow", "Down", "Other"]),
        st.sampled_from([{}, {"model_name": "m", "pod": "p1"}, {"model_name": "n"}]), OFFSETS,
        st.one_of(st.none(), st.sampled_from([1.0, 20.0, 40.0]))), max_size=3))
    spent = st.one_of(st.none(), st.sampled_from([0.5, 1.0, 5.0, 6.0, 20.0, 25.0, 30.0]))  # some at tolerances
    replaced = draw(st.lists(st.builds(
        lambda owner, deleted, started, scheduled, ready: incident.Replacement(
            owner, f"{owner}-y", deleted, *(None if t is None else deleted + t for t in (started, scheduled, ready))),
        st.sampled_from(OWNERS), OFFSETS.filter(lambda x: x >= 0), spent, spent, spent), max_size=4))
    # Budgets that equal the spans drawn above: the boundaries are where a verdict flips.
    fix = {"alerts": draw(st.dictionaries(st.sampled_from(["Slow", "Down"]), st.builds(
        lambda s: {"resolved_within": s}, st.sampled_from([1.0, 10.0, 20.0, 40.0])), max_size=2)),
           **draw(st.sampled_from([{}, *({"replicas": {key: b}} for b in (4.0, 10.0, 12.0, 30.0)
                                         for key in ("started_within", "ready_within"))]))}
    return symptoms, fix, firings, replaced, draw(st.sampled_from([10.0, 30.0, 35.0, 45.0, 61.0, 90.0]))


@st.composite
def slo_symptoms(draw: st.DrawFn) -> tuple[dict, list, list, float, float, float | None]:
    """An SLO symptom, a replay's readings of two replicas (a replica silent, its pod deleted or
    not, a query failed), the replay's deletions, the tolerance, how long it watched, a fix's budget."""
    symptom = {"model": "m", "indicator": "ttft_p95", "threshold": 0.5, "breached_at": draw(OFFSETS.filter(
        lambda x: x >= 0)), "recovered_at": None}
    until = draw(st.sampled_from([10.0, 30.0, 45.0, 61.0]))
    readings = []
    for t in range(-4, int(until) + 1, draw(st.sampled_from([1, 3]))):
        if draw(st.integers(0, 12)) == 0:
            readings.append(incident.Reading(float(t), None))  # the query failed
            continue
        values = {n: draw(st.sampled_from([0.2, 0.5, 0.9])) for n in ("a", "b") if draw(st.integers(0, 5))}
        readings.append(incident.Reading(float(t), values))
    replaced = draw(st.lists(st.builds(lambda pod, at: incident.Replacement("rs", pod, at, None),
                                       st.sampled_from(["a", "b"]), st.sampled_from([-2.0, 0.0, 5.0, 20.0])),
                             max_size=2))
    budget = draw(st.sampled_from([None, 3.0, 9.0, 20.0]))
    return symptom, readings, replaced, draw(st.sampled_from([0.0, 3.0, 15.0])), until, budget


@EXAMPLES
@given(slo_symptoms())
def test_an_slo_symptom_agrees_with_its_oracle(case):
    symptom, readings, replaced, tol, until, budget = case
    slos = {"tolerance": tol, "slo": [symptom]}
    fix = {} if budget is None else {"slo": {"m": {"recovered_within": budget}}}
    by = {incident.slo_key(symptom): readings}
    deleted = {}
    for r in replaced:  # the replay's record of each pod's deletion: the last one told
        deleted[r.pod] = r.deleted
    assert incident.reproduced(slos, [], replaced, until, by).judgement == oracles.incident_slo(
        symptom, readings, deleted, tol, until, "reproduced", budget)
    assert incident.fixed(slos, fix, [], replaced, until, by).judgement == oracles.incident_slo(
        symptom, readings, deleted, tol, until, "fixed", budget)


@EXAMPLES
@given(incidents())
def test_incident_symptoms_agree_with_their_oracle(case):
    symptoms, fix, firings, replaced, until = case
    v = incident.reproduced(symptoms, firings, replaced, until)
    assert v.judgement == oracles.incident_reproduced(symptoms, firings, replaced, until)
    # Row by row too: a symptom judged wrongly behind another that failed changes no verdict.
    assert [r["judgement"] for r in v.details["symptoms"]] == oracles.incident_rows(symptoms, firings, replaced, until)
    assert incident.fixed(symptoms, fix, firings, replaced, until).judgement == oracles.incident_fixed(
        symptoms, fix, firings, replaced, until)


# --- straggler_named_within ------------------------------------------------------------------------------
@st.composite
def straggler_cases(draw: st.DrawFn) -> list:
    from probes import straggler

    replicas = [f"r{i}" for i in range(draw(st.integers(1, 4)))]
    slow = draw(st.sampled_from([*replicas, None]))
    onset = draw(st.sampled_from([-5, 0, 3, 10, 40]))
    samples = []
    for t in range(-6, 50, draw(st.sampled_from([1, 2, 5]))):
        if draw(st.integers(0, 19)) == 0:
            samples.append(straggler.Sample(T0 + t, {}, None, "Prometheus down"))
            continue
        values = {}
        for r in replicas:
            if draw(st.integers(0, 14)) == 0:
                continue  # silent here
            base = draw(st.sampled_from([0.04, 0.05, 0.06]))
            factor = draw(st.sampled_from([1.2, 1.5, 2.0])) if r == slow and t >= onset else 1.0
            values[r] = base * factor
        ready = draw(st.one_of(st.none(), st.just(frozenset(replicas)), st.frozensets(st.sampled_from(replicas))))
        samples.append(straggler.Sample(T0 + t, values, ready))
    return samples


@EXAMPLES
@given(straggler_cases(), st.sampled_from([1.3, 1.6]), st.sampled_from([0.0, 4.0, 10.0]),
       st.sampled_from([20.0, 45.0]), st.sampled_from([0.0, 3.0]), st.sampled_from([1, 2]))
def test_straggler_named_within_agrees_with_its_oracle(samples, ratio, hold, budget_, blind, peers):
    from probes import straggler

    v = straggler.judge(samples, T0, straggler.Rule(ratio, hold, budget_, blind, peers))
    outcome, named, after = oracles.straggler_outcome(samples, T0, ratio, hold, budget_, blind, peers)
    assert v.details["outcome"] == outcome, v.reason
    assert v.details.get("straggler") == named and v.details.get("named_after_seconds") == (
        None if after is None else round(after, 3)), v.reason
    assert v.ok == (outcome == "named")


# --- image_pulls_failed ------------------------------------------------------------------------------
@st.composite
def pulls_cases(draw: st.DrawFn) -> list:
    pods = draw(st.lists(st.tuples(st.sampled_from(["u1", "u2", "u3", "u4"]), st.integers(0, 8)), max_size=4,
                         unique_by=lambda p: p[0]))  # (uid, the moment it appears)
    moments = []
    for i in range(draw(st.integers(0, 9))):
        here = []
        for uid, born in pods:
            if i >= born:
                waiting = draw(st.sampled_from([None, None, "ContainerCreating", "ErrImagePull", "ImagePullBackOff"]))
                here.append(PodAt(uid, f"pod-{uid}", draw(st.booleans()), waiting))
        moments.append((T0 + 2 * i, here))
    return moments


@EXAMPLES
@given(pulls_cases())
# A moment that shows a replacement Ready and waiting at once: the wait counts (it came no later).
@example([(T0, []), (T0 + 2, [PodAt("u1", "pod-u1", True, "ErrImagePull")])])
def test_image_pulls_failed_agrees_with_its_oracle(moments):
    from probes import pulls

    v = pulls.judge(moments, "m", T0)
    outcome, named = oracles.pulls_outcome(moments)
    assert v.details["outcome"] == outcome, v.reason
    assert v.ok == (outcome == "failed_pulls")
    if outcome == "pulled":
        assert v.details["pulled"] == named
    if outcome == "failed_pulls":
        assert sorted(v.details["failed_pulls"]) == named


# --- kv_cache_within ---------------------------------------------------------------------------------
@st.composite
def kv_cases(draw: st.DrawFn) -> tuple:
    replicas = draw(st.lists(st.sampled_from(["r0", "r1", "r2"]), min_size=1, max_size=3, unique=True))
    samples, counters = [], {r: draw(st.sampled_from([0.0, 0.0, 3.0])) for r in replicas}
    for i in range(draw(st.integers(0, 10))):
        counts, usage = {}, {}
        for r in replicas:
            if draw(st.integers(0, 9)) == 0:
                continue  # silent here
            step = draw(st.sampled_from([0.0, 0.0, 0.0, 0.5, 2.0, -1.0]))
            counters[r] = 0.5 if step < 0 else counters[r] + step  # -1: a restart, counting from 0 again
            counts[r] = counters[r]
            usage[r] = draw(st.sampled_from([0.0, 0.005, 0.3, 0.97, 1.0]))
        ready = draw(st.sampled_from([None, frozenset(replicas), frozenset(replicas[:1])]))
        error = draw(st.sampled_from(["", "", "", "", "down"]))
        samples.append(kv.Sample(T0 - 10 + 5 * i, counts, usage, ready, error))
    bounds = kv.Bounds(draw(st.sampled_from([20.0, 40.0])), draw(st.sampled_from([0.0, 1.0])),
                       draw(st.sampled_from([0.98, 1.0])), draw(st.sampled_from([0.0, 0.01, 0.5])))
    return samples, bounds


@EXAMPLES
@given(kv_cases())
def test_kv_cache_within_agrees_with_its_contract(case: tuple) -> None:
    samples, b = case
    v = kv.judge(samples, T0, b)
    outcome, named = oracles.kv_outcome(samples, T0, b.duration, b.max_preemptions, b.max_usage, b.min_usage)
    assert v.details["outcome"] == outcome, v.reason
    assert v.ok == (outcome == "within")
    if outcome in ("preempted", "over_usage"):
        assert v.details["replica"] == named, v.reason


# --- client_errors_within ----------------------------------------------------------------------------
@st.composite
def client_cases(draw: st.DrawFn) -> tuple:
    from probes.client_errors import Request

    requests = [Request(T0 + draw(st.floats(-5, 40, allow_nan=False)),
                        draw(st.sampled_from([None, None, None, "http_503", "connection_reset", "timeout"])),
                        draw(st.booleans())) for _ in range(draw(st.integers(0, 30)))]
    in_flight = tuple(T0 + t for t in draw(st.lists(st.floats(-5, 40, allow_nan=False), max_size=2)))
    return requests, in_flight, draw(st.sampled_from([5.0, 15.0])), draw(st.sampled_from([5.0, 10.0])), \
        draw(st.sampled_from([None, 0.0, 3.0])), draw(st.sampled_from([1, 5]))


@EXAMPLES
@given(client_cases())
def test_client_errors_within_agrees_with_its_contract(case: tuple) -> None:
    from probes import client_errors

    requests, in_flight, budget_, hold, max_window, least = case
    v = client_errors.judge(requests, T0, client_errors.Rule(budget_, hold, max_window, least), in_flight)
    outcome = oracles.client_errors_outcome(requests, T0, budget_, hold, max_window, least, in_flight)
    assert v.details["outcome"] == outcome, v.reason
    assert v.ok == (outcome in ("clean", "recovered"))


# --- traffic_spread_within ---------------------------------------------------------------------------
@st.composite
def spread_cases(draw: st.DrawFn) -> tuple:
    from probes.spread import Sample

    samples, counters = [], {n: draw(st.floats(0, 50, allow_nan=False)) for n in NAMES}
    noisy = draw(st.booleans())  # silent series and failed queries, or none (most cases would be unknown)
    steps = [0.0, 1.0, 5.0, 10.0, 10.0, -100.0, *([None] if noisy else [])]  # -100: a restart; None: silent
    for t in sorted(draw(st.lists(st.sampled_from(range(-12, 40, 2)), min_size=1, max_size=26, unique=True))):
        shown = {}
        for n in NAMES:
            step = draw(st.sampled_from(steps))
            if step is None:
                continue
            counters[n] = max(0.0, counters[n] + step)
            shown[n] = counters[n]
        ready = draw(st.sampled_from([None, frozenset(NAMES), frozenset("ab")]))
        samples.append(Sample(T0 + t, shown, ready, draw(st.sampled_from(["", "", "", "", "timeout"])) if noisy else ""))
    return samples, draw(st.sampled_from([0.0, 10.0, 20.0])), draw(st.sampled_from([4.0, 10.0])), \
        draw(st.sampled_from([2.0, 10.0])), draw(st.sampled_from([0.25, 0.5, 0.9]))


@EXAMPLES
@given(spread_cases())
@example(([spread.Sample(T0 - 12, {"a": 0.0, "b": 0.0, "c": 0.0}),
           spread.Sample(T0 + 14, {"a": 5.0, "b": 5.0, "c": 10.0}),
           spread.Sample(T0 + 22, {"a": 15.0, "b": 15.0, "c": 20.0})], 20.0, 4.0, 10.0, 0.9))  # a share of 0.9 exactly, against a bound of 0.9: met
def test_traffic_spread_within_agrees_with_its_contract(case: tuple) -> None:
    samples, budget_, hold, window, least = case
    v = spread.judge(samples, T0, spread.Rule(budget_, hold, window, least))
    outcome, named = oracles.spread_outcome(samples, T0, budget_, hold, window, least)
    assert v.details["outcome"] == outcome, v.reason
    assert v.ok == (outcome == "spread")
    if named is not None:
        assert v.details["replica"] == named, v.reason


@st.composite
def starting_cases(draw: st.DrawFn) -> tuple[ClusterSnapshot, list[tuple[str | None, str]], float]:
    pods = []
    for i in range(draw(st.integers(0, 6))):
        model, namespace = draw(st.sampled_from(["a", "b"])), draw(st.sampled_from(["ns", "other"]))
        ready = draw(st.booleans())
        since = draw(st.sampled_from([None, T0 - 500, T0 - 120, T0 - 119.5, T0 - 30, T0])) if ready else None
        pods.append(PodView(namespace, f"p{i}", f"u{i}", "n0", model, ready, draw(st.booleans()), 8, f"{namespace}/p{i}",
                            0, {}, ready_since=since))
    named = draw(st.lists(st.tuples(st.sampled_from([None, "ns", "other"]), st.sampled_from(["a", "b", "c"])),
                          max_size=3))
    return ClusterSnapshot(tuple(pods), ()), named, draw(st.sampled_from([60.0, 120.0]))


@EXAMPLES
@given(starting_cases())
@example((ClusterSnapshot((PodView("ns", "p0", "u0", "n0", "a", True, False, 8, "ns/p0", 0, {},
                                   ready_since=T0 - 120),), ()), [("ns", "a")], 120.0))  # exactly `young` ago: settled
def test_the_steady_states_wait_for_a_starting_fleet_agrees_with_its_contract(case: tuple) -> None:
    snapshot, named, young = case
    said = settle.starting(snapshot, named, T0, young)
    assert {line.split(":", 1)[0] for line in said} == oracles.still_starting(list(snapshot.pods), named, T0, young)


disruptions = st.lists(st.tuples(st.floats(0, 1e4), st.sampled_from(["fault", "action"]), st.text(max_size=4)),
                       max_size=6)


@given(disruptions, st.booleans(), st.none() | st.floats(0, 1e4))
def test_time_zero_never_starts_after_a_disruption_it_times(found, first, since):
    """The contract's words: from the run's first disruption, no later than any; from its last, no
    earlier than any; each one of them; with none, `since`."""
    from chaos import timezero

    faults = [(at, name) for at, who, name in found if who == "fault"]
    actions = [timezero.Action(name, "chaosk8s.pod.actions", at - 1, at) for at, who, name in found if who == "action"]
    zero = timezero.choose(faults, actions, first, since)
    times = [at for at, _who, _name in found]
    if not times:
        assert zero == (None if since is None else (since, "since"))
        return
    assert zero is not None
    assert zero[0] in times
    assert all(zero[0] <= t for t in times) if first else all(zero[0] >= t for t in times)
    mixed = {who for _at, who, _name in found} == {"fault", "action"}
    assert zero[1].endswith(f"the run's {'first' if first else 'last'} disruption") == mixed, zero
