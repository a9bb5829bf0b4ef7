"""Is the model's traffic spread over its replicas again? After a router fails over, restarts or
thaws, or a replica comes back, the replicas should share the requests again; a router whose
discovery went stale, a circuit left open or a replica nobody routes to shows as one replica that
serves (almost) nothing while it looks Ready. Averaging over the model hides exactly that, so
each replica's share is judged on its own.

The verdict (`judge`, pure): at each sample, each replica's requests finished over the trailing
`share_window` s (its engine's counter: vLLM's `vllm:request_success_total`, SGLang's
`sglang:num_requests_total`), against an even share (the model's finished requests in the window
over the replicas counted). A sample is even when every replica Ready through the window has at
least `min_share` of an even share, and the model served something. The traffic may be uneven
only before `budget` s after time zero; from then on every sample must be even, for `hold` s.

The thin fetcher (probes.chaostoolkit.traffic_spread_within) reads the counter per replica over
the interval (a range query), with the replicas that must show a series at each sample from the
run's follower (a Ready replica without a series is silence, never an even share).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chaos.vocabulary import LAST_DISRUPTION
from probes.verdict import Contract, Verdict, failed, passed, unknown

CONTRACTS = (
    Contract(
        "traffic_spread_within", "probe",
        asserts="the model's traffic is spread over its replicas again within `budget` s of time zero and stays "
                "spread for `hold` s: at every sample from then on, each replica Ready through the trailing "
                "`share_window` s finished at least `min_share` of an even share of the model's requests in it, each "
                "replica judged on its own",
        time_zero=f"`fault_at` if given, else {LAST_DISRUPTION}",
        interval="every sample from time zero to time zero plus `budget` plus `hold`, each counting the "
                 "`share_window` s before it; the probe waits for the interval's end and a scrape, and a probe "
                 "reached later judges Prometheus's record of it",
        missing="a sample where a replica whose group had been whole and Ready for three scrapes (the run's "
                "follower's record) has no series, at it or at its window's start, is unseen, as is one whose query "
                "failed, one with no series at all, one where no replica was Ready through the window (nobody to "
                "judge is not a spread), or one with no sample a window before it; an unseen sample past "
                "`budget`, and none uneven there, is unknown, never 'spread'. A counter first seen inside a window "
                "counts from 0; one that falls (a restart) counts from its new value. A window in which the "
                "replicas' counters show no request finished is uneven: silence is not a spread",
        exceptions="Prometheus not answering, bad PromQL, no counter of finished requests for the model: error (the "
                   "probe raises)",
        outcomes=(("spread", "ok: every sample past `budget` seen and even"),
                  ("not_spread", "failed: the first uneven sample past `budget`: the replica with the smallest share, "
                                 "its share of an even one and when (or that no replica served)"),
                  ("unknown", "nothing uneven past `budget` and some sample there unseen, or no sample past it")),
        judge=("probes.spread.judge", "probes.spread.shares", "chaos.timezero.choose")),
)


@dataclass(frozen=True)
class Sample:
    at: float  # epoch seconds
    finished: dict[str, float] = field(default_factory=dict)  # replica (its lead pod) -> counter value
    ready: frozenset[str] | None = None  # replicas that must show a series and get a share; None: not known
    error: str = ""  # a query failed here: nothing is known


@dataclass(frozen=True)
class Rule:
    budget: float  # seconds from time zero by which the traffic is spread again
    hold: float = 10.0  # seconds it stays spread after `budget`
    window: float = 10.0  # the trailing window each share is counted over
    min_share: float = 0.5  # of an even share


@dataclass(frozen=True)
class Shares:
    """One sample's judgement: each judged replica's share of an even share (never empty), or why
    the sample is unseen."""

    at: float
    share: dict[str, float] = field(default_factory=dict)
    served: float = 0.0  # requests the model finished in the window
    why_unseen: str = ""

    @property
    def lowest(self) -> tuple[str, float]:
        """The replica with the smallest share, by name among equals (a seen sample's)."""
        return min(sorted(self.share.items()), key=lambda kv: kv[1])

    def uneven(self, min_share: float) -> bool:
        return not self.why_unseen and (self.served <= 0 or self.lowest[1] < min_share)


def _rises(span: list[Sample]) -> dict[str, float]:
    """Each counter's increase over consecutive samples (as Prometheus's increase() takes a reset):
    a rise counts as it is, a fall is a restart that counts its new value, and a counter first seen
    after the span's first sample counts from 0."""
    rises: dict[str, float] = {}
    last: dict[str, float] = dict(span[0].finished)
    for s in span[1:]:
        for r, value in s.finished.items():
            before = last.get(r)
            rises[r] = rises.get(r, 0.0) + (value if before is None or value < before else value - before)
            last[r] = value
    return rises


def shares(samples: list[Sample], at: Sample, window: float) -> Shares:
    """The sample `at` (one of `samples`, in time order) judged over the `window` before it, from
    the latest sample at or before the window's start (none: nothing is known of its start)."""
    before = [s for s in samples if s.at <= at.at - window]
    start = max(before, key=lambda s: s.at) if before else None
    if start is None:
        return Shares(at.at, why_unseen="no sample a window before it")
    if at.error or start.error:
        return Shares(at.at, why_unseen=at.error or start.error)
    if not at.finished or not start.finished:
        return Shares(at.at, why_unseen="no series")
    judged = (at.ready & start.ready) if at.ready is not None and start.ready is not None else (
        frozenset(at.finished) & frozenset(start.finished))
    if not judged:  # replicas came and went: nobody to judge is not a spread
        return Shares(at.at, why_unseen="no replica Ready through the window")
    silent = sorted(r for r in judged if r not in at.finished or r not in start.finished)
    if silent:
        return Shares(at.at, why_unseen="silent: " + ", ".join(silent))
    rises = _rises([s for s in samples if start.at <= s.at <= at.at and not s.error])
    counted = judged | {r for r, v in rises.items() if v > 0}
    served = sum(rises.values())
    # Its share of an even one, rise / (served / n), multiplied first: a share on the bound is on it.
    # Every judged replica shows at `at`, the span's last sample, so it has a rise.
    return Shares(at.at, {r: (rises[r] * len(counted) / served if served else 0.0) for r in judged}, served)


def judge(samples: list[Sample], zero: float, rule: Rule) -> Verdict:
    """spread (ok), not_spread or unknown, over the samples from `zero` to `zero + budget + hold`
    (earlier ones give the first windows their start)."""
    ordered = sorted(samples, key=lambda s: s.at)
    end, due = zero + rule.budget + rule.hold, zero + rule.budget
    judged = [shares(ordered, s, rule.window) for s in ordered if zero <= s.at <= end]
    uneven = [j for j in judged if j.uneven(rule.min_share)]
    late = [j for j in uneven if j.at > due]
    if late:
        first = late[0]
        if first.served <= 0:
            why = (f"no replica finished a request in the {rule.window:g} s up to {first.at - zero:.0f} s after "
                   "time zero")
            return failed(f"traffic not spread {rule.budget:g} s after time zero: {why}", outcome="not_spread",
                          at_seconds=round(first.at - zero, 3), served=0.0)
        replica, share = first.lowest
        return failed(f"traffic not spread {rule.budget:g} s after time zero: {replica} finished {share:.0%} of an "
                      f"even share of the model's requests in the {rule.window:g} s up to {first.at - zero:.0f} s "
                      f"after time zero (at least {rule.min_share:.0%} wanted)", outcome="not_spread", replica=replica,
                      share=round(share, 4), at_seconds=round(first.at - zero, 3), served=round(first.served, 3))
    after = [j for j in judged if j.at > due]
    unseen = [j for j in after if j.why_unseen]
    if not after:
        return unknown(f"no sample judged between {rule.budget:g} s and {rule.budget + rule.hold:g} s after time zero")
    if unseen:
        first_unseen = unseen[0]
        return unknown(f"nothing uneven past {rule.budget:g} s, but {len(unseen)} of {len(after)} samples there "
                       f"unseen, the first {first_unseen.at - zero:.0f} s after time zero ({first_unseen.why_unseen})",
                       unseen=len(unseen), first_unseen={"at_seconds": round(first_unseen.at - zero, 3),
                                                         "why": first_unseen.why_unseen})
    last_uneven = max((j.at for j in uneven), default=None)
    lowest = min(j.lowest[1] for j in after)
    before = ("at every sample from time zero" if last_uneven is None else
              f"after {last_uneven - zero:.0f} s (its last uneven sample; budget {rule.budget:g} s)")
    return passed(f"traffic spread over the replicas {before}, and for {rule.hold:g} s past the budget; the smallest "
                  f"share {lowest:.0%} of an even one", outcome="spread",
                  uneven_until_seconds=None if last_uneven is None else round(last_uneven - zero, 3),
                  lowest_share=round(lowest, 4), replicas=max(len(j.share) for j in after))
