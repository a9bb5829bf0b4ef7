"""Time the scenario catalog (experiments/) through `kilocard run` on a fresh default testbed
(128 nodes, the default fleet on the `default` timing): first the whole catalog in one process,
as README's first command runs it (goal <= 10 minutes), with each experiment's verdict and time;
then each file through `kilocard run` and beside it plain `chaos run`, on the same testbed in the
same run (skip with --catalog-only). Per experiment it prints:
- wall time of the process, and chaoslib's own run time (the journal's duration);
- the runner's overhead: wall minus chaoslib's run time, i.e. start-up, validation, the plan and
  the guards against the cluster, the ledger revert, the journal (goal <= 1.5 s), broken down by
  the journal's runner_seconds (load, connect, plan_and_guards, release, follow, revert, ledger;
  the rest is the interpreter's start-up and imports), and the same for plain chaos run (which
  does none of that checking) with the ratio;
- kilocard's API writes (audit log, by its user agent) and apiserver requests per
  experiment-minute (apiserver_request_total for pods, nodes, configmaps and namespaces, all
  clients);
- how many faults each left applied when it ended (then reverted with `kilocard recover`).

    .venv/bin/python bench/catalog.py [--port-base 6443] [--settle 40] [--catalog-only] [--examples reports/examples]

With --examples, the whole catalog's reports are kept there, with a screenshot of S3's (headless
Chromium): its SLO plot, the fault window shaded, the breach and then the recovery.

On the default port base (6443) plain `chaos run` finds the testbed's Prometheus at the address
the experiments assume (its --var sets only keys an experiment declares); elsewhere its SLO
experiments fail their steady state. No other testbed may run there meanwhile.

Between experiments the fleet is let come back (every pod Ready) and settle. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chaos.kube import pod_ready
from testbed import audit, build, fleet, timing
from testbed.cluster import Testbed
from testbed.config import TestbedConfig

CATALOG = Path(__file__).parents[1] / "experiments"
RESOURCES = ("pods", "nodes", "configmaps", "namespaces")
VERBS = ("GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE")


def whole_fleet(tb: Testbed, expected: int) -> None:
    kube = tb.kube()
    try:
        kube.wait_until("pods", lambda pods: sum(pod_ready(p) for p in pods) >= expected
                        and not any(p.metadata.deletion_timestamp for p in pods), timeout=300,
                        namespace=fleet.DEFAULT_NAMESPACE)
    finally:
        kube.close()


def timed(argv: list[str], journal: Path, env: dict[str, str]) -> tuple[float, dict, int]:
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env={**os.environ, **env})
    wall = time.monotonic() - started
    if done.returncode not in (0, 3):
        print("  " + "\n  ".join((done.stdout + done.stderr).strip().splitlines()[-6:]))
    return wall, json.loads(journal.read_text()), done.returncode


def whole_catalog(tb: Testbed, state: Path, config: list[str]) -> None:
    """`kilocard run experiments/` once: its wall time, and per experiment the verdict and the
    time from the previous one's end (the journals' finished_at) to its own."""
    journals = state / "catalog"
    started = time.time()
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "run", str(CATALOG), "--kubeconfig",
                           str(tb.paths.kubeconfig), "--ledger-dir", str(state / "ledger-catalog"),
                           "--journal", str(journals), "--reports", str(state / "reports"), *config],
                          capture_output=True, text=True, timeout=1800)
    wall = time.time() - started
    print(f"kilocard run experiments/: exit {done.returncode}, {wall:.0f} s (goal <= 600 s)")
    for line in done.stdout.splitlines():  # the waits between experiments, as the run said them
        if line.startswith("settle: "):
            print(f"  {line}")
    previous = started
    for journal in sorted(journals.glob("*.json"), key=lambda j: json.loads(j.read_text())["kilocard"].get(
            "finished_at", 0)):
        k = json.loads(journal.read_text())["kilocard"]
        end = k.get("finished_at", previous)
        print(f"  {Path(k['experiment_file']).stem:<32} {k['verdict']:<9} exit {k['exit_code']}  "
              f"{end - previous:6.1f} s  {k['reason'].splitlines()[0][:90]}")
        previous = end
    print()


def examples(reports: Path, out: Path) -> None:
    """The S3 report's screenshot, and the trend page's, under `out`."""
    from chaos import report
    from chaos.report import browser

    (s3,) = [p.parent for p in reports.glob("*/journal.json") if report.load(p).scenario.startswith("s3-")]
    for page, png, height in ((s3 / "index.html", out / "s3-report.png", 2600),
                              (reports / "trend" / "index.html", out / "catalog-trend.png", 1400)):
        print(f"screenshot {browser.screenshot(page, png, height=height)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-base", type=int, default=6443)
    parser.add_argument("--settle", type=float, default=40.0, help="seconds to let the fleet settle between runs")
    parser.add_argument("--catalog-only", action="store_true", help="only the whole catalog in one process")
    parser.add_argument("--examples", type=Path, help="keep the catalog's reports here, with S3's screenshot")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped bench still takes its testbed down
    build.build(say=lambda _m: None)
    files = sorted(CATALOG.glob("*.yaml"))
    with tempfile.TemporaryDirectory(prefix="kilocard-bench-") as state:
        tb = Testbed(TestbedConfig(port_base=args.port_base, state_dir=Path(state)).validate())
        tb.up(say=lambda _m: None)
        try:
            objects = timing.stamp(fleet.load("default", tb.config.card_resource), "default")
            kube = tb.kube()
            fleet.deploy(kube, objects, say=lambda _m: None, prometheus=tb.prometheus_url)  # serving, as README's
            kube.close()
            expected = fleet.expected_pods(objects)
            config = ["--prometheus-url", tb.prometheus_url]
            whole_catalog(tb, Path(state), config)
            if args.examples:
                examples(Path(state) / "reports", args.examples)
            if args.catalog_only:
                return
            total = time.monotonic()
            print(f"{'experiment':<28} {'tool':<9} {'exit':>4} {'wall s':>7} {'run s':>7} {'overhead s':>10} "
                  f"{'writes':>6} {'req/min':>8} {'left applied':>12}")
            for path in files:
                overheads = {}
                for tool in ("kilocard", "chaos"):
                    whole_fleet(tb, expected)
                    time.sleep(args.settle)
                    journal = Path(state) / f"{path.stem}-{tool}.json"
                    ledger_dir = Path(state) / f"ledger-{tool}"
                    argv = ([sys.executable, "-m", "chaos.cli", "run", str(path), "--kubeconfig",
                             str(tb.paths.kubeconfig), "--ledger-dir", str(ledger_dir),
                             "--journal", str(journal), "--no-report", *config] if tool == "kilocard" else
                            [str(Path(sys.executable).parent / "chaos"), "--no-version-check", "run", str(path),
                             "--journal-path", str(journal)])
                    # chaos run's --var sets only keys the experiment declares: the cluster and the
                    # ledger come from the environment there.
                    env = {} if tool == "kilocard" else {"KUBECONFIG": str(tb.paths.kubeconfig),
                                                         "KILOCARD_LEDGER": str(ledger_dir)}
                    since = time.time()
                    before = tb.apiserver_requests(RESOURCES, VERBS)
                    wall, data, code = timed(argv, journal, env)
                    requests = tb.apiserver_requests(RESOURCES, VERBS) - before
                    writes = [w for w in audit.writes(tb.paths.audit_log, since) if w.user_agent.endswith("(toolkit)")]
                    overheads[tool] = wall - float(data.get("duration") or 0.0)
                    # What the run left applied (plain chaos run reverts only what rollbacks say).
                    left = subprocess.run([sys.executable, "-m", "chaos.cli", "recover", "--all", "--kubeconfig",
                                           str(tb.paths.kubeconfig), "--ledger-dir", str(ledger_dir)],
                                          capture_output=True, text=True, timeout=300).stdout.count("reverted")
                    print(f"{path.stem:<28} {tool:<9} {code:>4} {wall:>7.1f} {float(data.get('duration') or 0):>7.1f} "
                          f"{overheads[tool]:>10.2f} {len(writes):>6} {requests / (wall / 60):>8.0f} {left:>12}")
                    phases = (data.get("kilocard") or {}).get("runner_seconds") if tool == "kilocard" else None
                    if phases:  # where the runner's own time went; the rest is start-up, imports, the journal
                        rest = overheads[tool] - sum(phases.values())
                        print(f"{'':<28}   " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
                              + f", start-up and the rest {rest:.2f} s")
                print(f"{'':<28} overhead ratio kilocard/chaos: {overheads['kilocard'] / overheads['chaos']:.2f}x "
                      f"(goal: kilocard <= 1.5 s)")
            print(f"\ncatalog of {len(files)} experiments, both tools, settling included: "
                  f"{time.monotonic() - total:.0f} s (goal for kilocard alone: <= 600 s)")
        finally:
            tb.down(say=lambda _m: None)


if __name__ == "__main__":
    main()
