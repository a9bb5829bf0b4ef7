"""Guards: limits a run may not pass, checked against the resolved plan and the cluster before
anything is applied. A refusal is invalid input: exit 2, naming the limit and the figure.

    max_pods, max_nodes, max_cards   the blast radius of the whole run (defaults 16, 4, 64)
    min_ready                        Ready replicas (TP groups whole and Ready) left per model it
                                     touches (default 1)
    room                             the replicas driven off their nodes have somewhere to go
                                     (probes.capacity.room); false when the lack of room is what
                                     the experiment rehearses (default true)
    require_opt_in                   every namespace whose pods it ends or displaces carries
                                     kilocard.io/chaos=enabled (default true)
    contexts                         the kubeconfig contexts a run may act on (default: any); a
                                     run in-cluster has no context and is refused by a list

The strict runner (chaos.run) applies them to every experiment, with the defaults unless the
experiment declares this module as a Chaos Toolkit control with its own arguments:

    controls:
    - name: kilocard-guards
      provider: {type: python, module: chaos.guards, arguments: {max_pods: 40, min_ready: 0}}

Declared, the control also judges each kilocard action as it runs (targets move while an
experiment goes on), under plain `chaos run` too: the very plan the action resolved, just before it
executes (a judge of chaos.plan), never one made again. A breach applies nothing of that action,
then interrupts the run (exit 3; the journal says what the guard refused).

The blast radius comes from each fault kind's own `disrupts`. Which pod holds a given card is not
in the API, so a fault that drives off a card's pod counts every card-holding pod of that node.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from chaoslib.exceptions import InterruptExecution, InvalidActivity

from chaos import actions
from chaos import plan as planning
from chaos.errors import NotFound, SpecError
from chaos.fields import boolean, integer, mapping, read, strings
from chaos.judgement import GUARD_KEY
from chaos.vocabulary import CHAOS_OPT_IN_LABEL
from probes import capacity
from probes import snapshot as snap
from probes.snapshot import ClusterSnapshot, PodView, whole_and_ready
from probes.verdict import Contract, Verdict

MODULE = "chaos.guards"


class GuardRefused(SpecError):
    """A guard refuses the run: nothing was applied."""


_BEFORE = ("before anything is applied, on the plan resolved against one snapshot; declared as a control, "
           "again on the plan each kilocard action resolves, just before it executes that very plan")
_REFUSES = ("a refusal before the run exits 2 with nothing applied; mid-run (the control) it applies nothing of that "
            "action and aborts the run (exit 3, reverted, the refusal in the journal); an error reading the cluster "
            "fails the run (before anything runs, or that action)")
CONTRACTS = (
    Contract("max_pods, max_nodes, max_cards", "guard", judge=("chaos.guards.radius", "chaos.guards.judge"),
             asserts="the run's blast radius stays within the limits: pods it ends or drives off their nodes, nodes "
                     "it touches, cards those pods hold or it takes out of service",
             time_zero=_BEFORE, interval="the whole run's plan at once",
             missing="which pod holds a given card is not in the API: a fault that drives off a card's pod counts "
                     "every card-holding pod of that node",
             exceptions=_REFUSES, outcomes=(("allowed", "within every limit"), ("refused", "past one, named"))),
    Contract("min_ready", "guard", judge=("chaos.guards.judge",),
             asserts="every model the run takes pods from keeps at least `min_ready` Ready replicas (TP groups "
                     "whole and every member Ready, none of them a pod the run takes)",
             time_zero=_BEFORE, interval="the snapshot the plan was resolved on",
             missing="a model with no replica counts 0", exceptions=_REFUSES,
             outcomes=(("allowed", "enough left"), ("refused", "fewer, with before and after"))),
    Contract("room", "guard", judge=("chaos.guards.judge",),
             asserts="the replicas the run drives off their nodes could be placed elsewhere (room_to_reschedule)",
             time_zero=_BEFORE, interval="the snapshot the plan was resolved on",
             missing="as room_to_reschedule", exceptions=_REFUSES,
             outcomes=(("allowed", "room, or room: false"), ("refused", "no room, named"))),
    Contract("require_opt_in", "guard", judge=("chaos.guards.judge",),
             asserts="every namespace whose pods the run ends or displaces carries kilocard.io/chaos=enabled",
             time_zero=_BEFORE, interval="the namespaces' labels at the check",
             missing="a namespace not found has not opted in", exceptions=_REFUSES,
             outcomes=(("allowed", "every one opted in"), ("refused", "one has not, named"))),
    Contract("contexts", "guard", judge=("chaos.guards.judge",),
             asserts="the kubeconfig context is one of `contexts` (an in-cluster run has none: refused by a list)",
             time_zero=_BEFORE, interval="the connection's context", missing="no context is not one of them",
             exceptions=_REFUSES, outcomes=(("allowed", "listed, or no list"), ("refused", "not listed"))),
)


@dataclass(frozen=True)
class Limits:
    max_pods: int = 16
    max_nodes: int = 4
    max_cards: int = 64
    min_ready: int = 1
    room: bool = True
    require_opt_in: bool = True
    contexts: tuple[str, ...] = ()


SCHEMA = mapping(MODULE, "Limits the run may not pass, checked against the resolved plan and the cluster before "
                 "anything is applied (and, declared, before each kilocard action).", {
                     "max_pods": integer(0, 100_000, "pods the run may disrupt", Limits.max_pods),
                     "max_nodes": integer(0, 100_000, "nodes the run may touch", Limits.max_nodes),
                     "max_cards": integer(0, 1_000_000, "cards the run may take away", Limits.max_cards),
                     "min_ready": integer(0, 100_000, "Ready replicas left per model it touches", Limits.min_ready),
                     "room": boolean("the replicas driven off their nodes must have somewhere to go", Limits.room),
                     "require_opt_in": boolean("every namespace whose pods it ends or displaces carries "
                                               f"{CHAOS_OPT_IN_LABEL}=enabled", Limits.require_opt_in),
                     "contexts": strings("the kubeconfig contexts the run may act on (default: any)",
                                         ["kind-kilocard"]),
                 }, example={"max_pods": 40, "min_ready": 0})


def limits(arguments: Any, where: str) -> Limits:
    values = read(SCHEMA, arguments if arguments is not None else {}, where)
    return Limits(**{**values, "contexts": tuple(values["contexts"] or ())})


def declared(experiment: dict[str, Any], source: str) -> Limits:
    """The limits an experiment declares as this module's control, else the defaults."""
    controls = [(i, c) for i, c in enumerate(experiment.get("controls") or [])
                if isinstance(c, dict) and (c.get("provider") or {}).get("module") == MODULE]
    if len(controls) > 1:
        raise SpecError(f"{source}: controls: {MODULE} declared {len(controls)} times; declare it once")
    if not controls:
        return Limits()
    i, control = controls[0]
    return limits((control.get("provider") or {}).get("arguments"), f"{source}: controls[{i}].provider.arguments")


