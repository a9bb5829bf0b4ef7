"""What the fleet simulator believes about the cluster, and how faults change it.

The world is fed by watches (nodes and pods, through chaos.kube) and by the agent API (faults);
`tick()` advances every replica's queue by one step and accumulates the histograms and counters
the metrics module renders. All state sits behind one lock: watch threads, the HTTP server and
the ticker take it briefly.

Replicas: a pod with a `kilocard.io/model` label is one replica, unless it belongs to a TP group
(`kilocard.io/tp-group`, or LeaderWorkerSet's group key: chaos.vocabulary.group_of, as the
toolkit reads it), in which case the pods of that group together are one replica (Ready when all
its members are; metrics come from rank 0). Cards are assigned to pods per node in
arrival order, lowest free index first, as a device plugin would.

Fault effects: one per agent kind, looked up by name in testbed/simulator/effects.py. What they
change is the world's own state (cards, nodes lost, each node's network shaping, pods `stalled`:
a frozen engine process hangs its whole TP group, which stays Ready and queues what it is sent,
while the gauges its engine exports, running, waiting and KV usage, stay as they were when it
froze). `sabotage` undoes a fault's effect behind the agent's back, the fault still listed, for
tests of fault-landed verification.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from chaos import mindx
from chaos.agent import kinds
from chaos.agent.protocol import Fault, FaultError, validate
from chaos.vocabulary import ENGINE_LABEL, GROUP_SIZE_LABEL, MODEL_LABEL, group_of
from probes.capacity import KV_BYTES_PER_CARD, kv_bytes_per_token
from testbed.simulator import model as m
from testbed.simulator.effects import EFFECTS, Net
from testbed.stages import LOST_LABEL

TP_LINK_MBIT = 100_000.0  # what a cross-node TP group needs before bandwidth slows it
# Why a replica that looks Ready fails the requests sent to it (the gateway's failure reasons,
# exported from zero so that a rate sees the first failures).
FAILURES = ("replica_unreachable", "connection_reset")
NO_READY_REPLICA = "no_ready_replica"
FAILURE_REASONS = (*FAILURES, NO_READY_REPLICA)  # the gateway's failures counter, by reason


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

    def __post_init__(self) -> None:
        for name, bounds in (("ttft_buckets", self.engine.ttft_buckets), ("itl_buckets", self.engine.itl_buckets),
                             ("e2e_buckets", self.engine.e2e_buckets)):
            if not getattr(self, name):
                setattr(self, name, [0.0] * len(bounds))


@dataclass(frozen=True)
class Route:
    """A replica the gateway routes to (whole, every pod Ready, none draining), and how it answers."""

    key: str
    members: list[Pod]
    speed: float  # 0 while hung
    delay: float  # added TTFT seconds (the network)
    failure: str | None  # why requests to it fail (FAILURES); None while it answers, or hangs
    hung: bool  # its collective waits for a frozen rank: requests queue, nothing completes


@dataclass(frozen=True)
class LoadProfile:
    utilisation: float = 0.25  # default load per replica, as a fraction of its healthy service rate
    spike_factor: float = 1.0  # load multiplier during the first `spike_minutes` of every hour
    spike_minutes: int = 5

    def factor(self, now: float) -> float:
        return self.spike_factor if time.gmtime(now).tm_min < self.spike_minutes else 1.0


def _served_name(pod_args: list[str], model: str) -> str:
    for flag in ("--served-model-name", "--model"):
        if flag in pod_args and pod_args.index(flag) + 1 < len(pod_args):
            return pod_args[pod_args.index(flag) + 1]
    return model


class World:
    def __init__(self, card_resource: str, product: str = "NVIDIA H100 80GB HBM3",
                 load: LoadProfile = LoadProfile(), accelerator: str = "nvidia") -> None:
        self.card_resource = card_resource
        self.accelerator = accelerator  # "ascend": the MindX device plugin's ConfigMaps and pod annotations
        self.product = product
        self.load = load
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
        self.series: dict[str, Series] = {}  # by replica key
        # Demand is per service: a model in a namespace. (namespace, model, reason) -> requests.
        self.failed: dict[tuple[str, str, str], float] = defaultdict(float)
        self.requests: dict[tuple[str, str], float] = defaultdict(float)
        self.qps_override: dict[str, float] = {}  # by model, in every namespace
        self.replicas_seen: dict[tuple[str, str], int] = defaultdict(int)
        self.served_names: dict[str, str] = {}  # model label -> vLLM model_name
        # Cluster writes the faults call for, drained by the simulator outside the lock:
        # ("allocatable", node, cards), ("delete-pod", namespace, name), ("labels", node, {k: v}), and on
        # Ascend ("device-info", node, None) and ("annotate", namespace, (pod, {k: v})).
        self.actions: list[tuple[str, str, Any]] = []
        self.last_tick = time.monotonic()

    # --- cluster view (from watches) ------------------------------------------------------------
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
        stays until it is gone: it holds its cards while it drains (or forever, on a dead node)."""
        meta, spec = obj["metadata"], obj.get("spec") or {}
        labels = meta.get("labels") or {}
        model = labels.get(MODEL_LABEL)
        node = spec.get("nodeName")
        if not model or not node:
            self.remove_pod(meta["uid"])
            return
        # A TP group as the toolkit reads it (kilocard's label or LWS's); a pod alone is keyed by
        # its uid, so a replacement's metrics start from zero as a new vLLM process's do.
        group, rank = group_of(meta["namespace"], meta["uid"], labels)
        container = (spec.get("containers") or [{}])[0]
        limits = (container.get("resources") or {}).get("limits") or {}
        conditions = (obj.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        pod = Pod(
            uid=meta["uid"], namespace=meta["namespace"], name=meta["name"], node=node,
            model=model, served_name=_served_name(list(container.get("args") or []), model),
            group=group, rank=rank,
            cards_wanted=int(limits.get(self.card_resource, 0)), ready=ready, labels=labels,
            engine=labels.get(ENGINE_LABEL) if labels.get(ENGINE_LABEL) in m.ENGINES else "vllm",
            terminating=bool(meta.get("deletionTimestamp")),
            chips_noted=(meta.get("annotations") or {}).get(mindx.POD_CHIPS_ANNOTATION),
        )
        with self.lock:
            self.pods[pod.uid] = pod
            self.served_names[model] = pod.served_name
            self._assign(pod)

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

    # --- replicas and the load model -----------------------------------------------------------
    def replicas(self) -> dict[str, list[Pod]]:
        """Replica key -> member pods (rank order)."""
        groups: dict[str, list[Pod]] = defaultdict(list)
        for pod in self.pods.values():
            groups[pod.group].append(pod)
        for members in groups.values():
            members.sort(key=lambda p: p.rank)
        return groups

    def replica_speed(self, members: list[Pod]) -> tuple[float, float, str | None]:
        """(speed factor, added TTFT seconds, why requests to it fail: None while it answers) of a
        replica from its cards and network."""
        speed = min((c.speed for p in members for c in self.cards_of(p)), default=1.0)
        nodes = {p.node for p in members}
        delay = 0.0
        # The engine died with its node, though its pod may still read Ready.
        failure: str | None = FAILURES[0] if nodes & self.lost else None
        reset = False
        for node in nodes:
            net = self.net(node)
            # The client path to the replica (gateway -> pod and the first token back).
            delay += 2 * net.delay_ms / 1000.0
            if net.partition:
                failure = FAILURES[0]
            reset = reset or net.reset_client
            if len(nodes) > 1:  # TP traffic crosses this node's network on every layer
                if net.partition or net.reset_collectives:  # the collective's connections are dropped, or reset
                    speed = 0.0
                if net.bandwidth_mbit is not None:
                    speed *= min(1.0, net.bandwidth_mbit / TP_LINK_MBIT)
                speed /= 1.0 + 0.2 * net.loss_percent
                delay += 20 * net.delay_ms / 1000.0
        return speed, delay, failure or (FAILURES[1] if reset else None)

    def in_effect(self, node: str) -> list[Fault]:
        """The node's active faults whose effect nobody undid by hand."""
        return [f for f in self.faults.values() if f.node == node and f.id not in self.sabotaged]

    def net(self, node: str) -> Net:
        """The node's network as the shaping it carries makes it."""
        net = Net()
        for f in self.shaping.get(node, {}).values():
            EFFECTS[f.kind].shape(net, f)
        return net

    def model_qps(self, service: tuple[str, str], replica_count: int, now: float) -> float:
        model = service[1]
        if model in self.qps_override:
            return self.qps_override[model]
        # Demand stays what the fleet was sized for: losing replicas does not lower it.
        self.replicas_seen[service] = max(self.replicas_seen[service], replica_count)
        base = self.load.utilisation * m.profile_for(model).service_rate * self.replicas_seen[service]
        return base * self.load.factor(now)

    def tick(self, now: float | None = None) -> None:
        with self.lock:
            wall = time.time() if now is None else now
            mono = time.monotonic()
            seconds = min(max(mono - self.last_tick, 0.0), 10.0)
            self.last_tick = mono
            self._reap(wall)
            self._advance(seconds, wall)

    def services(self) -> dict[tuple[str, str], list[tuple[str, list[Pod]]]]:
        """(namespace, model) -> its replicas (key, member pods)."""
        by_service: dict[tuple[str, str], list[tuple[str, list[Pod]]]] = defaultdict(list)
        for key, members in self.replicas().items():
            by_service[(members[0].namespace, members[0].model)].append((key, members))
        return by_service

    def routes(self, groups: list[tuple[str, list[Pod]]]) -> list[Route]:
        """The replicas of one service the gateway sends requests to: the simulated load and the
        OpenAI endpoint route alike."""
        found = []
        for key, members in groups:
            size = int(members[0].labels.get(GROUP_SIZE_LABEL, len(members)))
            if not (len(members) == size and all(p.ready and not p.terminating for p in members)):
                continue  # the gateway routes to Ready replicas only, and not to draining ones
            speed, delay, failure = self.replica_speed(members)
            hung = any(p.uid in self.stalled for p in members)  # its collective waits for the frozen rank
            if failure is None and not (speed > 0 or hung):
                failure = FAILURES[0]  # looks Ready, so it gets traffic, which fails
            found.append(Route(key, members, 0.0 if hung else speed, delay, failure, hung))
        return found

    def _advance(self, seconds: float, now: float) -> None:
        by_service = self.services()
        for c in self.cards.values():
            c.utilisation = 0.0
        # A service keeps its demand when every replica is gone: that is when requests fail.
        for service in sorted(set(by_service) | set(self.replicas_seen)):
            groups = by_service.get(service, [])
            profile = m.profile_for(service[1])
            live = sum(1 for _key, members in groups if not any(p.terminating for p in members))
            qps = self.model_qps(service, live, now)
            self.requests[service] += qps * seconds
            routes = self.routes(groups)
            serving = [r for r in routes if r.failure is None]
            failing = {reason: sum(1 for r in routes if r.failure == reason) for reason in FAILURES}
            if not serving and not any(failing.values()):
                self.failed[(*service, NO_READY_REPLICA)] += qps * seconds
                continue
            share = qps / (len(serving) + sum(failing.values()))
            for reason, count in failing.items():
                self.failed[(*service, reason)] += share * count * seconds
            for r in serving:
                if r.key not in self.series:
                    self.series[r.key] = Series(m.ENGINES[r.members[0].engine])
                self._serve(self.series[r.key], r.members, profile, share, r.speed, r.delay, seconds)

    def _serve(self, s: Series, members: list[Pod], profile: m.Profile, arrival: float, speed: float,
               delay: float, seconds: float) -> None:
        if speed == 0:  # hung: what arrives queues, what runs stays in its batch, nothing completes
            # A hung engine updates none of its gauges: they keep their values of the moment it
            # froze (vLLM V1's frontend takes them from the engine core's outputs).
            s.backlog += arrival * seconds
            return
        service = profile.service_rate * speed
        s.backlog, done = m.step_backlog(s.backlog, service, arrival, seconds)
        wait = s.backlog / service
        rate = m.sojourn_rate(service, arrival)
        ttft_mean = delay + wait + 1.0 / rate
        itl_mean = profile.itl_seconds / speed
        decode = profile.output_tokens * itl_mean
        s.ttft_buckets = [b + done * v for b, v in zip(s.ttft_buckets, m.bucket_fractions(
            [m.ttft_cdf(x - delay, service, arrival, s.backlog) for x in s.engine.ttft_buckets]), strict=True)]
        s.ttft_count += done
        s.ttft_sum += done * ttft_mean
        tokens = done * profile.output_tokens
        s.itl_buckets = [b + tokens * v for b, v in zip(s.itl_buckets, m.bucket_fractions(
            [m.itl_cdf(x, itl_mean) for x in s.engine.itl_buckets]), strict=True)]
        s.itl_count += tokens
        s.itl_sum += tokens * itl_mean
        s.e2e_buckets = [b + done * v for b, v in zip(s.e2e_buckets, m.bucket_fractions(
            [m.ttft_cdf(x - delay - decode, service, arrival, s.backlog) for x in s.engine.e2e_buckets]),
            strict=True)]
        s.e2e_count += done
        s.e2e_sum += done * (ttft_mean + decode)
        s.success += done
        s.prompt_tokens += done * profile.prompt_tokens
        s.generation_tokens += tokens
        in_flight = arrival * (ttft_mean + decode)  # Little's law
        s.running = min(float(profile.max_num_seqs), in_flight)
        s.waiting = s.backlog + max(0.0, in_flight - profile.max_num_seqs)
        lead = members[0]
        kv_per_token = kv_bytes_per_token(
            int(lead.labels.get("kilocard.io/layers", 32)), int(lead.labels.get("kilocard.io/kv-heads", 32)),
            int(lead.labels.get("kilocard.io/head-dim", 128)), lead.labels.get("kilocard.io/dtype", "float16"))
        cards = [c for p in members for c in self.cards_of(p)]
        kv_capacity = max(1, len(cards)) * KV_BYTES_PER_CARD
        s.kv_usage = min(1.0, s.running * (profile.prompt_tokens + profile.output_tokens / 2) * kv_per_token
                         / kv_capacity)
        utilisation = min(1.0, arrival / service) if service > 0 else 1.0
        for c in cards:
            c.utilisation = utilisation

    # --- faults (the agent API) ----------------------------------------------------------------
    def _reap(self, now: float) -> None:
        for f in [f for f in self.faults.values() if f.expires_at <= now]:
            self._revert(f)

    def faults_on(self, node: str) -> list[Fault]:
        with self.lock:
            self._reap(time.time())
            return [f for f in self.faults.values() if f.node == node]

    def add_fault(self, node: str, body: Any, key: str | None = None) -> Fault:
        """Validate and apply a fault on `node`; raises FaultError naming the bad field. `key`
        remembers the request (see `created`)."""
        spec = validate(body)
        with self.lock:
            if node not in self.node_cards:
                raise FaultError("node", f"unknown node {node!r}", status=404)
            card = spec["target"].get("card")
            if card is not None and not 0 <= card < self.node_cards[node]:
                raise FaultError("target.card", f"node {node} has cards 0-{self.node_cards[node] - 1}, got {card}")
            for other in self.faults.values():  # what cannot stack, as the node agent refuses it
                if other.node == node and not kinds.stackable(spec["kind"], spec["target"], other.kind, other.target):
                    raise FaultError("target", f"{spec['target']} of {node} already has a {other.kind} fault "
                                               f"({other.id}, run {other.run_id or '?'})", status=409)
            f = Fault.create(node, spec)
            if spec["kind"] in self.misfires[node]:  # listed as applied, and never in effect
                self.misfires[node].discard(spec["kind"])
                self.sabotaged.add(f.id)
            else:
                self._apply(f)
            self.faults[f.id] = f
            if key:
                self.by_key[key] = f
            return f

    def created(self, key: str | None) -> Fault | None:
        """The fault a request with this idempotency key made, if one did."""
        with self.lock:
            return self.by_key.get(key) if key else None

    def _active(self, node: str, fault_id: str) -> Fault:
        f = self.faults.get(fault_id)
        if f is None or f.node != node:
            raise KeyError(fault_id)
        return f

    def observe(self, node: str, fault_id: str) -> tuple[str, str]:
        """(confirmed | mismatch | inconclusive, evidence): an active fault's effect read back from
        the world, as the agent reads its own back; KeyError when the fault is not active on `node`."""
        with self.lock:
            self._reap(time.time())
            f = self._active(node, fault_id)
            return EFFECTS[f.kind].observe(self, f)

    def misfire(self, node: str, kind: str) -> None:
        """The next fault of agent kind `kind` on `node` is accepted and listed, and never takes
        effect: a fault that silently does not land (a DCGM field not injected, the wrong
        interface), for tests of what reads it back."""
        kinds.get(kind)
        with self.lock:
            self.misfires[node].add(kind)

    def sabotage(self, node: str, fault_id: str) -> None:
        """Undo an active fault's effect behind the agent's back, as if someone restored the node by
        hand: the fault stays listed, `observe` tells the mismatch, and its revert later finds
        nothing left to undo. KeyError when the fault is not active on `node`."""
        with self.lock:
            self._reap(time.time())
            f = self._active(node, fault_id)
            if f.id not in self.sabotaged:
                self.sabotaged.add(f.id)
                EFFECTS[f.kind].revert(self, f)

    def delete_fault(self, node: str, fault_id: str) -> str:
        """'reverted' now, 'already ended' (idempotent), or KeyError when never known."""
        with self.lock:
            f = self.faults.get(fault_id)
            if f is not None and f.node == node:
                self._revert(f)
                return "reverted"
            if fault_id in self.ended:
                return "already ended"
            raise KeyError(fault_id)

    def _apply(self, f: Fault) -> None:
        EFFECTS[f.kind].apply(self, f)

    def _revert(self, f: Fault) -> None:
        self.faults.pop(f.id, None)
        self.ended.add(f.id)
        if f.id in self.sabotaged:
            self.sabotaged.discard(f.id)  # undone by hand already
        else:
            EFFECTS[f.kind].revert(self, f)

    def take_actions(self) -> list[tuple[str, str, Any]]:
        with self.lock:
            actions, self.actions = self.actions, []
            return actions
