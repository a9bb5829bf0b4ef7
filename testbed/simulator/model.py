"""The latency model of one replica, pure arithmetic (no cluster, no clock).

A replica is a queue: requests arrive at `arrival` per second (its share of the model's load) and
are served at `service` per second (its TP group's speed). While arrival < service the queue is
M/M/1 and the time to first token is exponential with rate (service - arrival): P95 is
ln(20) / (service - arrival). Halving the service rate at a utilisation of 0.25 triples it, which
is the field account's "one sub-healthy card, P95 TTFT x3". At or past saturation a backlog builds
(and later drains); each request then also waits backlog / service. The sojourn rate never goes
below a floor, so saturation stretches latency instead of dividing by zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# vLLM V1 histogram buckets (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
               480.0, 960.0, 1920.0, 7680.0)
MIN_SOJOURN_RATE_FRACTION = 0.02  # of the service rate


@dataclass(frozen=True)
class Engine:
    """What an inference engine exports: its metric prefix, histogram buckets and gauge names."""

    name: str
    prefix: str
    ttft_buckets: tuple[float, ...]
    itl_buckets: tuple[float, ...]
    e2e_buckets: tuple[float, ...]
    running: str
    waiting: str
    kv_usage: str
    requests: str  # a counter of finished requests
    preemptions: str | None = None  # a counter of requests preempted (None: the engine exports none)


# SGLang's defaults (python/sglang/srt/metrics/collector.py): no 0.5 s TTFT bucket, so a 500 ms
# SLO is read between 0.4 and 0.6.
SGLANG_TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
                       400.0)
SGLANG_ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2,
                      0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)
SGLANG_E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
                      400.0, 600.0, 1200.0, 1800.0, 2400.0)
ENGINES = {
    "vllm": Engine("vllm", "vllm:", TTFT_BUCKETS, ITL_BUCKETS, E2E_BUCKETS, "num_requests_running",
                   "num_requests_waiting", "kv_cache_usage_perc", "request_success", "num_preemptions"),
    "sglang": Engine("sglang", "sglang:", SGLANG_TTFT_BUCKETS, SGLANG_ITL_BUCKETS, SGLANG_E2E_BUCKETS,
                     "num_running_reqs", "num_queue_reqs", "token_usage", "num_requests"),
}


@dataclass(frozen=True)
class Profile:
    """How a model's replicas behave when healthy, tuned to the field account."""

    service_rate: float  # requests/s one healthy replica serves (prefill-bound)
    itl_seconds: float  # mean inter-token latency when healthy
    prompt_tokens: int  # mean prompt length
    output_tokens: int  # mean output length
    max_num_seqs: int = 256
    utilisation: float | None = None  # the fleet's own traffic to it, where not the world's (LoadProfile)


# Default load per replica is a quarter of its service rate: utilisation 0.25.
PROFILES = {
    # 7B at TP=1: a few hundred QPS at tens of ms TTFT.
    "llama-2-7b": Profile(service_rate=200.0, itl_seconds=0.012, prompt_tokens=512, output_tokens=128),
    "llama-2-7b-fragile": Profile(service_rate=200.0, itl_seconds=0.012, prompt_tokens=512, output_tokens=128),
    # 70B at TP=8: P95 TTFT 200 ms healthy; one half-speed card -> 600 ms, over the 500 ms SLO.
    "llama-3-70b": Profile(service_rate=20.0, itl_seconds=0.030, prompt_tokens=1024, output_tokens=256),
    # 405B at TP=16 over two nodes.
    "llama-3-405b": Profile(service_rate=12.0, itl_seconds=0.045, prompt_tokens=1024, output_tokens=256),
    # 8B for long contexts, decoding big batches of long sequences: light traffic of its own (1 % of
    # its prefill), long prompts from a load.
    "llama-3-8b-long": Profile(service_rate=100.0, itl_seconds=0.030, prompt_tokens=1024, output_tokens=128,
                               utilisation=0.01),
}
DEFAULT_PROFILE = Profile(service_rate=50.0, itl_seconds=0.020, prompt_tokens=512, output_tokens=128)


def profile_for(model: str) -> Profile:
    return PROFILES.get(model, DEFAULT_PROFILE)


def sojourn_rate(service: float, arrival: float) -> float:
    return max(service - arrival, service * MIN_SOJOURN_RATE_FRACTION, 1e-9)


def ttft_p95(service: float, arrival: float, backlog: float = 0.0) -> float:
    """P95 time to first token of a replica (seconds)."""
    return backlog / max(service, 1e-9) + math.log(20) / sojourn_rate(service, arrival)


def ttft_cdf(x: float, service: float, arrival: float, backlog: float = 0.0) -> float:
    """P(TTFT <= x): exponential sojourn shifted by the backlog wait."""
    shifted = x - backlog / max(service, 1e-9)
    if shifted <= 0:
        return 0.0
    return 1.0 - math.exp(-sojourn_rate(service, arrival) * shifted)


