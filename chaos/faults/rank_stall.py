"""rank-stall: freeze one rank's engine process in each chosen tensor-parallel group, through the
node agent, for `ttl_seconds` (the agent thaws it then, on revert, and when it shuts down). The
pod stays Running and Ready while its whole group stops serving: the hung collective a readiness
probe misses, and what the hung-group probe (probes/hung.py) is for.

Groups are picked as rank-kill picks them (chaos.targets: `kilocard.io/tp-group` or LWS's
group-key, rank from the pod index). The engine container is `container` (default: the one that
requests cards, else the first); its ID comes from the pod's status, so the agent freezes that
container's cgroup, or the whole pod's where the runtime reports no ID.

With `router: true` it freezes routers instead (chaos.routers: a proxy or an endpoint picker, each
pod its own group of one, rank 0): the router that stays Ready while it answers nothing (S13).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chaos.agent.kinds import rank_stall
from chaos.errors import NotFound, SpecError
from chaos.faults import Context, Disruption, agent_faults
from chaos.faults._spec import (
    ALLOW_EMPTY,
    COUNT,
    PERCENT,
    POD_MODEL,
    POD_NAMESPACE,
    POD_SELECTOR,
    PODS_RULES,
    ROUTER,
    SEED,
    SELECTED,
    TTL,
    kind,
)
from chaos.fields import NAMESPACE, choice, integer, optional, text
from chaos.ledger import Record
from chaos.targets import groups, how_many, live_pods, sample

SCHEMAS = {"rank-stall": kind(
    "rank-stall", "Freeze the engine process of one rank in each chosen tensor-parallel group through the node "
    "agent (its cgroup's freezer, or SIGSTOP), for ttl_seconds: every pod stays Ready while the group serves nothing.",
    {"namespace": POD_NAMESPACE, "label_selector": POD_SELECTOR, "model": POD_MODEL, "count": COUNT,
     "percent": PERCENT, "seed": SEED,
     "rank": integer(0, 2**31, "the rank stalled in each group", 0),
     "container": optional(text("the engine container (default: the one requesting cards, else the first)",
                                example="engine")),
     "method": choice(rank_stall.METHODS, "the cgroup freezer (v2 cgroup.freeze, else v1 freezer.state), or SIGSTOP "
                      "to every process of the container", "freeze"),
     "ttl_seconds": TTL, "allow_empty": ALLOW_EMPTY, "router": ROUTER},
    ["ttl_seconds"], PODS_RULES, {"namespace": NAMESPACE, "label_selector": SELECTED, "rank": 3, "ttl_seconds": 60})}
REVERTIBLE = True
AGENT_KIND = rank_stall.NAME


@dataclass(frozen=True)
class Spec:
    kind: str
    namespace: str | None
    label_selector: str | None
    model: str | None
    count: int | None
    percent: float | None
    seed: int | None
    rank: int
    container: str | None
    params: dict[str, Any]
    ttl_seconds: float
    allow_empty: bool
    router: bool


def build(values: dict[str, Any], where: str) -> Spec:
    method = values.pop("method")
    return Spec(**values, params={"method": method})


def targets(ctx: Context, spec: Spec, where: str) -> list[dict[str, Any]]:
    found = groups(live_pods(ctx.kube, spec.namespace, spec.label_selector, None, where, spec.model, spec.router))
    found = {k: v for k, v in found.items() if any(m.rank == spec.rank for m in v)}
    chosen = sample(sorted(found), how_many(len(found), spec.count, spec.percent, spec.kind), spec.seed, ctx.run_id)
    ranks = [m for key in sorted(chosen) for m in found[key] if m.rank == spec.rank]

    def target(m: Any) -> dict[str, Any]:
        try:
            cid = container_id(ctx.kube.read_pod_raw(m.namespace, m.name), spec.container, where)
        except NotFound:
            raise SpecError(f"{where}: pod {m.namespace}/{m.name} ended while the plan was made") from None
        return {"namespace": m.namespace, "name": m.name, "uid": m.uid, "node": m.node, "group": m.group,
                "rank": m.rank, "container_id": cid}

    return ctx.kube.batch(target, ranks)


def check(ctx: Context, spec: Spec, found: list[dict[str, Any]], where: str,
          earlier: list[tuple[str, Record]]) -> None:
    """Every chosen rank is bound to a node whose agent answers, and no run stalls it already."""
    unbound = [t for t in found if not t["node"]]
    if unbound:
        raise SpecError(f"{where}: {unbound[0]['namespace']}/{unbound[0]['name']} is not on a node yet "
                        "(Pending): there is no process to stall")
    agent_faults.check_held(ctx, AGENT_KIND, [(t["node"], {"pod_uid": t["uid"]}) for t in found], where, earlier)


def container_id(pod: dict[str, Any], container: str | None, where: str) -> str | None:
    """The engine container's ID as the runtime reports it (without its "containerd://"). None
    only where the pod's status reports no container IDs at all (the agent then freezes the whole
    pod); a container named, or the engine found, whose ID is not there yet is refused rather than
    widened to the pod."""
    spec_containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
    if container is not None and container not in spec_containers:
        raise SpecError(f"{where}.container: pod {pod['metadata']['name']} has no container {container!r} "
                        f"(it has {', '.join(spec_containers) or 'none'})")
    name = container or _engine(pod) or (spec_containers[0] if spec_containers else None)
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    if not any(s.get("containerID") for s in statuses):
        return None
    found = next((str(s.get("containerID") or "").split("://", 1)[-1] for s in statuses if s.get("name") == name), "")
    if not rank_stall.CONTAINER_ID.match(found):
        raise SpecError(f"{where}.container: pod {pod['metadata']['name']}'s container {name!r} has no running "
                        f"container ID yet ({found or 'none'}): freezing the whole pod instead would stall its "
                        "sidecars too")
    return found


def _engine(pod: dict[str, Any]) -> str | None:
    """The container that requests an accelerator (a resource with a vendor domain, like nvidia.com/gpu)."""
    for c in (pod.get("spec") or {}).get("containers") or []:
        resources = c.get("resources") or {}
        if any("/" in r for r in {**(resources.get("requests") or {}), **(resources.get("limits") or {})}):
            return str(c["name"])
    return None


def prepare(ctx: Context, spec: Spec, target: dict[str, Any], fault_id: str) -> dict[str, Any]:
    cid = target.get("container_id")
    agent_target = {"pod_uid": target["uid"], **({"container_id": cid} if cid else {})}
    return agent_faults.undo_for(ctx, AGENT_KIND, target["node"], agent_target)


def disrupts(spec: Spec, target: dict[str, Any]) -> Disruption:
    """A stalled rank takes its whole group out of serving, though no pod ends (for the guards:
    its Ready replicas left)."""
    return Disruption(pods=((target["namespace"], target["name"]),))


apply = agent_faults.apply
verify = agent_faults.verify  # the agent reads the cgroup's freezer state, or each process' state
revert = agent_faults.revert
