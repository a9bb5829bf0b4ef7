"""Chaos Toolkit actions: one thin wrapper per fault kind over chaos.plan, plus the rollback
that reverts them. No `from __future__ import annotations` here: chaostoolkit's discovery reads
the real annotations to describe arguments.

Configuration keys (all optional): `kilocard_run_id` (else $KILOCARD_RUN_ID, else one per
process), `kilocard_kubeconfig`, `kilocard_context`, `kilocard_ledger_dir`, `kilocard_card_resource`.
Every fault lands in the run's write-ahead ledger, so `revert_faults` (or `kilocard recover --run ID`) undoes it.
"""

import os
from contextvars import ContextVar
from typing import Any, Callable, Dict, List, Optional

from chaos import ledger, plan, replay, revert
from chaos.agent.client import AgentClient
from chaos.errors import KilocardError
from chaos.faults import Context
from chaos.settings import Settings
from chaos.vocabulary import DRA_DRIVER

__all__ = [
    "apply_fault",
    "block_image_pulls",
    "break_dns",
    "delay_network",
    "drop_packets",
    "inject_ecc",
    "inject_npu_fault",
    "inject_xid",
    "isolate_cards",
    "isolate_dra_cards",
    "isolate_nodes",
    "isolate_npus",
    "kill_pods",
    "kill_rank",
    "kill_tp_groups",
    "limit_bandwidth",
    "mark_out_of_service",
    "partition_network",
    "partition_pods",
    "replay_timeline",
    "reset_tcp",
    "revert_faults",
    "slow_weight_reads",
    "stall_rank",
    "stop_kubelet",
]
_PROCESS_RUN_ID = ledger.new_run_id()
# While set (by `faults_of`), actions hand over the fault they would apply instead of applying it.
_COLLECTING: ContextVar[Optional[List[Dict[str, Any]]]] = ContextVar("kilocard_collecting", default=None)


def run_id_of(configuration: Optional[Dict[str, Any]]) -> str:
    """The run this experiment's faults belong to: configured, else $KILOCARD_RUN_ID, else one
    per process (the probes of probes.chaostoolkit read the same one)."""
    return _run_of(Settings.of(configuration))


def _run_of(settings: Settings) -> str:
    return settings.run_id or os.environ.get("KILOCARD_RUN_ID") or _PROCESS_RUN_ID


