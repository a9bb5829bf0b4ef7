"""A concrete fix for each failing probe, drawn from what it found: the manifest stanza a model
whose replicas can pile up lacks, the cards a model short of KV capacity needs, the phase that
ate a recovery budget. One function per probe (by its function name in probes.chaostoolkit); a
probe with no hint gets none rather than a platitude."""

from __future__ import annotations

import math
from collections.abc import Callable

from chaos.report.journal import SPANS, Check, Run
from chaos.vocabulary import KV_BYTES_PER_CARD, MODEL_LABEL

Hint = Callable[[Check, Run], "str | None"]
_HINTS: dict[str, Hint] = {}


def hint(check: Check, run: Run) -> str | None:
    """The fix for a failed check, or None (it passed, or nothing concrete can be said)."""
    if check.ok:
        return None
    found = _HINTS.get(check.func)
    return found(check, run) if found else None


def _for(*funcs: str) -> Callable[[Hint], Hint]:
    def register(fn: Hint) -> Hint:
        for name in funcs:
            _HINTS[name] = fn
        return fn
    return register


def _argument(check: Check, run: Run, name: str, default: str = "") -> str:
    """An argument of the probe: as its output echoes it, else as the run gave it."""
    if name in check.output:
        return str(check.output[name])
    found = run.argument(check.name, name)
    return default if found is None else str(found)


@_for("placement_holds")
def _anti_affinity(check: Check, run: Run) -> str:
    model = _argument(check, run, "model", "MODEL")
    key = _argument(check, run, "topology_key", "kubernetes.io/hostname")
    crowded = check.output.get("crowded") or {}
    today = ", ".join(f"{n} replicas on {d}" for d, n in sorted(crowded.items()))
    where = f" Today: {today}." if crowded else ""
    return (f"Keep {model}'s replicas apart by rule, not by luck: add required anti-affinity on {key} to its pod "
            f"template (the scheduler then leaves a replacement Pending rather than doubling up).{where}\n"
            "spec:\n  template:\n    spec:\n      affinity:\n        podAntiAffinity:\n"
            "          requiredDuringSchedulingIgnoredDuringExecution:\n"
            f"          - labelSelector:\n              matchLabels: {{{MODEL_LABEL}: {model}}}\n"
            f"            topologyKey: {key}")


def _tp_size(run: Run, model: str) -> int:
    for side in ("before", "after"):
        for node in run.placement.get(side) or []:
            for pod in node.get("pods") or []:
                if pod.get("model") == model and pod.get("cards"):
                    return int(pod["cards"])
    return 1


@_for("capacity_fits")
def _capacity(check: Check, run: Run) -> str | None:
    o = check.output
    if "need_bytes" not in o or "supply_bytes" not in o:
        return None
    model = str(o.get("model", "the model"))
    short = float(o["need_bytes"]) - float(o["supply_bytes"])
    cards = math.ceil(short / KV_BYTES_PER_CARD)
    tp = _tp_size(run, model)
    replicas = math.ceil(cards / tp)
    return (f"{model} is {short / 2**30:.1f} GiB of KV cache short: at least {cards} more cards "
            f"({KV_BYTES_PER_CARD / 2**30:.0f} GiB of KV each), that is {replicas} more TP={tp} replica(s) "
            f"beyond its {o.get('serving_replicas', '?')} Ready ones; or shed load before it reaches this model.")


@_for("room_to_reschedule")
def _room(check: Check, run: Run) -> str | None:
    o = check.output
    if not o.get("unplaced"):
        return None
    return (f"{o['unplaced']} has nowhere to go: {o.get('free_cards', '?')} cards are free across the nodes it may "
            f"use, the largest block on one node is {o.get('largest_free_block', '?')}. Keep one spare node's worth "
            "of cards (a TP group needs its cards on one node) in the pool its node selector and tolerations allow, "
            "or a lower-priority workload it may preempt.")


