"""A run's verdict, from its journal: the pure functions that judge what chaoslib recorded
(`verdict`, `passes`, `why`, `unseen`), the failure an experiment may declare it expects and how
it is weighed (`Expectation`, `judged`), the shape of the journal's `kilocard` section
(`KilocardSection`), the key a fired stop condition leaves in it, and a replay's judged symptoms.

The runner (chaos.run) writes journals with it; the report and the live view read them with it.
It imports no cluster code: reading a journal needs no Kubernetes client.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypedDict

from chaoslib.hypothesis import within_tolerance

from chaos.agent.protocol import CONFIRMED
from chaos.errors import Exit
from probes import verdict as verdict_of
from probes.verdict import Contract

STOP_KEY = "kilocard_stop"  # where a fired stop condition (chaos.stop) leaves its reason in the journal
GUARD_KEY = "kilocard_guard"  # where the guards' control (chaos.guards) leaves what it refused mid-run
PROBES_MODULE = "probes.chaostoolkit"
REPLAY_JUDGE = "incident_symptoms"  # the probe function (probes.chaostoolkit) that judges a replay's symptoms
EXPECTABLE = (Exit.PASSED, Exit.FAILED, Exit.ABORTED)
# What a run's verdict rests on: a judgement of the cluster; a probe that could not look or a
# stop condition that fired blind (unknown); an activity that raised or overran (error).
JUDGED, UNKNOWN, ERROR = "judged", "unknown", "error"
STEADY_NOT_MET = "steady state not met before the method"


class Judgement(NamedTuple):
    exit: Exit
    reason: str
    basis: str = JUDGED


class Refused(TypedDict):
    """The `kilocard` section of a run that never started (invalid input, exit 2; a cluster that
    refused it, exit 1): its verdict alone."""

    exit_code: int
    verdict: str
    reason: str
    experiment_file: str


class KilocardSection(Refused):
    """The `kilocard` section of a run's journal, as chaos.run.execute writes it. Seconds are
    epoch seconds unless named otherwise; `recovery` counts from the run's first fault."""

    run_id: str
    basis: str  # what the verdict rests on: JUDGED, UNKNOWN or ERROR
    expected: dict[str, Any] | None  # Expectation.to_json
    experiment_sha256: str
    kilocard_version: str
    finished_at: float
    cluster: dict[str, str]  # chaos.kube.Kube.target
    plan: dict[str, Any]  # each fault's targets and the blast radius (chaos.run.check)
    release: dict[str, Any]  # per model, what its PodDisruptionBudget and controller allowed
    faults: list[dict[str, Any]]  # the ledger's records, each with its transitions
    landed: dict[str, Any]  # the faults' effects read back (chaos.landed.summary)
    reverted: list[dict[str, Any]]
    left: list[dict[str, Any]]  # faults still in place: the run exits 4
    recovery: list[dict[str, Any]]  # per replica: deleted, gone, created, scheduled, started, ready
    placement: dict[str, Any]
    load: dict[str, Any] | None  # the experiment's own traffic (chaos.load), as its client saw it
    runner_seconds: dict[str, float]  # the runner's own time per phase
    snapshots: dict[str, Any]  # where the run's snapshots came from
    api_retries: dict[str, int]  # the run's retries by cause
    parsed: dict[str, int]  # by where each fault is: how often this process parsed it (once: chaos.plan)
    grafana: dict[str, Any] | None  # the annotations sent to Grafana and those that failed (chaos.grafana)
    settle: dict[str, Any]  # the steady state looked at before the method while the fleet started (chaos.settle)
    events: dict[str, Any]  # the Events recorded on the faults' targets and those that failed (chaos.fault_events)


def refused(path: Path, code: Exit, reason: str) -> Refused:
    return Refused(exit_code=int(code), verdict=code.name.lower(), reason=reason, experiment_file=str(path))


