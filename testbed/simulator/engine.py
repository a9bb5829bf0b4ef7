"""The fleet simulator's load model: which pods make up a replica, which replicas the gateway
routes to and how fast each answers (its cards, its network), and each replica's queue advanced
step by step into the histograms and counters its engine exports (testbed/simulator/model.py).

Replicas: a pod with a `kilocard.io/model` label is one replica, unless it belongs to a TP group
(`kilocard.io/tp-group`, or LeaderWorkerSet's group key: chaos.vocabulary.group_of, as the
toolkit reads it), in which case the pods of that group together are one replica (Ready when all
its members are; metrics come from rank 0).

Routers (chaos.routers) sit in front of the services their discovery finds (`Tier`): the share of
a service's traffic that meets a router unable to answer is lost (a proxy, or a picker failing
closed) as the gateway's router_unavailable failures, and a proxy that retries lets a request
that met an unreachable replica try another.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass

from chaos import routers
from chaos.vocabulary import KV_BYTES_PER_CARD
from probes.capacity import kv_bytes_per_token
from testbed.simulator import model as m
from testbed.simulator.effects import Net, net_of
from testbed.simulator.state import Pod, RouterPod, Series, State
from testbed.simulator.traffic import block_hashes

TP_LINK_MBIT = 100_000.0  # what a cross-node TP group needs before bandwidth slows it
# Why a replica that looks Ready fails the requests sent to it (the gateway's failure reasons,
# exported from zero so that a rate sees the first failures).
FAILURES = ("replica_unreachable", "connection_reset")
NO_READY_REPLICA = "no_ready_replica"
# A routing tier that cannot route (chaos.routers): no router Ready, a frozen or unreachable
# proxy, or an endpoint picker that does not answer a gateway set to FailClose.
ROUTER_UNAVAILABLE = "router_unavailable"
OFFERED_SECONDS = 2.0  # the endpoint's requests are taken as their rate over about this long
FAILURE_REASONS = (*FAILURES, NO_READY_REPLICA, ROUTER_UNAVAILABLE)  # the gateway's failures counter, by reason


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
class Tier:
    """The routers in front of one service now: those the Service sends connections to (Ready,
    not draining), each with whether it is stuck (frozen, or its node lost or partitioned)."""

    shape: str  # routers.PROXY or routers.PICKER
    failure_mode: str | None
    attempts: int
    routers: tuple[tuple[str, bool], ...]  # (uid, stuck)

    @property
    def unanswered(self) -> float:
        """The share of requests that meet no router able to answer (the Service spreads them)."""
        return sum(stuck for _uid, stuck in self.routers) / len(self.routers) if self.routers else 1.0

    @property
    def fails_unanswered(self) -> bool:
        """Are the requests no router answers lost? A proxy holds them until the client gives up;
        a gateway whose picker does not answer drops them unless it fails open."""
        return self.shape == routers.PROXY or self.failure_mode != routers.FAIL_OPEN


@dataclass(frozen=True)
class LoadProfile:
    utilisation: float = 0.25  # default load per replica, as a fraction of its healthy service rate
    spike_factor: float = 1.0  # load multiplier during the first `spike_minutes` of every hour
    spike_minutes: int = 5

    def factor(self, now: float) -> float:
        return self.spike_factor if time.gmtime(now).tm_min < self.spike_minutes else 1.0


class Engine(State):
    """The load model over the simulator's state (`load`: the demand it is sized for)."""

    load: LoadProfile

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
        speed = min((c.pace() for p in members for c in self.cards_of(p)), default=1.0)
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

    def net(self, node: str) -> Net:
        """The node's network as the shaping it carries makes it."""
        return net_of(self, node)

    def model_qps(self, service: tuple[str, str], replica_count: int, now: float) -> float:
        model = service[1]
        if model in self.qps_override:
            return self.qps_override[model]
        # Demand stays what the fleet was sized for: losing replicas does not lower it.
        self.replicas_seen[service] = max(self.replicas_seen[service], replica_count)
        profile = m.profile_for(model)
        share = self.load.utilisation if profile.utilisation is None else profile.utilisation
        base = share * profile.service_rate * self.replicas_seen[service]
        return base * self.load.factor(now)

    def offer(self, service: tuple[str, str], words: list[str], output_tokens: int) -> None:
        """A request the endpoint answers joins the service's demand at the next tick (the caller
        holds the lock)."""
        cached = self.prefixes[service].hit(block_hashes(words))
        self.offered[service].add(len(words), cached, output_tokens)

    def demand(self, service: tuple[str, str], replica_count: int, now: float) -> list[tuple[float, m.Shape]]:
        """The service's traffic as classes of (requests per second, their shape): the fleet's own,
        and what the endpoint took lately. Kept apart: a batch holds each class for its own time."""
        profile = m.profile_for(service[1])
        own = (self.model_qps(service, replica_count, now), m.Shape(profile.prompt_tokens, profile.output_tokens))
        return [own, self.offered_rate[service]] if service in self.offered_rate else [own]

    def _take_offered(self, seconds: float) -> None:
        """The endpoint's requests since the last tick into each service's offered rate and shape,
        averaged over OFFERED_SECONDS (a batch holds about that long of arrivals, not one tick's)."""
        keep = 1.0 - math.exp(-seconds / OFFERED_SECONDS)
        for service in set(self.offered) | set(self.offered_rate):
            took = self.offered.get(service)
            fresh = (took.requests / seconds, took.shape()) if took else None
            old_rate, old_shape = self.offered_rate.get(service, (0.0, fresh[1] if fresh else m.Shape(0, 0)))
            new_rate, new_shape = fresh or (0.0, old_shape)
            rate = old_rate + (new_rate - old_rate) * keep
            if rate < 1e-3:
                self.offered_rate.pop(service, None)
                continue
            shape = m.mix([(old_rate * (1 - keep), old_shape), (new_rate * keep, new_shape)])
            self.offered_rate[service] = (rate, shape)
        self.offered.clear()

    def kv_capacity(self, members: list[Pod]) -> float:
        """The replica's KV cache in tokens: as its engine's arguments fix it, else its cards' HBM
        left after the weights over the model's KV bytes per token."""
        lead = members[0]
        if lead.kv_tokens:
            return float(lead.kv_tokens)
        per_token = kv_bytes_per_token(
            int(lead.labels.get("kilocard.io/layers", 32)), int(lead.labels.get("kilocard.io/kv-heads", 32)),
            int(lead.labels.get("kilocard.io/head-dim", 128)), lead.labels.get("kilocard.io/dtype", "float16"))
        cards = sum(len(self.cards_of(p)) for p in members)
        return max(1, cards) * KV_BYTES_PER_CARD / per_token

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
            size = next((p.group_size for p in members if p.group_size), len(members))
            if not (len(members) == size and all(p.ready and not p.terminating for p in members)):
                continue  # the gateway routes to Ready replicas only, and not to draining ones
            speed, delay, failure = self.replica_speed(members)
            hung = any(p.uid in self.stalled for p in members)  # its collective waits for the frozen rank
            if failure is None and not (speed > 0 or hung):
                failure = FAILURES[0]  # looks Ready, so it gets traffic, which fails
            found.append(Route(key, members, 0.0 if hung else speed, delay, failure, hung))
        return found

    def tier(self, service: tuple[str, str], groups: list[tuple[str, list[Pod]]]) -> Tier | None:
        """The routing tier in front of a service (its routers' discovery finds one of its pods);
        None where none ever was (the gateway routes on its own). Once a router fronted it, it
        needs one: a tier whose every router is gone routes nothing."""
        pods = [p for _key, members in groups for p in members]
        mine = [r for r in self.routers.values() if any(r.router.finds(p.namespace, p.labels) for p in pods)]
        if mine:
            self.tiers_seen[service] = min(mine, key=lambda r: r.uid).router
        last = self.tiers_seen.get(service)
        if last is None:
            return None
        return Tier(last.shape, last.failure_mode, last.attempts,
                    tuple(sorted((r.uid, self.router_stuck(r)) for r in mine if r.ready)))

    def router_stuck(self, r: RouterPod) -> bool:
        """Does the router answer nothing: its process frozen, its node lost or partitioned?"""
        return r.uid in self.stalled or r.node in self.lost or self.net(r.node).partition

    def _advance(self, seconds: float, now: float) -> None:
        by_service = self.services()
        if seconds > 0:
            self._take_offered(seconds)
        for c in self.cards.values():
            c.utilisation = 0.0
        # A service keeps its demand when every replica is gone: that is when requests fail.
        for service in sorted(set(by_service) | set(self.replicas_seen)):
            groups = by_service.get(service, [])
            profile = m.profile_for(service[1])
            live = sum(1 for _key, members in groups if not any(p.terminating for p in members))
            classes = self.demand(service, live, now)
            qps = sum(rate for rate, _shape in classes)
            self.requests[service] += qps * seconds
            tier = self.tier(service, groups)
            lost = tier.unanswered if tier is not None and tier.fails_unanswered else 0.0
            self.failed[(*service, ROUTER_UNAVAILABLE)] += lost * qps * seconds
            qps *= 1 - lost
            routes = self.routes(groups)
            serving = [r for r in routes if r.failure is None]
            failing = {reason: sum(1 for r in routes if r.failure == reason) for reason in FAILURES}
            if not serving and not any(failing.values()):
                self.failed[(*service, NO_READY_REPLICA)] += qps * seconds
                continue
            routed = len(serving) + sum(failing.values())
            # A request meets a failing replica with this chance at each try, and a retrying proxy
            # tries another (the gateway alone does not retry).
            miss = (sum(failing.values()) / routed) ** (tier.attempts if tier is not None else 1)
            for reason, count in failing.items():
                if count:
                    self.failed[(*service, reason)] += qps * miss * count / sum(failing.values()) * seconds
            each = [(rate * (1 - lost) * (1 - miss) / max(len(serving), 1), shape) for rate, shape in classes]
            for r in serving:
                if r.key not in self.series:
                    self.series[r.key] = Series(m.ENGINES[r.members[0].engine])
                self._serve(self.series[r.key], r.members, profile, each, r.speed, r.delay, seconds)

    def _serve(self, s: Series, members: list[Pod], profile: m.Profile, classes: list[tuple[float, m.Shape]],
               speed: float, delay: float, seconds: float) -> None:
        """Advance one replica by `seconds`: `classes` is its share of the service's traffic."""
        arrival = sum(rate for rate, _shape in classes)
        if speed == 0:  # hung: what arrives queues, what runs stays in its batch, nothing completes
            # A hung engine updates none of its gauges: they keep their values of the moment it
            # froze (vLLM V1's frontend takes them from the engine core's outputs).
            s.backlog += arrival * seconds
            return
        itl_mean = profile.itl_seconds / speed
        load = m.Load.of(profile, classes, speed)
        mean = load.shape
        decode = mean.output_tokens * itl_mean
        # The batch its arrivals ask for (Little's law per class) and the KV blocks it would hold:
        # the share that meets a full cache is preempted, its prefill done again when readmitted,
        # and only the share that fits completes, so the rest of the arrivals queue.
        capacity = self.kv_capacity(members)
        asked = load.batch(itl_mean)
        s.batch = min(float(profile.max_num_seqs), asked)
        held = load.kv_held(itl_mean) * s.batch / max(asked, 1e-9)
        over = m.overflow(held, capacity)
        prefill = load.prefill
        service = min(prefill / (1 + over), arrival * (1 - over)) if over else prefill
        s.service = service
        s.backlog, done = m.step_backlog(s.backlog, service, arrival, seconds)
        wait = s.backlog / service
        rate = m.sojourn_rate(service, arrival)
        ttft_mean = delay + wait + 1.0 / rate
        s.ttft_buckets = [b + done * v for b, v in zip(s.ttft_buckets, m.bucket_fractions(
            [m.ttft_cdf(x - delay, service, arrival, s.backlog) for x in s.engine.ttft_buckets]), strict=True)]
        s.ttft_count += done
        s.ttft_sum += done * ttft_mean
        tokens = done * mean.output_tokens
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
        s.prompt_tokens += done * mean.prompt_tokens
        s.generation_tokens += tokens
        s.preemptions += done * over
        s.kv_usage = min(1.0, held / capacity)
        in_flight = arrival * (ttft_mean + decode)  # Little's law
        s.running = min(float(profile.max_num_seqs), in_flight)
        if over:  # the batch holds what fits in its blocks; the rest wait for them
            s.running = min(s.running, s.batch) * (1 - over)
        s.waiting = s.backlog + max(0.0, in_flight - s.running)
        cards = [c for p in members for c in self.cards_of(p)]
        utilisation = min(1.0, arrival / service) if service > 0 else 1.0
        for c in cards:
            c.utilisation = utilisation