def step_backlog(backlog: float, service: float, arrival: float, seconds: float) -> tuple[float, float]:
    """Advance the backlog; return (new backlog, requests completed in the step)."""
    capacity = service * seconds
    work = backlog + arrival * seconds
    if arrival < service:
        # Stable queue: arrivals are served and the backlog drains with the spare capacity.
        left = max(0.0, backlog - (service - arrival) * seconds)
        return left, arrival * seconds + backlog - left
    return work - capacity, capacity


def itl_cdf(x: float, mean: float) -> float:
    """Inter-token latency: Erlang(k=4) around the mean (decode steps vary little)."""
    if x <= 0:
        return 0.0
    k, rate = 4, 4 / mean
    term, total = 1.0, 1.0
    for i in range(1, k):
        term *= rate * x / i
        total += term
    return 1.0 - math.exp(-rate * x) * total


def bucket_fractions(cdf_values: list[float]) -> list[float]:
    """Cumulative fractions at each bucket bound (monotonic, clamped to [0, 1])."""
    out, last = [], 0.0
    for v in cdf_values:
        last = min(1.0, max(last, v))
        out.append(last)
    return out


# The KV cache, as vLLM's scheduler spends it (vllm/v1/core/kv_cache_manager.py, sched/scheduler.py):
# blocks of BLOCK_TOKENS tokens; a prompt's full blocks that another request already computed are
# shared (automatic prefix caching); a waiting request is admitted while WATERMARK of the blocks
# stays free; a running request that needs a block when none is free preempts the latest one,
# whose blocks are freed and whose prefill is recomputed when it runs again.
BLOCK_TOKENS = 16
WATERMARK = 0.01


@dataclass(frozen=True)
class Shape:
    """The requests a replica serves, on average."""

    prompt_tokens: float
    output_tokens: float
    cached_tokens: float = 0.0  # of the prompt, a prefix other requests share (its blocks held once)


def mix(parts: list[tuple[float, Shape]]) -> Shape:
    """The mean request of traffic made of (rate, shape) parts."""
    total = sum(rate for rate, _ in parts)
    if total <= 0:
        return parts[0][1]
    return Shape(sum(r * s.prompt_tokens for r, s in parts) / total, sum(r * s.output_tokens for r, s in parts) / total,
                 sum(r * s.cached_tokens for r, s in parts) / total)


def blocks(tokens: float) -> int:
    return math.ceil(tokens / BLOCK_TOKENS) if tokens > 0 else 0


def kv_held(in_batch: float, shape: Shape) -> float:
    """Tokens' worth of KV blocks a batch of `in_batch` requests holds: each its prompt's blocks
    past the shared prefix and, on average over its decode, half its output's; the shared prefix's
    blocks once."""
    if in_batch <= 0:
        return 0.0
    own = blocks(shape.prompt_tokens - shape.cached_tokens) + blocks(shape.output_tokens) / 2
    return (in_batch * own + blocks(shape.cached_tokens)) * BLOCK_TOKENS


def overflow(held: float, capacity: float) -> float:
    """The share of a batch's KV demand that does not fit under the watermark: the requests that
    meet a full cache and are preempted (0 while it fits)."""
    room = capacity * (1 - WATERMARK)
    return max(0.0, 1 - room / held) if held > 0 else 0.0


def prefill_rate(profile: Profile, shape: Shape, speed: float) -> float:
    """Requests per second a replica's prefill takes: its profile's rate at the profile's prompt,
    scaled by the tokens it must compute (past a cached prefix), up to four times faster for a
    short prompt (then other work bounds it)."""
    computed = max(shape.prompt_tokens - shape.cached_tokens, profile.prompt_tokens / 4)
    return profile.service_rate * speed * profile.prompt_tokens / computed


@dataclass(frozen=True)
class Load:
    """A replica's traffic as classes of (requests per second, shape, the prefill's rate for that
    shape): each class is in the batch for its own prefill and decode, and holds its own blocks."""

    classes: tuple[tuple[float, Shape, float], ...]

    @classmethod
    def of(cls, profile: Profile, classes: list[tuple[float, Shape]], speed: float) -> Load:
        return cls(tuple((rate, shape, prefill_rate(profile, shape, speed)) for rate, shape in classes))

    @property
    def shape(self) -> Shape:
        """Its mean request."""
        return mix([(rate, shape) for rate, shape, _p in self.classes])

    @property
    def prefill(self) -> float:
        """Requests per second its prefill takes, for this mix (each request its own prefill time)."""
        total = sum(rate for rate, _s, _p in self.classes)
        if total <= 0 or any(p <= 0 for _r, _s, p in self.classes):  # no traffic, or a hung replica
            return min(p for _r, _s, p in self.classes)
        return total / sum(rate / p for rate, _s, p in self.classes)

    def batch(self, itl: float) -> float:
        """Requests in its batch (Little's law, class by class)."""
        return sum(rate * (1 / p + shape.output_tokens * itl) for rate, shape, p in self.classes)

    def kv_held(self, itl: float) -> float:
        """Tokens' worth of KV blocks its batch holds, class by class."""
        return sum(kv_held(rate * (1 / p + shape.output_tokens * itl), shape) for rate, shape, p in self.classes)