@_for("tp_groups_whole")
def _whole(check: Check, run: Run) -> str | None:
    problems = check.output.get("problems") or []
    if not problems:
        return None
    return ("A TP group split across nodes, or partly Ready, waits on its slowest member: schedule each group as a "
            "unit (LeaderWorkerSet with exclusive topology, or one pod per group holding all its cards), and gate "
            "traffic on the whole group's readiness. Found: " + "; ".join(map(str, problems)))


def _slowest_phase(run: Run) -> str:
    """Which recovery phase took longest, across the replicas (from the journal's recovery)."""
    spans: dict[str, float] = {}
    for replica in run.recovery:
        for phase, since in SPANS:
            # The old pod's drain runs beside its replacement's start; it delays recovery only
            # when the replacement waited for it (scheduled after the old pod was gone).
            waited = replica.get("scheduled") is None or replica.get("gone") is None or \
                replica["scheduled"] >= replica["gone"]
            if phase == "gone" and not waited:
                continue
            if replica.get(phase) is not None and replica.get(since) is not None:
                spans[phase] = max(spans.get(phase, 0.0), float(replica[phase]) - float(replica[since]))
    if not spans:
        return ""
    phase, seconds = max(spans.items(), key=lambda kv: kv[1])
    failed = [float(r["pull_failed"]) for r in run.recovery if r.get("pull_failed") is not None]
    if phase == "started" and failed:
        return (f" The slowest phase was the image pull, which failed from {min(failed):.1f} s and waited out the "
                f"outage and the kubelet's back-off: up to {seconds:.1f} s (a registry mirror in the cluster, or the "
                "engine image pre-pulled on every node).")
    cure = {"gone": "the old pod's drain (terminationGracePeriodSeconds, preStop)",
            "scheduled": "scheduling (free cards in one piece, the node pool's taints and selectors)",
            "started": "the image pull (pre-pull the engine image on every node)",
            "ready": "start-up to Ready (weights loading and warm-up: a local weight cache, smaller shards)",
            "created": "the controller recreating the pod", "deleted": "the fault itself"}[phase]
    return f" The slowest phase was {cure}: up to {seconds:.1f} s."


@_for("tp_groups_recovered_within")
def _tp_recovery(check: Check, run: Run) -> str:
    budget = _argument(check, run, "budget", "?")
    stuck = check.output.get("stuck") or []
    if stuck:
        return (f"Pods still on the faulted nodes after {budget} s: {', '.join(stuck)}. A dead node's pods stay "
                "Terminating until it is marked out of service or deleted: automate that (node.kubernetes.io/"
                "out-of-service taint) so their replacements can start.")
    return f"The model was not whole and Ready within its {budget} s budget.{_slowest_phase(run)}"


@_for("remediated_within")
def _remediation(check: Check, run: Run) -> str:
    node = check.output.get("node") or "the faulted node"
    left = check.output.get("left") or []
    if left:
        return (f"{node} was quarantined but still runs {', '.join(left)}: the remediator must also drain it "
                "(evict with grace; a PodDisruptionBudget may be blocking).")
    return (f"Nothing quarantined {node} in time: check that the remediator (NVSentinel or the like) is running and "
            "not in dry-run, that an alert fires on the card's health metric (ECC DBE, XID), and that its "
            "circuit breaker has not tripped.")


@_for("slo_recovered_within", "slo_under")
def _slo(check: Check, run: Run) -> str | None:
    o = check.output
    outcome, worst = o.get("outcome"), o.get("worst")
    if outcome == "no_impact":
        return ("The fault never showed in the indicator: confirm it landed (the fault's own record, the node's "
                "agent), that the model had load during the window, and that the threshold is not far above the "
                "steady state. A fault that should hurt and did not proves nothing.")
    if outcome == "unknown":
        return ("No data, or the indicator was already over its threshold at the fault: fix the query or the "
                "steady state first; a verdict on no data is never a pass.")
    if worst:
        return (f"The worst replica was {worst} (peak {float(o.get('peak') or o.get('value') or 0):.3f} against "
                f"{o.get('threshold')}). Take a slow TP group out of rotation (remediation on the card's health "
                "signal, or an outlier-ejecting router) instead of waiting for it.")
    return None
