"""Regenerate docs/reliability.md from the reliability and security suite's own runs: it runs
those tests (they start their own testbeds) with KILOCARD_FIGURES set, so each writes what it
measured, and turns the figures into one page.

    .venv/bin/python bench/reliability.py [--out docs/reliability.md] [--seed 20261201] [--keep DIR]
    .venv/bin/python bench/reliability.py --render DIR      # the page again from a kept run's figures

R1 runner death (tests/testbed/test_runner_death.py), R2 bad input (tests/unit/test_fuzz_inputs.py,
tests/testbed/test_fuzz.py), R3 blast radius (tests/unit/test_guard_properties.py), R4 control-
plane faults (tests/testbed/test_control_plane_faults.py), R5 security (tests/testbed/test_rbac.py,
tests/testbed/test_secrets.py, tests/unit/test_no_shell.py, tests/netns/test_agent_network.py).
The page says which tests passed; a failing one is named there, not hidden. Not a test.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = ("tests/unit/test_fuzz_inputs.py", "tests/unit/test_guard_properties.py", "tests/unit/test_no_shell.py",
         "tests/testbed/test_fuzz.py", "tests/testbed/test_runner_death.py",
         "tests/testbed/test_control_plane_faults.py", "tests/testbed/test_rbac.py", "tests/testbed/test_secrets.py",
         "tests/netns/test_agent_network.py")


def rows(figures: Path, name: str) -> list[dict[str, Any]]:
    path = figures / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def run_suite(figures: Path, seed: int) -> None:
    """Run the suite; its figures, its JUnit XML and its wall time land in `figures`."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", *SUITE, "-q", "-p", "no:cacheprovider",
                    f"--junitxml={figures / 'junit.xml'}"], cwd=ROOT, check=False,
                   env={**os.environ, "KILOCARD_FIGURES": str(figures), "KILOCARD_TRIAL_SEED": str(seed)})
    (figures / "seconds").write_text(f"{time.monotonic() - started:.1f}\n")


def outcomes_of(figures: Path) -> dict[str, str]:
    """Each test's outcome, from the run's JUnit XML."""
    from junitparser import JUnitXml

    outcomes = {}
    for suite in JUnitXml.fromfile(str(figures / "junit.xml")):
        for case in suite:
            outcomes[f"{case.classname}.{case.name}"] = "passed" if case.is_passed else (
                "skipped" if case.is_skipped else "failed")
    return outcomes


