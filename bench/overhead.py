"""The runner's own overhead per experiment: `kilocard run` against plain `chaos run` (chaoslib
alone) on the same small testbed, in the same run, the same experiment, rounds alternating.

The experiment is as small as one that does something: a steady state of one probe, then one
pod-kill of one replica through `chaos.actions.apply_fault`, then one probe (placement: a replica on
its way back does not break it, so both tools pass). Per tool and round:
- wall: the process, from exec to exit;
- run: chaoslib's own run time (the journal's `duration`);
- overhead: wall - run: the interpreter's start-up and imports, and (kilocard) validation, the
  connection, the plan and the guards against the cluster, the follower, the ledger revert, the
  journal, broken down by the journal's `runner_seconds` (the rest: start-up and imports).
Medians are printed, and the ratio kilocard/chaos of the overheads (goal: kilocard's <= 0.5 s
more than plain chaos run's, issue 27). A bare `import` of each tool's entry point is timed too.

    .venv/bin/python bench/overhead.py [--rounds 5] [--port-base 26443] [--json out.json]

Not a test.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.catalog import timed  # noqa: E402 - after the path it is found on
from testbed import build, fleet, timing  # noqa: E402
from testbed.cluster import Testbed  # noqa: E402
from testbed.config import TestbedConfig  # noqa: E402

MODEL = "llama-3-70b"
CHAOS = str(Path(sys.executable).parent / "chaos")


def experiment(namespace: str) -> dict[str, Any]:
    def probe(name: str, func: str) -> dict[str, Any]:
        return {"type": "probe", "name": name, "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"},
                "provider": {"type": "python", "module": "probes.chaostoolkit", "func": func,
                             "arguments": {"model": MODEL, "namespace": namespace}}}

    return {"title": "the runner's overhead", "description": "one probe, one pod-kill, one probe",
            "steady-state-hypothesis": {"title": "placed", "probes": [probe("placed", "placement_holds")]},
            "method": [{"type": "action", "name": "kill", "provider": {
                "type": "python", "module": "chaos.actions", "func": "apply_fault",
                "arguments": {"fault": {"kind": "pod-kill", "namespace": namespace, "count": 1,
                                        "label_selector": f"kilocard.io/model={MODEL}", "grace_seconds": 0}}}},
                       probe("placed", "placement_holds")]}


def import_seconds(module: str) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--port-base", type=int, default=26443)
    parser.add_argument("--json", type=Path, help="write the measurements here too")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped bench still takes its testbed down
    build.build(say=lambda _m: None)
    with tempfile.TemporaryDirectory(prefix="kilocard-overhead-") as state:
        tb = Testbed(TestbedConfig(nodes=3, port_base=args.port_base, state_dir=Path(state)).validate())
        tb.up(say=lambda _m: None)
        try:
            kube = tb.kube()
            objects = fleet.scaled(fleet.only(fleet.load("default", tb.config.card_resource), MODEL), {MODEL: 2})
            fleet.deploy(kube, timing.stamp(objects, "fast"), say=lambda _m: None)  # the bench times no start-up
            path = Path(state) / "overhead.yaml"
            path.write_text(yaml.safe_dump(experiment(fleet.DEFAULT_NAMESPACE)))
            # Plain chaos run reads the kubeconfig from the environment, as chaostoolkit-kubernetes does.
            env = {"KUBECONFIG": str(tb.paths.kubeconfig)}
            rows: dict[str, list[dict[str, Any]]] = {"kilocard": [], "chaos": []}
            for i in range(args.rounds):
                for tool in (("kilocard", "chaos") if i % 2 == 0 else ("chaos", "kilocard")):
                    kube.wait_ready("pods", 2, timeout=120, namespace=fleet.DEFAULT_NAMESPACE,
                                    label_selector=f"kilocard.io/model={MODEL}")
                    journal = Path(state) / f"{tool}-{i}.json"
                    argv = ([sys.executable, "-m", "chaos.cli", "run", str(path), "--kubeconfig",
                             str(tb.paths.kubeconfig), "--prometheus-url", tb.prometheus_url, "--ledger-dir",
                             str(Path(state) / "ledger"), "--journal", str(journal), "--no-report", "-q"]
                            if tool == "kilocard" else
                            [CHAOS, "--no-version-check", "run", str(path), "--journal-path", str(journal)])
                    wall, data, code = timed(argv, journal, env)
                    run = float(data.get("duration") or 0.0)
                    phases = (data.get("kilocard") or {}).get("runner_seconds") or {}
                    rows[tool].append({"wall": wall, "run": run, "overhead": wall - run, "exit": code,
                                       "phases": phases})
            kube.close()
        finally:
            tb.down(say=lambda _m: None)
    imports = {"kilocard": import_seconds("chaos.cli"), "chaos": import_seconds("chaostoolkit.cli")}
    print(f"{'tool':<9} {'exit':>5} {'wall s':>7} {'run s':>7} {'overhead s':>10} {'import s':>8}   (medians of "
          f"{args.rounds})")
    median = {tool: {k: statistics.median(r[k] for r in got) for k in ("wall", "run", "overhead")}
              for tool, got in rows.items()}
    for tool, got in rows.items():
        m = median[tool]
        print(f"{tool:<9} {','.join(str(r['exit']) for r in got):>5} {m['wall']:>7.2f} {m['run']:>7.2f} "
              f"{m['overhead']:>10.2f} {imports[tool]:>8.2f}")
    names = sorted({k for r in rows["kilocard"] for k in r["phases"]})
    phases = {k: statistics.median(r["phases"].get(k, 0.0) for r in rows["kilocard"]) for k in names}
    rest = median["kilocard"]["overhead"] - sum(phases.values())
    print("kilocard's phases: " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
          + f", start-up, imports and the rest {rest:.2f} s")
    extra = median["kilocard"]["overhead"] - median["chaos"]["overhead"]
    print(f"overhead kilocard/chaos: {median['kilocard']['overhead'] / median['chaos']['overhead']:.2f}x; "
          f"kilocard's own: {extra:+.2f} s (goal <= 0.5 s)")
    if args.json:
        args.json.write_text(json.dumps({"rounds": rows, "imports": imports, "phases": phases}, indent=1))


if __name__ == "__main__":
    main()
