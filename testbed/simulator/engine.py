"""The fleet simulator's load model: which pods make up a replica, which replicas the gateway
routes to and how fast each answers (its cards, its network), and each replica's queue advanced
step by step into the histograms and counters its engine exports (testbed/simulator/model.py).

Replicas: a pod with a `kilocard.io/model` label is one replica, unless it belongs to a TP group
(`kilocard.io/tp-group`, or LeaderWorkerSet's group key: chaos.vocabulary.group_of, as the
toolkit reads it), in which case the pods of that group together are one replica (Ready when all
its members are; metrics come from rank 0).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

from chaos.vocabulary import KV_BYTES_PER_CARD
from probes.capacity import kv_bytes_per_token
from testbed.simulator import model as m
from testbed.simulator.effects import Net, net_of
from testbed.simulator.state import Pod, Series, State

TP_LINK_MBIT = 100_000.0  # what a cross-node TP group needs before bandwidth slows it
# Why a replica that looks Ready fails the requests sent to it (the gateway's failure reasons,
# exported from zero so that a rate sees the first failures).
FAILURES = ("replica_unreachable", "connection_reset")
NO_READY_REPLICA = "no_ready_replica"
FAILURE_REASONS = (*FAILURES, NO_READY_REPLICA)  # the gateway's failures counter, by reason


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
        base = self.load.utilisation * m.profile_for(model).service_rate * self.replicas_seen[service]
        return base * self.load.factor(now)

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