@dataclass
class Radius:
    """What a plan takes away, resolved against a snapshot."""

    pods: dict[tuple[str, str], PodView | None] = field(default_factory=dict)  # None: a pod of no model
    nodes: set[str] = field(default_factory=set)
    cards: int = 0
    evicted_nodes: set[str] = field(default_factory=set)
    # Per (namespace, model) it drives replicas off their nodes: where they could go.
    room: dict[tuple[str, str], Verdict] = field(default_factory=dict)

    def models(self) -> set[tuple[str, str]]:
        return {(p.namespace, p.model) for p in self.pods.values() if p is not None}


def radius(plan: planning.Plan, s: ClusterSnapshot) -> Radius:
    live = {(p.namespace, p.name): p for p in s.pods if not p.deleting}
    r = Radius()
    out_of_service: set[tuple[str, int]] = set()
    for fault in plan.faults:
        for record in fault.records:
            d = fault.module.disrupts(fault.spec, record.target)
            for key in d.pods:
                r.pods[key] = live.get(key)
            if d.node:
                r.nodes.add(d.node)
            out_of_service |= {(d.node or "", c) for c in d.cards}
            if d.evicts in ("node", "cards"):
                # A drained card's pod may not fit its node again (a TP=8 pod never does): its
                # room is looked for as if the node were gone.
                r.evicted_nodes.add(d.node or "")
                r.pods.update({k: p for k, p in live.items() if p.node == d.node and (d.evicts == "node" or p.cards)})
    held_on = {p.node for p in r.pods.values() if p is not None and p.cards}
    r.cards = sum(p.cards for p in r.pods.values() if p is not None) + sum(
        1 for node, _ in out_of_service if node not in held_on)
    displaced = {(p.namespace, p.model) for p in r.pods.values() if p is not None and p.node in r.evicted_nodes}
    r.room = {(ns, model): capacity.room(s, model, tuple(sorted(r.evicted_nodes)), ns)
              for ns, model in sorted(displaced)}
    return r