CONTRACTS = (
    Contract("the run's verdict", "runner",
             asserts="passed (exit 0) only when the steady state was met before the method and after it, no "
                     "activity raised or overran its timeout, every method probe is within its tolerance and "
                     "every kilocard probe's verdict is ok (tolerance or not), the run completed, and some probe saw "
                     "an effect of every fault whose landing is not confirmed; an incomplete revert is exit 4 "
                     "whatever else",
             time_zero="the run's start", interval="the whole journal: steady states, method, rollbacks, the ledger",
             missing="a probe that could not look (unknown) fails the run, its verdict resting on unknown; a fault "
                     "not confirmed landed whose effect no probe saw fails it the same way",
             exceptions="an activity that raised fails the run as `raised` (a probe) or `failed` (an action), its "
                        "verdict resting on error; a stop condition or signal aborts it (exit 3)",
             outcomes=(("passed", "exit 0"), ("failed", "exit 1, resting on judged, unknown or error"),
                       ("aborted", "exit 3"), ("revert incomplete", "exit 4")),
             judge=("chaos.judgement.verdict", "chaos.judgement.passes", "chaos.judgement._kilocard_failed",
                    "chaos.judgement._basis", "chaos.judgement._probe_failures", "chaos.judgement.unseen")),
    Contract("expect", "expectation",
             asserts="an experiment that declares the failure it finds (`expect: {exit, reason}`) exits 0 when the "
                     "run ends with that exit and a reason starting with that text, judged; else exit 1",
             time_zero="the run's end", interval="the run's verdict",
             missing="a verdict resting on unknown (a probe that could not look, a stop that fired blind) never "
                     "meets it",
             exceptions="a verdict resting on error (a probe that raised) never meets it; invalid input and an "
                        "incomplete revert keep their exit codes",
             outcomes=(("met", "exit 0, 'as expected'"), ("not met", "exit 1, 'expected ..., got ...'")),
             judge=("chaos.judgement.Expectation.met", "chaos.judgement.judged")),
)


@dataclass(frozen=True)
class Expectation:
    exit: Exit
    reason: str = ""  # how the verdict's reason starts

    def met(self, code: Exit, reason: str, basis: str = JUDGED) -> bool:
        """The expected failure is the fault's effect, judged: a probe that raised or could not
        look, or a stop condition that fired blind, never meets it (even where the reason starts
        the same)."""
        return code == self.exit and reason.startswith(self.reason) and basis == JUDGED

    def to_json(self) -> dict[str, Any]:
        return {"exit": int(self.exit), "reason": self.reason}


def judged(expect: Expectation | None, code: Exit, reason: str, basis: str = JUDGED) -> tuple[Exit, str]:
    """The run's exit and reason, once its declared expectation (if any) is weighed."""
    if expect is None or code in (Exit.INVALID, Exit.REVERT_INCOMPLETE):
        return code, reason
    if expect.met(code, reason, basis):
        return Exit.PASSED, f"as expected ({code.name.lower()}): {reason}"
    wanted = f"{expect.exit.name.lower()}" + (f" with {expect.reason!r}" if expect.reason else "")
    return Exit.FAILED, f"expected {wanted}, got {code.name.lower()}: {reason}"


def verdict(journal: dict[str, Any]) -> Judgement:
    """Pure: the strict verdict of a chaoslib journal (before the ledger's revert is counted)."""
    status = journal.get("status")
    if status == "interrupted":
        fired = journal.get(STOP_KEY)
        if fired:
            return Judgement(Exit.ABORTED, f"stop condition fired: {fired['reason']}",
                             UNKNOWN if fired.get("blind") else JUDGED)
        if journal.get(GUARD_KEY):  # the plan, not the system, was judged: it tells nothing of resilience
            return Judgement(Exit.ABORTED, f"refused mid-run by a guard: {journal[GUARD_KEY]}", UNKNOWN)
        return Judgement(Exit.ABORTED, "interrupted (a signal or a control stopped the run)", ERROR)
    before = (journal.get("steady_states") or {}).get("before")
    if before is not None and before.get("steady_state_met") is False:
        said, basis = _probe_failures(before)
        return Judgement(Exit.FAILED, f"{STEADY_NOT_MET}: {said}", basis)
    for run in journal.get("run") or []:
        activity = run.get("activity") or {}
        name, kind, timeout = activity.get("name", "?"), activity.get("type", "activity"), activity.get("timeout")
        if run.get("status") == "failed":
            return Judgement(Exit.FAILED, f"{kind} {name!r} {'raised' if kind == 'probe' else 'failed'}: "
                                          f"{_reason(run)}", ERROR)
        # chaoslib ignores a method probe's tolerance, and its output if it has none; here a
        # probe out of its tolerance, or a kilocard verdict that did not pass, fails the run.
        if not passes(run):
            return Judgement(Exit.FAILED, f"probe {name!r} failed: {_reason(run)}", _basis(run))
        if timeout and run.get("duration") is not None and run["duration"] > timeout:
            return Judgement(Exit.FAILED, f"activity {name!r} ran {run['duration']:.1f} s, over its {timeout} s "
                                          "timeout", ERROR)
    if status != "completed":
        return Judgement(Exit.FAILED, f"run {status}", ERROR)
    if journal.get("deviated"):
        said, basis = _probe_failures((journal.get("steady_states") or {}).get("after") or {})
        return Judgement(Exit.FAILED, f"steady state deviated after the method: {said}", basis)
    if (journal.get("steady_states") or {}).get("after") is None and before is None:
        probes = [r for r in journal.get("run") or [] if (r.get("activity") or {}).get("type") == "probe"]
        if probes:  # they judged, and what they said is the verdict's reason (a replay's "reproduced: ...")
            return Judgement(Exit.PASSED, "the method's probes passed: " + "; ".join(
                f"{(r.get('activity') or {}).get('name', '?')}: {why(r) or 'within tolerance'}" for r in probes))
        return Judgement(Exit.PASSED, "method ran; no steady-state hypothesis to check")
    return Judgement(Exit.PASSED, "steady state met before and after the method")


