"""What the fleet simulator believes about the cluster: nodes, cards, pods and the faults in
effect, fed by watches (nodes and pods, through chaos.kube) and changed by the effects of faults
(testbed/simulator/effects.py, which depends on this module only). All of it sits behind one
lock: watch threads, the HTTP server and the ticker take it briefly.

Cards are assigned to pods per node in arrival order, lowest free index first, as a device plugin
would.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from chaos import mindx, routers, serving
from chaos.agent.kinds import throttle
from chaos.agent.kinds.pull_block import registry_of
from chaos.agent.protocol import Fault
from chaos.vocabulary import ENGINE_LABEL, GROUP_SIZE_LABEL, MODEL_LABEL, group_of
from chaos.vocabulary import ready as is_ready
from probes import snapshot
from testbed.simulator import model as m
from testbed.simulator.pulls import Pulls
from testbed.simulator.traffic import Offered, PrefixCache
from testbed.stages import LOST_LABEL, PULL_BACKOFF_ANNOTATION, PULL_FAILING_ANNOTATION
from testbed.timing import LOAD_ANNOTATION, LOAD_GB_PER_S, READY_ANNOTATION

# A pod's delay to Ready before a read cap stretched it (slow-weights), so the cap's end restores it.
UNSTRETCHED_ANNOTATION = "kilocard.io/ready-delay-unstretched"


@dataclass
class Card:
    node: str
    index: int
    uuid: str
    speed: float = 1.0
    sbe_vol: int = 0
    dbe_vol: int = 0
    sbe_agg: int = 0
    dbe_agg: int = 0
    xid: int = 0
    remap_pending: int = 0
    remapped_uncorrectable: int = 0
    remapped_correctable: int = 0
    utilisation: float = 0.0
    npu: dict[str, tuple[str, str, str, int]] = field(default_factory=dict)  # fault id -> code, level, type, ms
    throttles: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)  # fault id -> start, params

    def pace(self, now: float | None = None) -> float:
        """How fast the card runs now: its faults' speed and its throttles' (a ramp falls with time)."""
        if not self.throttles:
            return self.speed
        at = time.time() if now is None else now
        return min(self.speed, *(throttle.fraction_at(params, at - start) for start, params in self.throttles.values()))

    def throttled_via(self) -> set[str]:
        return {str(params.get("via", "power")) for _start, params in self.throttles.values()}

    def npu_unhealthy(self, kind: str = "chip") -> bool:
        """Would the Ascend device plugin report it Unhealthy (`chip`) or NetworkUnhealthy?"""
        return any(t == kind and level not in mindx.HEALTHY_LEVELS for _code, level, t, _at in self.npu.values())


@dataclass
class Pod:
    uid: str
    namespace: str
    name: str
    node: str
    model: str
    served_name: str
    group: str
    rank: int
    cards_wanted: int
    ready: bool
    labels: dict[str, str]
    engine: str = "vllm"  # which engine's metrics the replica exports (label kilocard.io/engine)
    terminating: bool = False  # draining: keeps its cards, gets no new requests
    chips_noted: str | None = None  # Ascend: the pod's huawei.com/AscendReal annotation as last seen
    group_size: int | None = None  # pods in its replica, where a label or its stack says
    image: str = ""
    waits_for_image: bool = False  # Pending, not terminating: its image not yet pulled
    pull_marked: bool = False  # its pull shown failed (testbed/stages/pod-pull-failing.yaml)
    pull_backoff: float = 0.0  # the kubelet's first pull back-off on its timing's clock, in seconds
    ready_delay: str | None = None  # kwok's delay from its start to Ready, as written (testbed/timing.py)
    load: float = 0.0  # the weight loading's share of it, in seconds
    ready_unstretched: str | None = None  # the delay before a read cap stretched it (slow-weights)
    kv_tokens: int | None = None  # its KV cache where its engine's arguments fix it (serving.kv_cache_tokens)


@dataclass(frozen=True)
class RouterPod:
    """A pod of a routing tier (chaos.routers): where it runs, and whether the Service sends it
    connections (Ready, not draining)."""

    uid: str
    node: str
    ready: bool
    router: routers.Router


@dataclass
class Series:
    """Cumulative histograms and counters of one replica, in the shape its engine exports them."""

    engine: m.Engine = m.ENGINES["vllm"]
    ttft_buckets: list[float] = field(default_factory=list)
    ttft_count: float = 0.0
    ttft_sum: float = 0.0
    itl_buckets: list[float] = field(default_factory=list)
    itl_count: float = 0.0
    itl_sum: float = 0.0
    e2e_buckets: list[float] = field(default_factory=list)
    e2e_count: float = 0.0
    e2e_sum: float = 0.0
    success: float = 0.0
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    running: float = 0.0
    waiting: float = 0.0
    kv_usage: float = 0.0
    backlog: float = 0.0
    batch: float = 0.0  # requests in its batch (prefill or decode), whose KV blocks it holds
    service: float = 0.0  # requests per second it served at the last step (0: not yet)
    preemptions: float = 0.0

    def __post_init__(self) -> None:
        for name, bounds in (("ttft_buckets", self.engine.ttft_buckets), ("itl_buckets", self.engine.itl_buckets),
                             ("e2e_buckets", self.engine.e2e_buckets)):
            if not getattr(self, name):
                setattr(self, name, [0.0] * len(bounds))


def _seconds(duration: str | None) -> float:
    """A duration as testbed/timing.py writes it (`1500ms`); 0 when absent or otherwise written."""
    if duration and duration.endswith("ms") and duration[:-2].isdigit():
        return int(duration[:-2]) / 1000
    return 0.0


def _served_name(pod_args: list[str], model: str) -> str:
    for flag in ("--served-model-name", "--model"):
        if flag in pod_args and pod_args.index(flag) + 1 < len(pod_args):
            return pod_args[pod_args.index(flag) + 1]
    return model


class State:
    def __init__(self, card_resource: str, product: str = "NVIDIA H100 80GB HBM3",
                 accelerator: str = "nvidia") -> None:
        self.card_resource = card_resource
        self.accelerator = accelerator  # "ascend": the MindX device plugin's ConfigMaps and pod annotations
        self.product = product
        self.lock = threading.RLock()
        self.node_cards: dict[str, int] = {}  # capacity per node
        self.node_uids: dict[str, str] = {}  # the owner of what a node's plugins publish (its ResourceSlice)
        self.lost: set[str] = set()  # nodes whose kubelet is dead
        # node -> the lost label the world wrote and the node watch has not shown yet: until it
        # does, an event from before the write is stale and must not undo (or redo) the loss
        self.lost_written: dict[str, bool] = {}
        self.dra_health_off: set[str] = set()  # nodes whose DRA driver taints no card (testbed/simulator/dra.py)
        self.cards: dict[tuple[str, int], Card] = {}
        self.pods: dict[str, Pod] = {}
        self.stack_pods: dict[str, dict[str, Any]] = {}  # uid -> a serving stack's pod (no kilocard label), as listed
        self.routers: dict[str, RouterPod] = {}  # uid -> a router pod, scheduled
        # service -> a router that fronted it (it needs one from then on: the tier's settings kept)
        self.tiers_seen: dict[tuple[str, str], routers.Router] = {}
        self.assignment: dict[str, dict[int, str]] = defaultdict(dict)  # node -> card index -> pod uid
        self.isolated: dict[str, set[int]] = defaultdict(set)
        self.separated: dict[str, set[int]] = defaultdict(set)  # Ascend: ManuallySeparateNPU, as the CM says
        self.allocatable: dict[str, int] = {}  # what was last asked of each node's status
        # Ascend: ClusterD's public faults in effect, (faultId, node, chip) -> the fault standing for it.
        self.public_faults: dict[tuple[str, str, int], str] = {}
        self.faults: dict[str, Fault] = {}
        self.ended: set[str] = set()
        self.sabotaged: set[str] = set()  # active faults whose effect was undone by hand
        self.misfires: dict[str, set[str]] = defaultdict(set)  # node -> kinds whose next fault will not land
        self.stalled: set[str] = set()  # pods (uid) whose engine process is frozen
        # node -> fault id -> the network fault whose shaping (qdisc, nft table) the node carries
        self.shaping: dict[str, dict[str, Fault]] = defaultdict(dict)
        self.by_key: dict[str, Fault] = {}  # idempotency key -> the fault it created
        self.pulls = Pulls()  # registry outages on nodes, and the pods whose pulls they failed
        self.read_caps: dict[str, dict[str, float]] = defaultdict(dict)  # node -> fault id -> MB/s (slow-weights)
        self.series: dict[str, Series] = {}  # by replica key
        # Demand is per service: a model in a namespace. (namespace, model, reason) -> requests.
        self.failed: dict[tuple[str, str, str], float] = defaultdict(float)
        self.requests: dict[tuple[str, str], float] = defaultdict(float)
        self.qps_override: dict[str, float] = {}  # by model, in every namespace
        # What the OpenAI endpoint answered since the last tick, and at it: (requests/s, shape) per service.
        self.offered: dict[tuple[str, str], Offered] = defaultdict(Offered)
        self.offered_rate: dict[tuple[str, str], tuple[float, m.Shape]] = {}
        self.prefixes: dict[tuple[str, str], PrefixCache] = defaultdict(PrefixCache)
        self.replicas_seen: dict[tuple[str, str], int] = defaultdict(int)
        self.served_names: dict[str, str] = {}  # model label -> vLLM model_name
        # Cluster writes the faults call for, drained by the simulator outside the lock:
        # ("allocatable", node, cards), ("delete-pod", namespace, name), ("labels", node, {k: v}),
        # ("annotate", namespace, (pod, {k: v})) (a failed pull's mark, a stretched start-up; on
        # Ascend, the chips), and on Ascend ("device-info", node, None).
        self.actions: list[tuple[str, str, Any]] = []
        self.last_tick = time.monotonic()

    def upsert_node(self, name: str, capacity: int, lost: bool = False, uid: str = "", dra_health: bool = True) -> None:
        """A node and its cards; `lost`: its kubelet is dead (label kilocard.io/node-lost), so its
        exporters are not scraped and its replicas answer nothing; `dra_health` off: its DRA driver
        taints no card (label kilocard.io/dra-health=off)."""
        with self.lock:
            self.node_cards[name] = capacity
            self.node_uids[name] = uid
            if self.lost_written.get(name, lost) == lost:
                self.lost_written.pop(name, None)
                (self.lost.add if lost else self.lost.discard)(name)
            (self.dra_health_off.discard if dra_health else self.dra_health_off.add)(name)
            new = name not in self.allocatable
            for i in range(capacity):
                if (name, i) not in self.cards:
                    card_uuid = uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}/{i}.cards.kilocard.io")
                    self.cards[(name, i)] = Card(name, i, f"GPU-{card_uuid}")
            if new:
                self.allocatable[name] = capacity - len(self.out_of_service(name))
                if self.accelerator == "ascend":  # the plugin writes its ConfigMap when it starts
                    self.actions.append(("device-info", name, None))
                for pod in [p for p in self.pods.values() if p.node == name]:  # bound before we saw the node
                    self._assign(pod)

    def set_lost(self, node: str, lost: bool) -> None:
        """A kubelet dies or comes back: the world knows at once, and labels the node so kwok lets
        go of it (or takes it back); the watch's view of the label lags behind the write."""
        with self.lock:
            (self.lost.add if lost else self.lost.discard)(node)
            if node in self.node_cards:
                self.lost_written[node] = lost
                self.actions.append(("labels", node, {LOST_LABEL: "true" if lost else None}))

    def remove_node(self, name: str) -> None:
        with self.lock:
            self.node_cards.pop(name, None)
            self.lost_written.pop(name, None)
            self.node_uids.pop(name, None)
            for key in [k for k in self.cards if k[0] == name]:
                del self.cards[key]
            self.assignment.pop(name, None)
            self.isolated.pop(name, None)
            self.separated.pop(name, None)
            self.shaping.pop(name, None)
            self.allocatable.pop(name, None)
            self.lost.discard(name)
            self.dra_health_off.discard(name)

    def upsert_pod(self, obj: dict[str, Any]) -> None:
        """Take a pod as the API's JSON; only scheduled pods of a model matter. A terminating pod
        stays until it is gone: it holds its cards while it drains (or forever, on a dead node).
        A model's pod is one with kilocard's labels, or one its serving stack makes (as the
        toolkit's probes read it, chaos.serving: a worker that names no model takes its group's)."""
        meta, spec = obj["metadata"], obj.get("spec") or {}
        labels = meta.get("labels") or {}
        uid = meta["uid"]
        router = routers.router_of(obj)
        if not spec.get("nodeName"):
            self.remove_pod(uid)
        elif router is not None:
            with self.lock:
                self.routers[uid] = RouterPod(uid, spec["nodeName"], is_ready(obj), router)
        elif labels.get(MODEL_LABEL):
            model = labels[MODEL_LABEL]
            container = (spec.get("containers") or [{}])[0]
            served = _served_name(list(container.get("args") or []), model)
            group, rank = group_of(meta["namespace"], uid, labels)
            self._put(obj, model, served, group, rank, labels.get(GROUP_SIZE_LABEL), labels.get(ENGINE_LABEL))
        elif snapshot.may_serve(obj, None):
            with self.lock:
                self.stack_pods[uid] = obj
                stack_pods = list(self.stack_pods.values())
            found = snapshot.identities(stack_pods)
            for pod in stack_pods:  # a worker seen before its leader learns its model now
                pod_meta = pod["metadata"]
                i = found.get((pod_meta["namespace"], pod_meta["name"]))
                if i is None or i.model is None or (pod is not obj and pod_meta["uid"] in self.pods):
                    continue
                # A pod alone is keyed by its uid, as a labelled one is (a replacement starts from zero).
                alone = i.group.value == f"{pod_meta['namespace']}/{pod_meta['name']}"
                group = f"{pod_meta['namespace']}/{pod_meta['uid']}" if alone else i.group.value
                self._put(pod, i.model.value, i.model.value, group, int(i.rank.value),
                          i.group_size.value if i.group_size else None, i.engine.value if i.engine else None)
        else:
            self.remove_pod(uid)

    def _put(self, obj: dict[str, Any], model: str, served: str, group: str, rank: int, group_size: str | None,
             engine: str | None) -> None:
        meta, spec = obj["metadata"], obj.get("spec") or {}
        container = (spec.get("containers") or [{}])[0]
        limits = (container.get("resources") or {}).get("limits") or {}
        status = obj.get("status") or {}
        conditions = status.get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        annotations = meta.get("annotations") or {}
        pod = Pod(
            uid=meta["uid"], namespace=meta["namespace"], name=meta["name"], node=spec["nodeName"],
            model=model, served_name=served, group=group, rank=rank,
            cards_wanted=int(limits.get(self.card_resource, 0)), ready=ready, labels=meta.get("labels") or {},
            engine=engine if engine in m.ENGINES else "vllm",
            terminating=bool(meta.get("deletionTimestamp")),
            chips_noted=annotations.get(mindx.POD_CHIPS_ANNOTATION),
            group_size=int(group_size) if group_size and group_size.isdigit() else None,
            image=str(container.get("image") or ""),
            waits_for_image=status.get("phase", "Pending") == "Pending" and not meta.get("deletionTimestamp"),
            pull_marked=PULL_FAILING_ANNOTATION in annotations,
            pull_backoff=_seconds(annotations.get(PULL_BACKOFF_ANNOTATION)),
            ready_delay=annotations.get(READY_ANNOTATION), load=_seconds(annotations.get(LOAD_ANNOTATION)),
            ready_unstretched=annotations.get(UNSTRETCHED_ANNOTATION), kv_tokens=serving.kv_cache_tokens(obj),
        )
        with self.lock:
            self.pods[pod.uid] = pod
            self.served_names[model] = pod.served_name
            self._assign(pod)
            self._pull(pod, time.time())
            self._load(pod)

    def _pull(self, pod: Pod, now: float) -> None:
        """Mark a pod whose pull its node's registry outage fails, or take a stale mark off."""
        mark = self.pulls.seen(pod.uid, pod.namespace, pod.name, pod.node, pod.image, pod.waits_for_image,
                               pod.pull_marked, pod.pull_backoff, now)
        if mark is not None:
            value = self.pulls.why(pod.node, registry_of(pod.image)) if mark else None
            self.actions.append(("annotate", pod.namespace, (pod.name, {PULL_FAILING_ANNOTATION: value})))

    def startups_changed(self, node: str) -> None:
        """A registry outage or a read cap came to the node (or a cap went): its pods not yet
        started fail their pulls, or load at the new pace."""
        now = time.time()
        for pod in [p for p in self.pods.values() if p.node == node]:
            self._pull(pod, now)
            self._load(pod)

    def _load(self, pod: Pod) -> None:
        """A pod not yet started on a node whose reads are capped loads its weights at the cap: its
        delay to Ready stretched by the load phase's share (the earlier delay kept beside it), and
        given back if the cap goes before it starts. Once started, the stretch stands."""
        caps = self.read_caps.get(pod.node)
        if not pod.waits_for_image or pod.load <= 0 or pod.ready_delay is None:
            return
        if caps and pod.ready_unstretched is None:
            slower = max(1.0, LOAD_GB_PER_S * 1000 / min(caps.values()))
            stretched = _seconds(pod.ready_delay) + pod.load * (slower - 1)
            pod.ready_unstretched = pod.ready_delay  # asked once: the next event shows both
            self.actions.append(("annotate", pod.namespace, (pod.name, {
                READY_ANNOTATION: f"{round(stretched * 1000)}ms", UNSTRETCHED_ANNOTATION: pod.ready_delay})))
        elif not caps and pod.ready_unstretched is not None:
            self.actions.append(("annotate", pod.namespace, (pod.name, {
                READY_ANNOTATION: pod.ready_unstretched, UNSTRETCHED_ANNOTATION: None})))
            pod.ready_unstretched = None

    def pull_retries(self, now: float) -> None:
        """Failed pulls whose outage ended are retried at the kubelet's next back-off: the mark goes."""
        for w in self.pulls.due(now):
            self.actions.append(("annotate", w.namespace, (w.name, {PULL_FAILING_ANNOTATION: None})))

    def _assign(self, pod: Pod) -> None:
        """Give the pod the cards it still lacks, as a device plugin would (a pod seen before its
        node gets them once the node is known)."""
        node = pod.node
        held = [i for i, u in self.assignment[node].items() if u == pod.uid]
        out = self.out_of_service(node)
        free = [i for i in range(self.node_cards.get(node, 0)) if i not in self.assignment[node] and i not in out]
        for i in free[: max(0, pod.cards_wanted - len(held))]:
            self.assignment[node][i] = pod.uid
        if self.accelerator == "ascend" and not pod.terminating:
            # The plugin records the chips it mounted (what MindX's controllers read to find a
            # faulty chip's pod).
            chips = ",".join(mindx.chip_name(self.card_resource, i)
                             for i in sorted(i for i, u in self.assignment[node].items() if u == pod.uid))
            if chips and pod.chips_noted != chips:
                pod.chips_noted = chips
                self.actions.append(("annotate", pod.namespace, (pod.name, {mindx.POD_CHIPS_ANNOTATION: chips})))

    def remove_pod(self, uid: str) -> None:
        with self.lock:
            self.pulls.gone(uid)
            self.stack_pods.pop(uid, None)
            self.routers.pop(uid, None)
            pod = self.pods.pop(uid, None)
            if pod:
                for i in [i for i, u in self.assignment[pod.node].items() if u == uid]:
                    del self.assignment[pod.node][i]

    def pod_on_card(self, node: str, index: int) -> Pod | None:
        with self.lock:
            uid = self.assignment.get(node, {}).get(index)
            return self.pods.get(uid) if uid else None

    def out_of_service(self, node: str) -> set[int]:
        """The node's cards a device plugin no longer offers: drained, manually separated, or sick."""
        sick = {i for i in range(self.node_cards.get(node, 0))
                if (node, i) in self.cards and self.cards[(node, i)].npu_unhealthy()}
        return self.isolated[node] | self.separated[node] | sick

    def recount(self, node: str) -> None:
        """Ask for the node's allocatable cards anew when what is out of service changed it (and, on
        Ascend, for the device plugin's ConfigMap to say so)."""
        if node not in self.node_cards:
            return
        if self.accelerator == "ascend":
            self.actions.append(("device-info", node, None))
        cards = self.node_cards[node] - len(self.out_of_service(node))
        if self.allocatable.get(node) != cards:
            self.allocatable[node] = cards
            self.actions.append(("allocatable", node, cards))

    def separate(self, node: str, chips: set[int]) -> None:
        """The chips the node's device-info ConfigMap lists under ManuallySeparateNPU now."""
        with self.lock:
            if node in self.node_cards and chips != self.separated[node]:
                self.separated[node] = set(chips)
                self.recount(node)

    def cards_of(self, pod: Pod) -> list[Card]:
        return [self.cards[(pod.node, i)] for i, u in self.assignment[pod.node].items()
                if u == pod.uid and (pod.node, i) in self.cards]

    def take_actions(self) -> list[tuple[str, str, Any]]:
        with self.lock:
            actions, self.actions = self.actions, []
            return actions

    def in_effect(self, node: str) -> list[Fault]:
        """The node's active faults whose effect nobody undid by hand."""
        return [f for f in self.faults.values() if f.node == node and f.id not in self.sabotaged]