def reached(plan: planning.Plan, s: ClusterSnapshot) -> set[tuple[str, str]]:
    """(namespace, model) of every replica the plan's faults touch, on `s`: a pod they end, or a
    pod on a node they act on (a card's errors, the node's network or kubelet). Wider than the
    radius, which counts only what is taken away."""
    live = {(p.namespace, p.name): p for p in s.pods if not p.deleting and p.model}
    found: set[tuple[str, str]] = set()
    nodes: set[str] = set()
    for fault in plan.faults:
        for record in fault.records:
            d = fault.module.disrupts(fault.spec, record.target)
            found |= {(live[key].namespace, live[key].model) for key in d.pods if key in live}
            nodes |= {d.node} if d.node else set()
    return found | {(p.namespace, p.model) for p in live.values() if p.node in nodes}


def _ready_replicas(s: ClusterSnapshot, namespace: str, model: str, without: set[tuple[str, str]]) -> int:
    groups: dict[str, list[PodView]] = defaultdict(list)
    for p in s.replicas(model, namespace):
        groups[p.group].append(p)
    return sum(1 for members in groups.values()
               if whole_and_ready(members) and not any((p.namespace, p.name) in without for p in members))


def judge(r: Radius, s: ClusterSnapshot, lim: Limits, opted_in: set[str], context: str | None = None) -> list[str]:
    """Pure: every limit the plan's blast radius `r` would pass, as a sentence with the figure."""
    problems = [f"context: {context or 'in-cluster'} is not one of the guard's contexts {', '.join(lim.contexts)}"
                ] if lim.contexts and context not in lim.contexts else []
    problems += [f"{what}: the run would disrupt {n} {unit}, over the guard's {name} {limit}"
                for what, n, unit, name, limit in (
                    ("blast radius", len(r.pods), "pods", "max_pods", lim.max_pods),
                    ("blast radius", len(r.nodes), "nodes", "max_nodes", lim.max_nodes),
                    ("blast radius", r.cards, "cards", "max_cards", lim.max_cards)) if n > limit]
    gone = set(r.pods)
    for namespace, model in sorted(r.models()):
        before = _ready_replicas(s, namespace, model, set())
        after = _ready_replicas(s, namespace, model, gone)
        if after < lim.min_ready:
            problems.append(f"min_ready: model {model} in {namespace} would keep {after} Ready replicas of "
                            f"{before}, under the guard's min_ready {lim.min_ready}")
        verdict = r.room.get((namespace, model))
        if lim.room and verdict is not None and not verdict.ok:
            problems.append(f"room: {verdict.reason} (set room: false if that is what the experiment rehearses)")
    if lim.require_opt_in:
        for namespace in sorted({ns for ns, _ in r.pods} - opted_in):
            problems.append(f"namespace {namespace} has not opted in to chaos (label it {CHAOS_OPT_IN_LABEL}=enabled)")
    return problems


