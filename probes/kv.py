"""KV-cache exhaustion: long prompts, long outputs or a burst fill a replica's KV cache; the engine
then preempts running requests (frees their blocks, recomputes their prefill later) and queues the
rest, so TTFT climbs while every pod is Ready and every health check green. The field account:
"KV cache decides how much concurrency the cluster carries".

The verdict (`judge`, pure) is per replica, never a model-level sum or mean (one exhausted replica
among many is the case): each replica's preemption counter (vLLM's `vllm:num_preemptions_total`)
counted over the interval, and its KV usage gauge at every sample, against the bounds. A load that
never reached the model would pass both bounds without rehearsing anything: some replica's usage
must reach `min_usage`.

The thin fetcher (probes.chaostoolkit.kv_cache_within) reads both series per replica over the
interval (range queries), with the replicas that must show a series at each sample from the run's
follower (an expected replica without a series is silence, not health).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chaos.vocabulary import LAST_DISRUPTION
from probes.verdict import Contract, Verdict, failed, passed, unknown

# The names each series may be stored under, in the order they are tried (any spelling). SGLang
# exports no preemption counter (its num_retracted_reqs is a gauge reset at every publish).
PREEMPTION_NAMES = ("vllm:num_preemptions_total",)
KV_USAGE_NAMES = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")

CONTRACTS = (
    Contract(
        "kv_cache_within", "probe",
        asserts="from time zero for `duration` s, no replica of the model preempted more than `max_preemptions` "
                "requests and none's KV-cache usage passed `max_usage`, each replica judged on its own; and the load "
                "reached the model: some replica's usage reached `min_usage`",
        time_zero=f"`fault_at` if given, else {LAST_DISRUPTION}",
        interval="every sample from time zero to time zero plus `duration`: the probe waits for the interval's end "
                 "and a scrape, even past a failure (how many preempted, and how long, is the finding), and a probe "
                 "reached later judges Prometheus's record of it, never a trailing window alone",
        missing="a sample where a replica whose group had been whole and Ready for three scrapes (the run's "
                "follower's record; its engine's gauges land at the first scrape after it serves) has no series is "
                "unseen; unseen samples and nothing failed is unknown, never 'within'. A "
                "replica's counter first seen after time zero counts from 0 (a replacement's preemptions all "
                "count); one that falls (a restart) counts on from its new value",
        exceptions="Prometheus not answering, bad PromQL, an engine exporting no preemption counter (SGLang): "
                   "error (the probe raises)",
        outcomes=(("within", "ok: every sample seen, no replica over either bound, and some usage at `min_usage`"),
                  ("preempted", "failed: the replica that preempted most, how many and when it began"),
                  ("over_usage", "failed: the replica whose usage passed `max_usage`, its peak and when"),
                  ("idle", "failed: every sample seen and no replica's usage reached `min_usage`: the load did "
                           "not reach the model"),
                  ("unknown", "nothing failed and some samples unseen, or no sample to judge")),
        judge=("probes.kv.judge", "probes.kv.preempted", "chaos.timezero.choose")),
)


@dataclass(frozen=True)
class Sample:
    at: float  # epoch seconds
    preemptions: dict[str, float] = field(default_factory=dict)  # replica (its lead pod) -> counter value
    usage: dict[str, float] = field(default_factory=dict)  # replica -> KV-cache usage, 0 to 1
    ready: frozenset[str] | None = None  # the replicas that must show a series here; None: not known
    error: str = ""  # a query failed here: nothing is known


@dataclass(frozen=True)
class Bounds:
    duration: float = 60.0  # seconds from time zero judged
    max_preemptions: float = 0.0  # per replica over the interval
    max_usage: float = 1.0
    min_usage: float = 0.01  # some replica's usage must reach it: the load reached the model


def preempted(samples: list[Sample], zero: float) -> dict[str, tuple[float, float]]:
    """Replica -> (requests preempted after `zero`, when its count first rose), from the counter's
    samples in time order: from its last value at or before `zero`, else from 0 (first seen after
    it); a fall is a restart, counted on from the new value."""
    counted: dict[str, tuple[float, float]] = {}
    last: dict[str, float] = {}
    for s in sorted(samples, key=lambda s: s.at):
        for replica, value in s.preemptions.items():
            before = last.get(replica, 0.0)
            last[replica] = value
            if s.at <= zero:
                continue
            rise = value - before if value >= before else value
            if rise > 0:
                total, since = counted.get(replica, (0.0, s.at))
                counted[replica] = (total + rise, since)
    return counted


def _unseen(s: Sample) -> bool:
    if s.error:
        return True
    return s.ready is not None and any(r not in s.preemptions or r not in s.usage for r in s.ready)


def judge(samples: list[Sample], zero: float, bounds: Bounds) -> Verdict:
    """within (ok), preempted, over_usage, idle or unknown, over the samples from `zero` to the
    interval's end (those before `zero` give each counter its starting value)."""
    end = zero + bounds.duration
    kept = [s for s in samples if s.at <= end]
    judged = [s for s in kept if s.at >= zero]
    if not judged:
        return unknown(f"no sample in the {bounds.duration:g} s after time zero")
    counts = preempted(kept, zero)
    worst = max(sorted(counts), key=lambda r: counts[r][0], default=None)
    if worst is not None and counts[worst][0] > bounds.max_preemptions:
        count, since = counts[worst]
        return failed(f"{worst} preempted {round(count, 1):g} requests from {since - zero:.0f} s after time zero "
                      f"(at most {bounds.max_preemptions:g} allowed): its KV cache ran out", outcome="preempted",
                      replica=worst, preemptions=round(count, 1), since_seconds=round(since - zero, 3),
                      preempting_replicas=sum(1 for c, _since in counts.values() if c > bounds.max_preemptions))
    peaks: dict[str, tuple[float, float]] = {}
    for s in judged:
        for replica, value in s.usage.items():
            if replica not in peaks or value > peaks[replica][0]:
                peaks[replica] = (value, s.at)
    hottest = max(sorted(peaks), key=lambda r: peaks[r][0], default=None)
    if hottest is not None and peaks[hottest][0] > bounds.max_usage:
        value, at = peaks[hottest]
        return failed(f"{hottest}'s KV-cache usage reached {value:.0%} {at - zero:.0f} s after time zero (bound "
                      f"{bounds.max_usage:.0%})", outcome="over_usage", replica=hottest, usage=round(value, 4),
                      at_seconds=round(at - zero, 3))
    unseen = [s for s in judged if _unseen(s)]
    if unseen:
        first = unseen[0]
        why = first.error or "silent: " + ", ".join(sorted(r for r in first.ready or () if r not in first.preemptions
                                                          or r not in first.usage))
        return unknown(f"no replica over a bound, but {len(unseen)} of {len(judged)} samples unseen, the first "
                       f"{first.at - zero:.0f} s after time zero ({why})", unseen=len(unseen),
                       first_unseen={"at_seconds": round(first.at - zero, 3), "why": why})
    peak = peaks[hottest][0] if hottest is not None else 0.0
    if peak < bounds.min_usage:
        return failed(f"no replica's KV-cache usage reached {bounds.min_usage:.0%} (peak {peak:.1%}): the load did "
                      "not reach the model, and nothing was rehearsed", outcome="idle", peak_usage=round(peak, 4))
    return passed(f"no replica preempted over {bounds.duration:g} s; KV-cache usage peaked at {peak:.0%} on "
                  f"{hottest}", outcome="within", replica=hottest, peak_usage=round(peak, 4),
                  replicas=len(peaks))