def faults_of(func: Callable[..., Any], arguments: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The fault mappings a call of one of these actions would apply, with nothing connected or
    applied: what the strict runner checks before an experiment starts."""
    found: List[Dict[str, Any]] = []
    token = _COLLECTING.set(found)
    try:
        func(**arguments)
    finally:
        _COLLECTING.reset(token)
    return found


def session(configuration: Optional[Dict[str, Any]]) -> tuple:
    """(Context, Ledger) of this experiment's run, connected as its configuration says."""
    settings = Settings.of(configuration)
    run_id = _run_of(settings)
    kube = settings.kube()
    ctx = Context(kube, AgentClient(kube), run_id, say=lambda _m: None, card_resource=settings.card_resource)
    return ctx, ledger.Ledger(run_id, kube, settings.ledger_dir)


def apply_fault(fault: Dict[str, Any], configuration: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """Apply any kilocard fault given as data (`kind` plus its fields); return its records."""
    collecting = _COLLECTING.get()
    if collecting is not None:
        collecting.append(fault)
        return []
    ctx, book = session(configuration)
    try:
        injection = plan.inject(ctx, book, fault, where=f"fault {fault.get('kind', '?')}")
    finally:
        ctx.kube.close()
    if injection.problems():
        raise KilocardError(injection.problems())
    return [{"kind": r.kind, "target": r.target, "state": r.state, "run_id": r.run_id, "landed": r.landed}
            for r in injection.records]


def replay_timeline(timeline: List[Dict[str, Any]], observe: float = 60.0,
                    configuration: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """Play an incident's faults at their offsets (chaos.replay): each `{at, for, fault}` applied
    `at` seconds from now and reverted after `for`; then watch `observe` seconds more. Returns
    each fault's planned and actual offsets."""
    collecting = _COLLECTING.get()
    if collecting is not None:
        collecting.extend(entry["fault"] for entry in timeline)
        return []
    ctx, book = session(configuration)
    try:
        return replay.play(ctx, book, timeline, float(observe))
    finally:
        ctx.kube.close()


def revert_faults(configuration: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """Rollback: revert every fault this run still has open (ledger and in-cluster markers)."""
    if _COLLECTING.get() is not None:
        return []
    ctx, book = session(configuration)
    try:
        reverted, left = revert.recover(ctx, book.dir, book.run_id)
    finally:
        ctx.kube.close()
    if left:
        raise KilocardError(f"revert incomplete: {len(left)} fault(s); run 'kilocard recover --run {book.run_id}'")
    return [{"kind": r.kind, "target": r.target} for r in reverted]


def _drop_none(**fields: Any) -> Dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def kill_pods(label_selector: str = None, namespace: str = None, count: int = None, percent: float = None,
              mode: str = "delete", grace_seconds: int = None, seed: int = None, model: str = None,
              configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Kill pods (DELETE, or `mode: evict` through the Eviction API, honouring PDBs)."""
    return apply_fault(_drop_none(kind="pod-kill", label_selector=label_selector, model=model, namespace=namespace,
                                  count=count, percent=percent, mode=mode, grace_seconds=grace_seconds, seed=seed),
                       configuration)


def kill_tp_groups(label_selector: str = None, namespace: str = None, count: int = None, percent: float = None,
                   mode: str = "delete", seed: int = None, model: str = None,
                   configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Kill every pod of whole tensor-parallel groups."""
    return apply_fault(_drop_none(kind="tp-group-kill", label_selector=label_selector, model=model, namespace=namespace,
                                  count=count, percent=percent, mode=mode, seed=seed), configuration)


def kill_rank(rank: int, label_selector: str = None, namespace: str = None, count: int = None, seed: int = None,
              model: str = None, configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Kill the member of the given rank in TP groups (the group stalls)."""
    return apply_fault(_drop_none(kind="rank-kill", rank=rank, label_selector=label_selector, model=model,
                                  namespace=namespace, count=count, seed=seed), configuration)


def stall_rank(ttl_seconds: float, rank: int = 0, label_selector: str = None, namespace: str = None,
               count: int = None, seed: int = None, method: str = "freeze", container: str = None,
               model: str = None, configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Freeze the engine process of one rank in TP groups for ttl_seconds: its pod stays Ready, its
    group serves nothing."""
    return apply_fault(_drop_none(kind="rank-stall", rank=rank, label_selector=label_selector, model=model,
                                  namespace=namespace, count=count, seed=seed, method=method,
                                  container=container, ttl_seconds=ttl_seconds), configuration)


def isolate_nodes(ttl_seconds: float, nodes: List[str] = None, node_selector: str = None, count: int = None,
                  effect: str = "NoSchedule", drain: bool = False, seed: int = None,
                  configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Cordon and taint nodes (NoExecute evicts), optionally drain them."""
    return apply_fault(_drop_none(kind="node-isolate", nodes=nodes, node_selector=node_selector, count=count,
                                  effect=effect, drain=drain, seed=seed, ttl_seconds=ttl_seconds), configuration)


def mark_out_of_service(ttl_seconds: float, nodes: List[str] = None, node_selector: str = None,
                        nodes_of: Dict[str, Any] = None,
                        configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Non-graceful node shutdown: taint dead nodes out-of-service, so PodGC frees their stuck pods."""
    return apply_fault(_drop_none(kind="node-out-of-service", nodes=nodes, node_selector=node_selector,
                                  nodes_of=nodes_of, ttl_seconds=ttl_seconds), configuration)


def stop_kubelet(ttl_seconds: float, nodes: List[str] = None, node_selector: str = None,
                 nodes_of: Dict[str, Any] = None, count: int = None,
                 configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Stop nodes' kubelets (through the agent, where allowed): to the control plane, lost machines
    (`nodes_of: {namespace, label_selector, model, replica, rank}` picks the nodes of given pods)."""
    return _agent("node-kubelet-stop", ttl_seconds, nodes, node_selector, count, configuration, nodes_of=nodes_of)


def _agent(kind: str, ttl_seconds: float, nodes: Optional[List[str]], node_selector: Optional[str],
           count: Optional[int], configuration: Optional[Dict[str, Any]], **fields: Any) -> List[Dict[str, Any]]:
    return apply_fault(_drop_none(kind=kind, nodes=nodes, node_selector=node_selector, count=count,
                                  ttl_seconds=ttl_seconds, **fields), configuration)


def isolate_cards(cards: List[int], ttl_seconds: float, nodes: List[str] = None, node_selector: str = None,
                  count: int = None, configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Take cards out of service (allocatable drops; the pod on the card ends)."""
    return _agent("card-isolate", ttl_seconds, nodes, node_selector, count, configuration, cards=cards)


def inject_ecc(cards: List[int], ttl_seconds: float, nodes: List[str] = None, node_selector: str = None,
               count: int = None, error_type: str = "dbe", errors: int = 1, speed: float = 0.5,
               configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """ECC errors on cards; `speed` is how fast the sub-healthy card still runs."""
    return _agent("gpu-ecc", ttl_seconds, nodes, node_selector, count, configuration, cards=cards,
                  params={"type": error_type, "count": errors, "speed": speed})


def inject_xid(cards: List[int], xid: int, ttl_seconds: float, nodes: List[str] = None, node_selector: str = None,
               count: int = None, configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """An XID error on cards (79: fallen off the bus)."""
    return _agent("gpu-xid", ttl_seconds, nodes, node_selector, count, configuration, cards=cards,
                  params={"xid": xid})


def limit_bandwidth(rate_mbit: float, ttl_seconds: float, nodes: List[str] = None, node_selector: str = None,
                    count: int = None, interface: str = None,
                    configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Rate-limit nodes' network (tbf)."""
    return _agent("network-bandwidth", ttl_seconds, nodes, node_selector, count, configuration,
                  interface=interface, params={"rate_mbit": rate_mbit})


def drop_packets(percent: float, ttl_seconds: float, nodes: List[str] = None, node_selector: str = None,
                 count: int = None, interface: str = None,
                 configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Drop a share of nodes' packets (nftables)."""
    return _agent("network-loss", ttl_seconds, nodes, node_selector, count, configuration, interface=interface,
                  params={"percent": percent})


def partition_network(ttl_seconds: float, nodes: List[str] = None, node_selector: str = None, count: int = None,
                      interface: str = None, configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Cut nodes off the network (nftables)."""
    return _agent("network-partition", ttl_seconds, nodes, node_selector, count, configuration, interface=interface)


def reset_tcp(ttl_seconds: float, nodes: List[str] = None, node_selector: str = None,
              nodes_of: Dict[str, Any] = None, count: int = None, percent: float = None, ports: List[int] = None,
              cidrs: List[str] = None, interface: str = None,
              configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Answer nodes' TCP traffic with resets (nftables), optionally only on some ports or to some CIDRs."""
    return apply_fault(_drop_none(kind="network-tcp-reset", nodes=nodes, node_selector=node_selector,
                                  nodes_of=nodes_of, count=count, percent=percent, interface=interface,
                                  params=_drop_none(ports=ports, cidrs=cidrs), ttl_seconds=ttl_seconds),
                       configuration)


def block_image_pulls(registries: List[str], ttl_seconds: float, nodes: List[str] = None,
                      node_selector: str = None, count: int = None,
                      configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """A registry outage as nodes see it: pulls from these registries refused (nftables)."""
    return _agent("image-pull-failure", ttl_seconds, nodes, node_selector, count, configuration,
                  params={"registries": registries})


def slow_weight_reads(rate_mbps: float, ttl_seconds: float, nodes: List[str] = None, node_selector: str = None,
                      count: int = None, devices: List[str] = None,
                      configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Slow weight storage as nodes see it: their pods' reads capped at `rate_mbps` per device."""
    return _agent("slow-weights", ttl_seconds, nodes, node_selector, count, configuration,
                  params=_drop_none(rate_mbps=rate_mbps, devices=devices))


def break_dns(ttl_seconds: float, nodes: List[str] = None, node_selector: str = None, count: int = None,
              cidrs: List[str] = None, answer: str = None, interface: str = None, netns: str = None,
              configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Names stop resolving on nodes (or in a pod's network namespace): DNS queries dropped or refused."""
    return _agent("dns-failure", ttl_seconds, nodes, node_selector, count, configuration, interface=interface,
                  netns=netns, params=_drop_none(cidrs=cidrs, answer=answer))


def delay_network(ms: float, ttl_seconds: float, nodes: List[str] = None, node_selector: str = None,
                  count: int = None, interface: str = None,
                  configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Delay nodes' packets (netem, where the kernel has it)."""
    return _agent("network-delay", ttl_seconds, nodes, node_selector, count, configuration, interface=interface,
                  params={"ms": ms})


def partition_pods(namespace: str, pod_selector: Dict[str, str], ttl_seconds: float,
                   directions: List[str] = None, allow_cidrs: List[str] = None,
                   configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Cut pods off the network with a NetworkPolicy (no agent needed; the CNI enforces it)."""
    return apply_fault(_drop_none(kind="network-policy-partition", namespace=namespace, pod_selector=pod_selector,
                                  ttl_seconds=ttl_seconds, directions=directions, allow_cidrs=allow_cidrs),
                       configuration)


def isolate_npus(cards: List[int], ttl_seconds: float, nodes: List[str] = None, node_selector: str = None,
                 count: int = None, configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Isolate Ascend NPU chips as MindX DL does (ManuallySeparateNPU in the node's device-info ConfigMap)."""
    return apply_fault(_drop_none(kind="npu-isolate", cards=cards, ttl_seconds=ttl_seconds, nodes=nodes,
                                  node_selector=node_selector, count=count), configuration)


def inject_npu_fault(cards: List[int], ttl_seconds: float, nodes: List[str] = None, node_selector: str = None,
                     count: int = None, via: str = "auto", code: str = None, fault_type: str = "NPU",
                     configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """A fault code on Ascend NPU chips: ClusterD's public fault API where ClusterD runs, else the agent."""
    return apply_fault(_drop_none(kind="npu-fault", cards=cards, ttl_seconds=ttl_seconds, nodes=nodes,
                                  node_selector=node_selector, count=count, via=via, code=code,
                                  fault_type=fault_type), configuration)


def isolate_dra_cards(cards: List[int], ttl_seconds: float, nodes: List[str] = None, node_selector: str = None,
                      count: int = None, driver: str = DRA_DRIVER, effect: str = "NoSchedule",
                      configuration: Dict[str, Any] = None) -> List[Dict[str, Any]]:
    """Taint DRA-managed cards with a DeviceTaintRule (NoExecute evicts the pods holding them)."""
    return apply_fault(_drop_none(kind="dra-card-isolate", cards=cards, ttl_seconds=ttl_seconds, nodes=nodes,
                                  node_selector=node_selector, count=count, driver=driver, effect=effect),
                       configuration)