def passes(run: dict[str, Any]) -> bool:
    """Pure: a method run entry as the strict runner accepts it: within its activity's tolerance
    (none: within), and a kilocard verdict that passed, tolerance or not."""
    if _kilocard_failed(run):
        return False
    tolerance = (run.get("activity") or {}).get("tolerance")
    if tolerance is None:
        return True
    try:
        return bool(within_tolerance(tolerance, run.get("output")))
    except Exception:  # noqa: BLE001 - chaoslib raises on a target the output lacks: not within it
        return False


def _kilocard_failed(run: dict[str, Any]) -> bool:
    """A kilocard probe's verdict that did not pass: known by its provider, or by its JSON
    (`verdict` and `judgement`, as probes.verdict writes them)."""
    output = run.get("output")
    if not isinstance(output, dict) or output.get("verdict") != "failed":
        return False
    return ((run.get("activity") or {}).get("provider") or {}).get("module") == PROBES_MODULE or "judgement" in output


def _basis(run: dict[str, Any]) -> str:
    """What a failing probe entry rests on: raised, could not look, or judged."""
    if run.get("status") == "failed":  # chaoslib's word for an activity that raised
        return ERROR
    output = run.get("output")
    unknown = _kilocard_failed(run) and verdict_of.UNKNOWN in (output.get("judgement"), output.get("outcome"))
    return UNKNOWN if unknown else JUDGED


def _probe_failures(state: dict[str, Any]) -> tuple[str, str]:
    """The steady state's failing probes, and what the first rests on."""
    failed = [p for p in state.get("probes") or [] if not p.get("tolerance_met")]
    said = "; ".join(f"{(p.get('activity') or {}).get('name', '?')}: {_reason(p)}" for p in failed) or "?"
    return said, _basis(failed[0]) if failed else ERROR


def unseen(landed: list[dict[str, Any] | None], journal: dict[str, Any]) -> str | None:
    """Pure: why a run cannot pass although its verdict did: some fault's landing is not
    confirmed (no read-back, or one that could not tell) and no probe of the method saw an
    effect (`impact_seen`): nothing shows the faults happened. None when something does."""
    unconfirmed = [found or {} for found in landed if (found or {}).get("status") != CONFIRMED]
    if not unconfirmed:
        return None
    if any(isinstance(r.get("output"), dict) and r["output"].get("impact_seen") for r in journal.get("run") or []):
        return None
    first = unconfirmed[0]
    return (f"{len(unconfirmed)} of {len(landed)} fault(s) not confirmed landed ({first.get('status', 'no read-back')}"
            f": {first.get('evidence', 'none recorded')}), and no probe saw an effect: nothing shows the faults "
            "happened (add a probe that needs the impact, e.g. expect_impact: true)")


def why(run: dict[str, Any]) -> str:
    """Why, in a line, from a run entry: a kilocard verdict's reason, else the exception's last
    line; "" when it says neither."""
    output = run.get("output")
    if isinstance(output, dict) and output.get("reason"):
        return str(output["reason"])
    exception = run.get("exception") or []
    lines = [line.strip() for line in (exception if isinstance(exception, list) else [exception]) if line.strip()]
    return lines[-1] if lines else ""


def _reason(run: dict[str, Any]) -> str:
    """What a run entry says went wrong (`why`), else that it raised, else its output."""
    if run.get("exception"):
        return why(run) or "exception"
    return why(run) or f"output {json.dumps(run.get('output'), default=str)[:200]}"


def replay_symptoms(runs: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """A replay's verdict on its symptoms (the REPLAY_JUDGE probe's output) among a journal's
    method entries; None when nothing judged them."""
    return next((dict(r["output"]) for r in runs if ((r.get("activity") or {}).get("provider") or {}).get("func")
                 == REPLAY_JUDGE and isinstance(r.get("output"), dict)), None)