def summary(r: Radius, s: ClusterSnapshot) -> dict[str, Any]:
    """Pure: the blast radius; per model it takes pods from, Ready replicas now and after the
    faults; and every model with a pod it ends or on a node it touches (what the run may hurt)."""
    hurt = {(p.namespace, p.model) for p in s.pods if (p.namespace, p.name) in r.pods or p.node in r.nodes}
    room = {f"{ns}/{model}": verdict.reason for (ns, model), verdict in r.room.items()}
    return {"pods": len(r.pods), "nodes": sorted(r.nodes), "cards": r.cards,
            "ready_replicas": {f"{ns}/{model}": [_ready_replicas(s, ns, model, set()),
                                                 _ready_replicas(s, ns, model, set(r.pods))]
                               for ns, model in sorted(r.models())},
            "room": room, "models": [f"{ns}/{model}" for ns, model in sorted(hurt | r.models())]}


def check(ctx: Any, plan: planning.Plan, lim: Limits, where: str, s: ClusterSnapshot | None = None,
          r: Radius | None = None) -> dict[str, Any]:
    """Resolve the plan's blast radius on the cluster (on `s`, a snapshot the caller already
    read, or a fresh one; `r`, the radius the caller already resolved on it); GuardRefused lists
    every breach, else the summary of what the run would take away."""
    s = s or snap.fetch(ctx.kube, ctx.card_resource)
    r = r or radius(plan, s)
    opted_in = {ns for ns in sorted({ns for ns, _ in r.pods}) if _opted_in(ctx.kube, ns)}
    problems = judge(r, s, lim, opted_in, ctx.kube.context)
    if problems:
        raise GuardRefused("\n".join(f"{where}: guard: {p}" for p in problems))
    return summary(r, s)


def _opted_in(kube: Any, namespace: str) -> bool:
    try:
        return kube.namespace_labels(namespace).get(CHAOS_OPT_IN_LABEL) == "enabled"
    except NotFound:
        return False


# --- as a Chaos Toolkit control ------------------------------------------------------------------
def validate_control(control: dict[str, Any]) -> None:
    try:
        limits((control.get("provider") or {}).get("arguments"), f"control {control.get('name', MODULE)!r}")
    except SpecError as exc:
        raise InvalidActivity(str(exc)) from None


@dataclass
class _Judge:
    """The guard over one kilocard action: it judges each plan the action resolves (chaos.plan
    calls it with the plan about to execute) and remembers a refusal."""

    limits: Limits
    where: str
    refused: str | None = None

    def __call__(self, ctx: Any, plan: planning.Plan) -> None:
        try:
            check(ctx, plan, self.limits, self.where)
        except SpecError as exc:
            self.refused = str(exc)
            raise


# Each kilocard action's judge, by its activity (chaoslib hands the same mapping to the before and
# after controls), with its run: chaoslib's controls are module functions.
_judging: dict[int, tuple[str, _Judge]] = {}
_refusals: list[str] = []


def before_activity_control(context: dict[str, Any], configuration: dict[str, Any] | None = None,
                            secrets: dict[str, Any] | None = None, **arguments: Any) -> None:
    """Just before a kilocard action runs: judge every plan it resolves, the very plan it then
    executes (not one made again here), and refuse a breach: nothing of it is applied, and the run
    is interrupted once the action returns (its earlier faults are then reverted)."""
    provider = context.get("provider") or {}
    if provider.get("type") != "python" or provider.get("module") != actions.__name__:
        return
    run_id = actions.run_id_of(configuration)
    judge = _Judge(limits(arguments, f"control {MODULE}"), f"activity {context.get('name', '?')!r}")
    _judging[id(context)] = run_id, judge
    planning.judge_with(run_id, judge)


def after_activity_control(context: dict[str, Any], **_arguments: Any) -> None:
    found = _judging.pop(id(context), None)
    if found is None:
        return
    run_id, judge = found
    planning.unjudge(run_id, judge)
    if judge.refused is not None:
        _refusals.append(judge.refused)
        raise InterruptExecution(judge.refused)


def after_experiment_control(context: Any, state: dict[str, Any] | None = None, **_arguments: Any) -> None:
    """Write what the guard refused into the journal (the strict runner's verdict reads it)."""
    if _refusals and state is not None:
        state[GUARD_KEY] = _refusals[0]
    _refusals.clear()
