"""Regenerate docs/performance.md: run the benches, keep each one's figures under
docs/performance/<section>.json, and render the page from them, with the date and the machine.

    .venv/bin/python bench/performance.py                      # every section, then the page
    .venv/bin/python bench/performance.py --only kill-100 probes-10k
    .venv/bin/python bench/performance.py --render             # the page from the kept figures

Each section runs its bench in a child process with --json. Figures are medians with min and max
over at least 3 runs (rounds, runs or repeats, as each bench names them). The earlier benches
(calibration, recovery tracking, the catalog's time) print tables of their own; their output is
kept and shown as it came. Needs chaostoolkit-kubernetes==0.39.0 for the anchors. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KEPT = ROOT / "docs" / "performance"
PAGE = ROOT / "docs" / "performance.md"
PORT = "26443"

# name -> (bench script, its arguments); JSON sections write --json, text ones are kept as printed.
JSON_SECTIONS: dict[str, tuple[str, list[str]]] = {
    "testbed-1k": ("testbed_up.py", ["--nodes", "128", "--runs", "3", "--window", "30"]),
    "testbed-10k": ("testbed_up.py", ["--nodes", "1250", "--runs", "3", "--window", "30"]),
    "kill-100": ("pod_kill.py", ["--nodes", "128", "--pods", "100", "--replicas", "200", "--rounds", "7"]),
    "kill-1000": ("pod_kill.py", ["--nodes", "1250", "--pods", "1000", "--replicas", "1200", "--rounds", "3"]),
    "overhead": ("overhead.py", ["--rounds", "5"]),
    "probes-1k": ("probes_snapshot.py", ["--nodes", "128", "--repeat", "20"]),
    "probes-10k": ("probes_snapshot.py", ["--nodes", "1250", "--repeat", "20"]),
    "api-1k": ("api_load.py", ["--nodes", "128", "--runs", "3", "--idle", "15"]),
    "api-10k": ("api_load.py", ["--nodes", "1250", "--runs", os.environ.get("KILOCARD_API_RUNS", "3"), "--idle", "15"]),
}
TEXT_SECTIONS: dict[str, tuple[str, list[str]]] = {
    "calibration": ("fleet_calibration.py", []),
    "recovery": ("recovery_tracking.py", []),
    "catalog": ("catalog.py", ["--catalog-only", "--port-base", PORT]),
}


def machine() -> str:
    cores = os.cpu_count()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.node()} ({cores} cores, {memory:.0f} GiB, Linux {platform.release()}, "
            f"Python {platform.python_version()})")


def run(name: str) -> bool:
    KEPT.mkdir(parents=True, exist_ok=True)
    script, arguments = {**JSON_SECTIONS, **TEXT_SECTIONS}[name]
    argv = [sys.executable, str(ROOT / "bench" / script), *arguments]
    if name in JSON_SECTIONS:
        argv += ["--port-base", PORT, "--json", str(KEPT / f"{name}.json.tmp")]
    print(f"== {name}: {' '.join(argv[1:])}", flush=True)
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    seconds = time.monotonic() - started
    print(done.stdout[-3000:], done.stderr[-2000:] if done.returncode else "", flush=True)
    if done.returncode:
        print(f"{name} failed (exit {done.returncode}); its earlier figures are kept", flush=True)
        return False
    shown = ["bench/" + script, *arguments, *(["--port-base", PORT] if name in JSON_SECTIONS else [])]
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "command": " ".join(shown),
            "seconds": round(seconds)}
    if name in JSON_SECTIONS:
        tmp = KEPT / f"{name}.json.tmp"
        data = json.loads(tmp.read_text())
        tmp.unlink()
    else:
        data = {"output": done.stdout.strip()}
    (KEPT / f"{name}.json").write_text(json.dumps({"meta": meta, **data}, indent=2) + "\n")
    return True


def kept(name: str) -> dict[str, Any] | None:
    path = KEPT / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def spread(values: list[float], unit: str = "s", scale: float = 1.0, digits: int = 2) -> str:
    ordered = sorted(v * scale for v in values)
    median = ordered[len(ordered) // 2] if len(ordered) % 2 else (ordered[len(ordered) // 2 - 1]
                                                                  + ordered[len(ordered) // 2]) / 2
    return f"{median:.{digits}f} {unit} ({ordered[0]:.{digits}f}–{ordered[-1]:.{digits}f})"


def provenance(data: dict[str, Any]) -> str:
    m = data["meta"]
    return f"*`{m['command']}`, {m['date']}, {m['machine']}, {m['seconds']} s.*"


def testbed_section(lines: list[str]) -> None:
    lines += ["## The testbed at 1,024 and 10,000 cards", "",
              "A fresh `kilocard testbed up --nodes N --fleet F` process (binaries cached), from its start to its",
              "exit with every fleet pod Ready, on the `default` timing (the slowest replica's start-up is 34 s of",
              "it); then the steady state of the testbed's processes over a window.", "",
              "| cards | profile | fleet pods | up to fleet Ready | goal | steady cores | goal | RSS | goal |",
              "|---|---|---|---|---|---|---|---|---|"]
    details = []
    for name in ("testbed-1k", "testbed-10k"):
        d = kept(name)
        if d is None:
            continue
        big = d["cards"] >= 10000
        lines.append(f"| {d['cards']:,} | {d['profile']} | {d['pods']} | {spread(d['up_seconds'], digits=1)} | "
                     f"{'≤ 60 s' if big else ''} | {d['cores']:.2f} | {'≤ 1.0' if big else ''} | "
                     f"{d['rss_mib'] / 1024:.1f} GiB | {'≤ 8 GiB' if big else ''} |")
        if d.get("splits"):
            details.append(f"- {d['cards']:,} cards, each run as the command reports it (control plane and nodes, "
                           "then the fleet): " + "; ".join(f"{n:.1f} + {f:.1f} s" for n, f in d["splits"]) + ".")
        details.append(f"- {d['cards']:,} cards, by process (cores, MiB): " + ", ".join(
            f"{p} {v['cores']:.2f}/{v['rss_mib']:.0f}" for p, v in d["steady"].items()) + f". {provenance(d)}")
    lines += ["", *details, ""]


def kill_section(lines: list[str]) -> None:
    lines += ["## Bulk pod kill against both anchors", "",
              "kilocard's `pod-kill` (target LIST, ledger, every DELETE and every read-back GET a stream on one",
              "HTTP/2 connection) against",
              "chaostoolkit-kubernetes' `terminate_pods` and against the physical-limit proxy (`bench/raw_h2.py`:",
              "the same DELETEs, raw HTTP/2, nothing decoded, victims chosen outside the clock). Cold is a fresh",
              "process (imports not timed, connections and lazy imports timed); warm is a process that has",
              "killed before. Median (min–max) over the rounds; requests are the apiserver's pod LIST+GET+DELETE",
              "count (all clients, so the controllers' own deletions show too).", ""]
    for name in ("kill-100", "kill-1000"):
        d = kept(name)
        if d is None:
            continue
        lines += [f"### {d['pods']} pods of {d['replicas']} on {d['nodes'] * 8:,} cards", "",
                  "| tool | seconds | requests |", "|---|---|---|"]
        for tool, runs in d["runs"].items():
            lines.append(f"| {tool} | {spread([s for s, _ in runs], digits=3)} | "
                         f"{sorted(c for _, c in runs)[len(runs) // 2]:.0f} |")
        lines += ["", "| ratio (medians) | value | goal |", "|---|---|---|"]
        for ratio, value in d["ratios"].items():
            goal = "≥ 10" if ratio.startswith("terminate") else "≤ 1.5"
            lines.append(f"| {ratio} | {value:.2f}x | {goal} |")
        lines += ["", provenance(d), ""]


def overhead_section(lines: list[str]) -> None:
    d = kept("overhead")
    if d is None:
        return
    lines += ["## The runner's own overhead", "",
              "One small experiment (a probe, a pod-kill of one replica, a probe) through `kilocard run` and",
              "through plain `chaos run` (chaoslib alone), rounds alternating, on a 3-node testbed. Overhead is",
              "the process's wall time less chaoslib's own run time (the journal's `duration`): start-up, imports",
              "and, for kilocard, validation, the plan and guards, the follower, the ledger, the revert, the",
              "journal. Median (min–max) over the rounds.", "",
              "| tool | wall | chaoslib's run | overhead | a bare import of its CLI |", "|---|---|---|---|---|"]
    for tool, rounds in d["rounds"].items():
        lines.append(f"| {tool} | {spread([r['wall'] for r in rounds])} | {spread([r['run'] for r in rounds])} | "
                     f"{spread([r['overhead'] for r in rounds])} | {d['imports'][tool]:.2f} s |")
    medians = {tool: statistics.median(r["overhead"] for r in rounds) for tool, rounds in d["rounds"].items()}
    lines += ["", "kilocard's phases (medians, `runner_seconds`): " + ", ".join(
        f"{k} {v:.2f} s" for k, v in d["phases"].items()) + ".", "",
              f"kilocard's own: {medians['kilocard'] - medians['chaos']:+.2f} s over plain chaos run's overhead "
              f"({medians['kilocard'] / medians['chaos']:.2f}x; goal: at most +0.5 s).", "", provenance(d), ""]


def probes_section(lines: list[str]) -> None:
    lines += ["## Probes at scale", "",
              "Placement (every model) + TP groups + capacity + room over one snapshot, two ways: listed (two",
              "LISTs sent at once, read from the watch cache with resourceVersion=0), and as a run reads it,",
              "from the run's follower (`chaos.follower`: two LISTs and two watches when the run starts, then",
              "memory, with this process's own writes waited for). Then recovery tracking of every fleet pod",
              "for a minute: its LIST and WATCH requests.", "",
              "| cards | replica pods | snapshot | probes | goal | LISTs per snapshot | goal | tracking LIST / WATCH |",
              "|---|---|---|---|---|---|---|---|"]
    notes = []
    for name in ("probes-1k", "probes-10k"):
        d = kept(name)
        if d is None:
            continue
        f = d["recovery_tracking"]
        ways = [("listed", d["seconds"], d["requests"])]
        if d.get("followed"):
            ways.append(("followed", d["followed"]["seconds"], d["followed"]["requests"]))
        for way, t, r in ways:
            lines.append(f"| {d['cards']:,} | {d['pods']} | {way} | {t['median'] * 1000:.0f} ms ({t['min'] * 1000:.0f}–"
                         f"{t['max'] * 1000:.0f}) | {'≤ 500 ms' if d['cards'] >= 10000 else ''} | "
                         f"{r['median']:.0f} ({r['min']:.0f}–{r['max']:.0f}) | 2–4 | "
                         f"{f['LIST']:.0f} / {f['WATCH']:.0f} in {f['seconds']:.0f} s |")
        if d.get("followed"):
            notes.append(f"- {d['cards']:,} cards: the follower started (its two LISTs in) in "
                         f"{d['followed']['start_seconds'] * 1000:.0f} ms.")
        notes.append(f"- {d['cards']:,} cards: {provenance(d)}")
    lines += ["", *notes, ""]


def api_section(lines: list[str]) -> None:
    lines += ["## API load and verdicts at scale", "",
              "S1 and S3 through `kilocard run`: their verdicts, and their apiserver reads per experiment-minute",
              "(GET/LIST/WATCH of pods, nodes, configmaps, events, namespaces; the idle rate just before each",
              "run subtracted), against chaostoolkit-kubernetes' `pods_in_phase` + `all_pods_healthy` once a",
              "second for as long as S1 ran. A run's reads are mostly fixed (the follower's two LISTs and two",
              "watches, the targets, the namespace, the ledger, the workloads), plus a watch re-armed per kind",
              "each minute, so its share falls with its length; polling's grows with it.", "",
              "| cards | experiment | verdicts | seconds | reads per run | reads per minute | of polling | goal |",
              "|---|---|---|---|---|---|---|---|"]
    notes = []
    for name in ("api-1k", "api-10k"):
        d = kept(name)
        if d is None:
            continue
        cards = d["nodes"] * 8
        for scenario, s in d["summary"].items():
            runs = d["runs"][scenario]
            rates = [float(r["reads_per_minute"]) for r in runs]
            per_run = [float(r["reads_per_minute"]) * float(r["seconds"]) / 60 for r in runs]
            lines.append(f"| {cards:,} | {scenario.removesuffix('.yaml')} | {'/'.join(s['verdicts'])} | "
                         f"{spread([float(r['seconds']) for r in runs], digits=0)} | "
                         f"{spread(per_run, unit='', digits=0)} | {spread(rates, unit='', digits=1)} | "
                         f"{s['share_of_polling']:.3f} | ≤ 0.1 |")
        runs = d["runs"]["polling"]
        polling = [float(r["reads_per_minute"]) for r in runs]
        reads = [p * float(r["seconds"]) / 60 for p, r in zip(polling, runs, strict=True)]
        lines.append(f"| {cards:,} | polling at 1 s | - | {spread([float(r['seconds']) for r in runs], digits=0)} | "
                     f"{spread(reads, unit='', digits=0)} | {spread(polling, unit='', digits=1)} | 1 | |")
        notes.append(f"- {cards:,} cards: {provenance(d)}")
    lines += ["", *notes, ""]


def earlier_section(lines: list[str]) -> None:
    lines += ["## The earlier benches", ""]
    for name, title in (("calibration", "Fleet calibration (P95 against the load model)"),
                        ("recovery", "Recovery tracking precision (watch against polling, audit log as truth)"),
                        ("catalog", "The catalog's time (`kilocard run experiments/`)")):
        d = kept(name)
        if d is None:
            lines += [f"### {title}", "", "Not yet run by this script.", ""]
            continue
        lines += [f"### {title}", "", provenance(d), "", "```", d["output"], "```", ""]


def render() -> None:
    growth = (ROOT / "docs" / "performance-growth.md").read_text().strip()
    lines = ["# Performance", "",
             "Regenerated by `.venv/bin/python bench/performance.py` (sections with `--only`, the page alone",
             "with `--render`); each section says when and where it ran. Not part of the test run.", ""]
    for section in (testbed_section, kill_section, overhead_section, probes_section, api_section, earlier_section):
        section(lines)
    PAGE.write_text("\n".join(lines) + "\n" + growth + "\n")
    print(f"wrote {PAGE}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=[*JSON_SECTIONS, *TEXT_SECTIONS])
    parser.add_argument("--render", action="store_true", help="only render the page from the kept figures")
    args = parser.parse_args()
    failed = []
    if not args.render:
        failed = [name for name in args.only or [*JSON_SECTIONS, *TEXT_SECTIONS] if not run(name)]
    render()
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