def table(header: list[str], lines: list[list[Any]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *["| " + " | ".join(str(c) for c in line) + " |" for line in lines], ""]


def runner_death(figures: Path) -> list[str]:
    trials = rows(figures, "runner-death")
    if not trials:
        return ["No figures: the runner-death trials did not run.", ""]
    by_point: dict[tuple[str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for t in trials:
        by_point[(_point(t["trial"]), t["cleaner"])].append(t)
    lines = []
    for (point, cleaner), group in sorted(by_point.items()):
        lines.append([point, cleaner, len(group), sum(t["killed"] for t in group),
                      sum(bool(t["left_by_the_kill"]) for t in group), sum(bool(t["residue"]) for t in group),
                      len({_kind(t["trial"]) for t in group})])
    kinds = sorted({_kind(t["trial"]) for t in trials})
    out = [f"{len(trials) // 2} seeded trials, each run twice: cleaned by TTL expiry alone (the agents' own "
           "TTLs and the in-cluster reaper), and separately by `kilocard recover --all` from another copy of the "
           f"code with no local ledger. Fault kinds: {len(kinds)} ({', '.join(kinds)}).", ""]
    out += table(["kill point", "cleaned by", "runs", "SIGKILLed", "left something to clean", "residue after",
                  "fault kinds"], lines)
    out.append("\"Left something to clean\": right after the kill the cluster differed from before the trial "
               "(a ledger marker at least); a kill before the first ledger write, or of a kind with nothing to "
               "revert (a pod kill), leaves nothing. A failpoint trial also checks that the ledger stopped where "
               "the failpoint sits.")
    out.append("")
    residue = [t for t in trials if t["residue"]]
    out.append(f"Residue found after cleaning: {len(residue)} of {len(trials)} runs"
               + (": " + "; ".join(f"{t['trial']} ({t['cleaner']}): {', '.join(t['residue'])}" for t in residue)
                  if residue else " (compared field by field: taints, cordons, labels, annotations, allocatable "
                  "cards, agent faults, the qdisc and nft tables in the namespace, NetworkPolicies, "
                  "DeviceTaintRules, ledger markers, every workload's Ready replicas)."))
    return [*out, ""]


def _kind(trial: str) -> str:
    return trial.split("-", 1)[1].removesuffix("-" + _point(trial))


def _point(trial: str) -> str:
    for point in ("fault-recorded", "fault-applied", "fault-reverted", "random"):
        if trial.endswith(point):
            return point
    return "?"


def bad_input(figures: Path) -> list[str]:
    files, cluster = rows(figures, "fuzz-files"), rows(figures, "fuzz-cluster")
    fields = collections.Counter(r["field"] for r in files)
    out = [f"Generated malformed experiments checked by `kilocard validate`'s loader: {len(files)} "
           f"(hypothesis), {len(fields)} distinct fields broken; every one refused with its file and field.", ""]
    out += table(["field broken", "inputs"], [[f, n] for f, n in fields.most_common(12)])
    for c in cluster:
        out.append(f"Through one `kilocard run` on the testbed: {c['inputs']} inputs (including ones only the "
                   f"cluster can refuse), {c['exit_2']} said `invalid (exit 2)`, API writes by kilocard in the audit "
                   f"log: {c['api_writes']} ({c['seconds']} s).")
    return [*out, ""]


def blast_radius(figures: Path) -> list[str]:
    cases = rows(figures, "guard-properties")
    refused = collections.Counter(name for c in cases for name in c["refused"])
    out = [f"Random fleets and fault plans: {len(cases)}; the guard refused {sum(bool(c['refused']) for c in cases)} "
           f"and let {sum(not c['refused'] for c in cases)} through, each time exactly as an independent recount of "
           "the limits said (a disagreement fails the test and hypothesis keeps the shrunk case).", ""]
    return [*out, *table(["limit that refused", "plans"], sorted(refused.items())), ""]


def control_plane(figures: Path) -> list[str]:
    runs = rows(figures, "control-plane")
    lines = []
    for r in runs:
        retried = ", ".join(f"{k}: {v}" for k, v in sorted(r["retries"].items())) or "none"
        neighbour = (f"{r['neighbour_refused']} of {r['neighbour_refused'] + r['neighbour_answered']}"
                     if "neighbour_refused" in r else "")
        waited = r.get("probe_waited_seconds", r.get("revert_waited_seconds", ""))
        lines.append([r["fault"], r["exit"], retried, f"{r['reverted']} of {r['faults']}", waited, neighbour,
                      r.get("probe", "")])
    reverted = sum(r["reverted"] for r in runs)
    total = sum(r["faults"] for r in runs)
    return [*table(["fault during the run", "exit", "runner's API requests retried (by cause)", "faults reverted",
                    "waited (s)", "a neighbour's requests refused (429)", "SLO probe"], lines),
            f"Faults reverted over all these runs: {reverted} of {total}. \"Waited\": how long the probe that met "
            "the apiserver or etcd outage took to get its answer, or how long the revert waited for the killed "
            "agent. The retry counts are the runner's own (urllib3's immediate reconnects are not seen); the "
            "agent's calls are not API requests and are not counted.", ""]


def security(outcomes: dict[str, str]) -> list[str]:
    def count(part: str) -> tuple[int, int]:
        mine = [v for k, v in outcomes.items() if part in k]
        return sum(v == "passed" for v in mine), len(mine)

    out = []
    for label, part in (("RBAC with ServiceAccount tokens (allowed and refused calls)", "test_rbac"),
                        ("secret canaries searched for in every artifact", "test_secrets"),
                        ("no subprocess call with a shell string", "test_no_shell"),
                        ("the agent with real packets: refusals, argument lists", "test_agent_network")):
        passed, total = count(part)
        out.append(f"- {label}: {passed} of {total} tests passed")
    return [*out, ""]


def page(figures: Path, outcomes: dict[str, str], seconds: float, seed: int) -> str:
    failed = sorted(k for k, v in outcomes.items() if v == "failed")
    lines = [
        "# Reliability and security: what was measured",
        "",
        f"Regenerated by `.venv/bin/python bench/reliability.py --seed {seed}` on {time.strftime('%Y-%m-%d')}, "
        f"{platform.node()} ({os.cpu_count()} cores, {platform.system()} {platform.release()}, Python "
        f"{platform.python_version()}): {len(outcomes)} tests, {sum(v == 'passed' for v in outcomes.values())} "
        f"passed, in {seconds / 60:.1f} min." + (f" Failed: {', '.join(failed)}." if failed else ""),
        "",
        "## R1: the runner SIGKILLed (tests/testbed/test_runner_death.py)", "", *runner_death(figures),
        "## R2: bad input", "", *bad_input(figures),
        "## R3: blast radius (tests/unit/test_guard_properties.py)", "", *blast_radius(figures),
        "## R4: the control plane fails under a run (tests/testbed/test_control_plane_faults.py)", "",
        *control_plane(figures),
        "## R5: least privilege and secrets", "", *security(outcomes),
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "reliability.md")
    parser.add_argument("--seed", type=int, default=20261201, help="the runner-death trials' seed")
    parser.add_argument("--keep", type=Path, help="keep the raw figures (JSON lines, JUnit XML) here")
    parser.add_argument("--render", type=Path, metavar="DIR", help="only write the page, from a kept run's figures")
    args = parser.parse_args()
    figures = args.render or args.keep or Path(tempfile.mkdtemp(prefix="kilocard-reliability-"))
    if args.render is None:
        figures.mkdir(parents=True, exist_ok=True)
        run_suite(figures, args.seed)
    seconds = float((figures / "seconds").read_text())
    args.out.write_text(page(figures, outcomes_of(figures), seconds, args.seed))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
