"""What the clients saw: the requests the experiment's own load (chaos.load) sent, each answered in
full or failed (an HTTP error, a reset, a timeout, a stream cut short), judged by when it was sent.
Server-side counters miss what a client meets between them and the replicas (a router that is
down or hung, a stream aborted halfway); the client's own record does not.

The verdict (`judge`, pure): from time zero, the failed requests make one error window (from the
first failed request sent to the last); it must end within `budget` s of time zero (and last no
more than `max_window` s, where given), and every request sent after it, for at least `hold` s,
must be answered in full. Too few requests sent in that hold, or some still in flight, is silence:
unknown, never "recovered".

The thin fetcher (probes.chaostoolkit.client_errors_within) reads the load running in the
runner's process, and waits for the interval's end and the requests still in flight in it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from chaos.vocabulary import LAST_DISRUPTION
from probes.verdict import Contract, Verdict, failed, passed, unknown

CONTRACTS = (
    Contract(
        "client_errors_within", "probe",
        asserts="the requests the experiment's own load sent from time zero failed (an HTTP error, a reset, a "
                "timeout, a stream cut short) only inside one error window, from the first failed request sent to "
                "the last, that ended within `budget` s of time zero (and lasted at most `max_window` s, where "
                "given; a `budget` of 0 allows no failure); every request sent after it until `budget` + `hold` s "
                "was answered in full",
        time_zero=f"`fault_at` if given, else {LAST_DISRUPTION}",
        interval="every request sent from time zero to time zero plus `budget` + `hold`: the probe waits for that "
                 "end and for the requests sent in it to finish (each within the load's timeout)",
        missing="fewer than `min_requests` requests sent after the error window (or after time zero, with no "
                "failure), or a request sent in the interval still in flight when the probe gives up waiting, is "
                "unknown, never 'recovered': a client that sent nothing saw nothing; no load running in the "
                "runner's process is an error (the experiment has no `kilocard` load)",
        exceptions="no built-in load in the runner's process: error (the probe raises)",
        outcomes=(("clean", "ok: no request sent in the interval failed"),
                  ("recovered", "ok: the window, when it began and ended, its failures by kind and how many were "
                                "streams cut short"),
                  ("not_recovered", "failed: a request sent after `budget` s failed; the last, and the kinds"),
                  ("window_too_long", "failed: the window lasted over `max_window` s"),
                  ("unknown", "too few requests after the window, or some still in flight")),
        judge=("probes.client_errors.judge", "chaos.timezero.choose")),
)


@dataclass(frozen=True)
class Request:
    sent: float  # epoch seconds
    error: str | None = None  # None: answered in full
    aborted: bool = False  # its stream had begun (a first token came) when it failed


@dataclass(frozen=True)
class Rule:
    budget: float  # seconds from time zero by which the error window must have ended
    hold: float = 10.0  # then every request answered, for this long
    max_window: float | None = None  # the window's longest allowed span (None: any)
    min_requests: int = 5  # requests sent after the window, at least


def judge(requests: list[Request], zero: float, rule: Rule, in_flight: tuple[float, ...] = ()) -> Verdict:
    """clean, recovered (ok), not_recovered, window_too_long or unknown, over the requests sent from
    `zero` to `zero` + budget + hold; `in_flight`: when the requests still unanswered were sent."""
    end = zero + rule.budget + rule.hold
    sent = sorted((r for r in requests if zero <= r.sent <= end), key=lambda r: r.sent)
    errors = [r for r in sent if r.error]
    kinds = dict(sorted(Counter(r.error for r in errors if r.error).items()))
    details = {"requests": len(sent), "failed": len(errors), "errors": kinds,
               "aborted_streams": sum(1 for r in errors if r.aborted)}
    late = [r for r in errors if r.sent > zero + rule.budget]
    if late:
        return failed(f"requests still failed {late[-1].sent - zero:.1f} s after time zero (budget {rule.budget:g} "
                      f"s): {len(late)} sent after the budget failed ({_kinds(late)})", outcome="not_recovered",
                      last_failure_seconds=round(late[-1].sent - zero, 3), **details)
    if errors and rule.max_window is not None and errors[-1].sent - errors[0].sent > rule.max_window:
        first = errors[0].sent
        return failed(f"the clients' error window lasted {errors[-1].sent - first:.1f} s (at most "
                      f"{rule.max_window:g} s), from {first - zero:.1f} s after time zero: {len(errors)} failed "
                      f"({_kinds(errors)})", outcome="window_too_long", **_window(errors, zero), **details)
    pending = [t for t in in_flight if zero <= t <= end]
    if pending:
        return unknown(f"{len(pending)} requests sent in the interval still in flight: their outcome is not known",
                       in_flight=len(pending), **details)
    after = [r for r in sent if not errors or r.sent > errors[-1].sent]
    if len(after) < rule.min_requests:
        since = "after the error window" if errors else "after time zero"
        return unknown(f"only {len(after)} requests sent {since} (at least {rule.min_requests} needed): a client "
                       "that sent nothing saw nothing", **details)
    if not errors:
        return passed(f"none of the {len(sent)} requests sent from time zero to {rule.budget + rule.hold:g} s after "
                      "it failed", outcome="clean", **details)
    window = _window(errors, zero)
    return passed(f"the clients' error window: {len(errors)} failed ({_kinds(errors)}) from "
                  f"{window['window_start_seconds']:g} to {window['window_end_seconds']:g} s after time zero, then "
                  f"{len(after)} answered in full", outcome="recovered", **window, **details)


def _window(errors: list[Request], zero: float) -> dict[str, float]:
    """When the failed requests (in the order sent) began and ended, from time zero, and how long."""
    first, last = errors[0].sent, errors[-1].sent
    return {"window_start_seconds": round(first - zero, 3), "window_end_seconds": round(last - zero, 3),
            "window_seconds": round(last - first, 3)}


def _kinds(errors: list[Request]) -> str:
    counted = Counter(r.error for r in errors)
    aborted = sum(1 for r in errors if r.aborted)
    said = ", ".join(f"{n} {kind}" for kind, n in sorted(counted.items()))
    return said + (f"; {aborted} streams cut short" if aborted else "")
