"""JUnit XML of runs: one testsuite per run, one testcase per probe (hypothesis checks before and
after the method, and method probes) and one for the run's verdict. A failure's message is the
probe's reason; its text adds the fix hint. Invalid input is an error, not a failure. A failure
the experiment declares as its finding (`expect`), and met, is no failure: its probe is skipped as
an expected failure (as pytest reports an xfail), the finding in its message, and the verdict
passes; so the JUnit of a green run or game day has no failure, and a red one exactly its own.
A game day's JUnit has every step of its plan, in order: a step that never ran is skipped, with
the reason (a game day that fails at step 1 still lists the 26 steps after it)."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from typing import Any

from chaos.report import hints
from chaos.report.journal import Run

PHASE_NAMES = {"before": "steady state before", "method": "method", "after": "steady state after"}


def _suite(run: Run) -> ET.Element:
    suite = ET.Element("testsuite", name=run.scenario, timestamp=_iso(run.when), time=f"{run.duration or 0:.3f}")
    properties = ET.SubElement(suite, "properties")
    for name, value in (("run_id", run.run_id), ("exit_code", str(run.exit_code)), ("verdict", run.verdict),
                        ("experiment_file", run.experiment_file), ("cluster", run.cluster)):
        ET.SubElement(properties, "property", name=name, value=value)
    failures = errors = skipped = 0
    expected = run.exit_code == 0 and bool(run.expected) and (run.expected or {}).get("exit") != 0
    for check in run.checks:
        case = ET.SubElement(suite, "testcase", classname=run.scenario, name=f"{PHASE_NAMES[check.phase]}: "
                             f"{check.name}", time=f"{check.seconds:.3f}")
        if not check.ok:
            found = hints.hint(check, run)
            text = check.reason + (f"\n\nfix: {found}" if found else "")
            if expected:
                skipped += 1
                ET.SubElement(case, "skipped", message=f"expected failure: {check.reason}", type="xfail").text = text
            else:
                failures += 1
                ET.SubElement(case, "failure", message=check.reason, type=check.func or "probe").text = text
    verdict = ET.SubElement(suite, "testcase", classname=run.scenario, name="verdict", time=f"{run.duration or 0:.3f}")
    said = [run.reason] if expected else []
    said += [f"{row[0]}: recorded {row[1]}, observed {row[2]}: {row[3]}" + (f" ({row[4]})" if row[4] else "")
             for row in run.symptom_rows]  # a replay: each symptom of the incident, recorded against observed
    if said:
        ET.SubElement(verdict, "system-out").text = "\n".join(said)
    if run.exit_code == 2:
        errors += 1
        ET.SubElement(verdict, "error", message=run.reason, type="invalid input").text = run.reason
    elif run.exit_code != 0:
        failures += 1
        ET.SubElement(verdict, "failure", message=run.reason, type=f"exit {run.exit_code}").text = run.reason
    suite.set("tests", str(len(run.checks) + 1))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    return suite


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))


def _step(step: dict[str, Any]) -> ET.Element:
    """A game day's step that is not a run of its own: a pause or an approval as a passed case, a
    step that never started (or was stopped) as skipped, with the reason; so every step of the
    plan is in the report, in its order, whatever happened at step 1."""
    name = f"{step.get('id', '?')}: {step.get('name') or step.get('describe') or step.get('kind', '')}"
    status = step.get("status")
    case = ET.Element("testcase", classname=name, name=str(step.get("describe") or step.get("kind")))
    reason = f"{status or 'not run'}: {step.get('reason') or ''}".rstrip(": ")
    if status == "ran":  # an experiment that ran, and whose journal is not among the runs
        message = f"{reason} (its journal {step.get('journal') or ''} was not read)"
        ET.SubElement(case, "error", message=message, type="no journal").text = message
    elif status not in _PASSED_STEPS:
        ET.SubElement(case, "skipped", message=reason).text = reason
    suite = ET.Element("testsuite", name=name, tests="1", failures="0", errors=str(int(status == "ran")),
                       skipped=str(int(status not in (*_PASSED_STEPS, "ran"))))
    suite.append(case)
    return suite


_PASSED_STEPS = ("paused", "approved")


def render(runs: list[Run], day: dict[str, Any] | None = None) -> str:
    """One testsuite per run; with a game day's `day` (its gameday.json), one per step in the
    plan's order: a run's own suite where the step ran, a suite of its own where it did not."""
    root = ET.Element("testsuites", name="kilocard" if day is None else f"kilocard game day: {day.get('title', '')}")
    by_id = {r.run_id: r for r in runs}
    steps = (day or {}).get("steps") or []
    suites = [_suite(r) for r in runs] if day is None else [
        _suite(by_id[step["run_id"]]) if step.get("run_id") in by_id else _step(step) for step in steps]
    root.extend(suites)
    for attribute in ("tests", "failures", "errors", "skipped"):
        root.set(attribute, str(sum(int(s.get(attribute, "0")) for s in suites)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
