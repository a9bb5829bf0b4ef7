"""The slow card that looks healthy: one card of a TP group running slower (heat, a power cap, a
driver remapping memory) makes every decode step of its group slower, while every health check
stays green and every pod Ready. No error names it; only the group's own latency does, against
its peers serving the same model under the same load.

The verdict (`judge`, pure) compares replicas, never a model-level figure (averaging hides the
one slow group). At each sample, a replica's value is its lead's per-replica inter-token latency
(P95 over the rate window; `slo.indicator("itl_p95", by="pod")`). A replica is slow at a sample
when its value is at least `ratio` times the median of the other replicas' values there; that
needs at least `peers` other replicas with a value. It is named once it has been slow on every
sample for `hold` seconds.

The thin fetcher (probes.chaostoolkit.straggler_named_within) reads slo.history over the interval,
with the replicas Ready at each sample from the run's follower (an expected replica without a
series is silence, not health).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from chaos.vocabulary import LAST_DISRUPTION
from probes.verdict import Contract, Verdict, failed, passed, unknown

CONTRACTS = (
    Contract(
        "straggler_named_within", "probe",
        asserts="within `budget` s of time zero one replica of the model was slower than its peers, by at least "
                "`ratio` times the median of the others' inter-token latency, on every sample for `hold` s, and "
                "is named: found from the replicas' own series, never from the fault's record",
        time_zero=f"`fault_at` if given, else {LAST_DISRUPTION}; the first `blind` s after it (a rate window and a "
                  "scrape) are not judged: no sample there could show the fault",
        interval="every sample from time zero plus `blind` to time zero plus `budget`; a probe reached after "
                 "its budget judges Prometheus's record of that interval",
        missing="a sample where a replica whose group had been whole and Ready for a rate window and a scrape "
                "(the run's follower's record) has no series, or where fewer than `peers` other replicas have "
                "one, is unseen: it breaks a hold (the silent one may be the slow one), and a verdict with "
                "unseen samples and nothing named is unknown, never 'no straggler'; without a record reaching "
                "back, only the replicas with a series are compared",
        exceptions="Prometheus not answering, bad PromQL: error (the probe raises)",
        outcomes=(("named", "ok: a replica slow on every sample for `hold` s, named, with when and how slow"),
                  ("already", "failed: the replica named was already slow at time zero (not the fault's)"),
                  ("not_named", "failed: every sample seen and none slow long enough; the slowest replica and "
                                "its ratio said"),
                  ("unknown", "nothing named and some samples unseen, or no sample to judge")),
        judge=("probes.straggler.judge", "chaos.timezero.choose")),
)


@dataclass(frozen=True)
class Sample:
    at: float  # epoch seconds
    values: dict[str, float] = field(default_factory=dict)  # replica (its lead pod) -> inter-token latency
    ready: frozenset[str] | None = None  # the replicas Ready at `at` (their leads); None: not known
    error: str = ""  # the query failed here: nothing is known


@dataclass(frozen=True)
class Rule:
    ratio: float = 1.3  # how many times its peers' median a slow replica's latency is, at least
    hold: float = 15.0  # seconds slow on every sample before it is named
    budget: float = 60.0  # seconds from time zero by which it must be named
    blind: float = 0.0  # seconds after time zero not judged
    peers: int = 1  # other replicas with a value a sample needs


def slowest(sample: Sample, rule: Rule) -> tuple[str, float] | None:
    """(the slowest replica, its latency over the median of the others') at a sample; None when
    the sample is unseen (a failed query, a Ready replica silent, too few peers)."""
    if sample.error:
        return None
    if sample.ready is not None and any(r not in sample.values for r in sample.ready):
        return None
    if len(sample.values) < rule.peers + 1:
        return None
    worst = max(sorted(sample.values), key=lambda r: sample.values[r])
    others = statistics.median(v for r, v in sample.values.items() if r != worst)
    return worst, (sample.values[worst] / others if others > 0 else float("inf"))


def judge(samples: list[Sample], zero: float, rule: Rule) -> Verdict:
    """Named (ok), already, not_named or unknown, over the samples up to the deadline."""
    deadline = zero + rule.budget
    judged = sorted((s for s in samples if zero + rule.blind <= s.at <= deadline), key=lambda s: s.at)
    before = [s for s in samples if s.at < zero]
    if not judged:
        return unknown(f"no sample between {rule.blind:g} s and {rule.budget:g} s after the fault",
                       outcome="unknown", straggler=None)
    unseen = 0
    streak: tuple[str, float, list[float]] | None = None  # replica, since, its ratios
    best: tuple[str, float] | None = None
    for s in judged:
        found = slowest(s, rule)
        if found is None:
            unseen += 1
            streak = None
            continue
        replica, ratio = found
        if best is None or ratio > best[1]:
            best = found
        if ratio < rule.ratio:
            streak = None
            continue
        if streak is None or streak[0] != replica:
            streak = (replica, s.at, [])
        streak[2].append(ratio)
        if s.at - streak[1] >= rule.hold:
            return _named(streak[0], streak[1], s.at, streak[2], before, zero, rule)
    if unseen:
        return unknown(f"no replica slow for {rule.hold:g} s by {rule.budget:g} s, and {unseen} of {len(judged)} "
                       "samples unseen (a Ready replica silent, a failed query, or too few replicas)",
                       outcome="unknown", straggler=None, unseen=unseen)
    said = f"; the slowest, {best[0]}, at {best[1]:.2f} times its peers' median" if best else ""
    return failed(f"no replica at {rule.ratio:g} times its peers' inter-token latency for {rule.hold:g} s within "
                  f"{rule.budget:g} s{said}", outcome="not_named", straggler=None,
                  slowest=None if best is None else {"replica": best[0], "ratio": round(best[1], 3)})


def _named(replica: str, since: float, at: float, ratios: list[float], before: list[Sample], zero: float,
           rule: Rule) -> Verdict:
    ratio = round(statistics.median(ratios), 3)
    details = {"straggler": replica, "ratio": ratio, "slow_since_seconds": round(since - zero, 3),
               "named_after_seconds": round(at - zero, 3), "budget_seconds": rule.budget}
    last = max(before, key=lambda s: s.at, default=None)
    earlier = slowest(last, rule) if last is not None else None
    if earlier is not None and earlier[0] == replica and earlier[1] >= rule.ratio:
        return failed(f"{replica} was already {earlier[1]:.2f} times its peers' inter-token latency before the "
                      "fault: not the fault's", outcome="already", **details)
    return passed(f"{replica} named {at - zero:.1f} s after the fault: {ratio:.2f} times its peers' inter-token "
                  f"latency for {at - since:.0f} s", outcome="named", **details)
