"""Recovery distributions for `kilocard rehearse`, measured on the testbed: each class of failure
applied a few times as a real fault through `kilocard run`, on the default fleet started on the
`production` timing, and each replica's recovery phases read from the run's journal (the
recovery recorder's deleted, gone, created, scheduled, started and Ready times, from the fault).

    class     fault                                          model it lands on
    gpu       gpu-ecc (double-bit) on one card: the testbed's llama-3-70b
              remediator quarantines and drains the node
    host      node-kubelet-stop: the node is lost; the taint  llama-2-7b (its node's
              manager evicts its pods after the testbed's     7B pods)
              15 s toleration (upstream's default: 300 s)
    engine    pod-kill of one replica pod                     every other model
Each model's start-up comes from every run that replaced one of its replicas. No two runs of a
wave touch one model's pods (a run's recorder follows all of its model's pods; the 70B's
PodDisruptionBudget would hold one run's drain for another's replica), and only the pods a run's
own faults took are its samples.

The `network` class is read with the host's samples (a node cut off from the control plane is
lost to it the same way). Detection = scheduled; start-up = Ready - scheduled, pooled per model
over every run. Writes chaos/rehearsal/recoveries-testbed.json (the default of `kilocard
rehearse --recoveries`) with each sample's run, and prints the summary.

    .venv/bin/python bench/recovery_phases.py [--waves 2] [--port-base 27443]

Not a test: about 12 minutes a wave.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from chaos.rehearsal.recoveries import MEASURED
from testbed import fleet, timing
from testbed.cluster import Testbed
from testbed.config import TestbedConfig

NS = fleet.DEFAULT_NAMESPACE
BIG, SMALL = "llama-3-70b", "llama-2-7b"
MODELS = ("llama-2-7b", "llama-2-7b-fragile", "llama-3-70b", "llama-3-405b", "llama-3-8b-long")
BUDGET = 1200  # seconds a replica may take to come back before the run gives up on it


def experiment(name: str, model: str, fault: dict[str, Any]) -> dict[str, Any]:
    """One fault, then wait for the model to be whole again (the journal then holds its phases)."""
    return {
        "title": f"recovery sample: {name}", "description": "bench/recovery_phases.py",
        "tags": ["kilocard", "bench"],
        "controls": [{"name": "guards", "provider": {"type": "python", "module": "chaos.guards",
                                                    "arguments": {"max_pods": 64, "max_cards": 512}}}],
        "method": [
            {"type": "action", "name": "fault", "provider": {
                "type": "python", "module": "chaos.actions", "func": "apply_fault",
                "arguments": {"fault": fault}}},
            {"type": "probe", "name": "whole-again", "tolerance": {"type": "regex", "target": "verdict",
                                                                  "pattern": "^ok$"},
             "provider": {"type": "python", "module": "probes.chaostoolkit", "func": "tp_groups_recovered_within",
                          "arguments": {"model": model, "budget": BUDGET, "namespace": NS}}}],
    }


def wave(index: int) -> list[tuple[str, str, dict[str, Any]]]:
    """(class, model, fault) of one wave. No two runs of a wave touch one model's pods: a run's
    recorder follows its model's every pod, and the 70B's PodDisruptionBudget would make one
    run's drain wait for another's replica."""
    ttl = {"ttl_seconds": BUDGET + 120}
    of = {"namespace": NS, "model": BIG}
    runs = [("gpu", BIG, {"kind": "gpu-ecc", "nodes_of": {**of, "replica": index}, "card": 0, **ttl}),
            ("host", SMALL, {"kind": "node-kubelet-stop", "nodes_of": {"namespace": NS, "model": SMALL,
                                                                       "replica": 8 * index}, **ttl})]
    runs += [("engine", m, {"kind": "pod-kill", "namespace": NS, "model": m, "count": 1}) for m in MODELS
             if m not in (BIG, SMALL)]
    return runs


def own(journal: dict[str, Any]) -> dict[str, str]:
    """The pods the run's own faults took, with their models: those it killed, and those on the
    nodes it faulted (the journal's placement before the method)."""
    section = journal.get("kilocard") or {}
    records = section.get("faults") or []
    killed = {r["target"]["name"] for r in records if r.get("kind") == "pod-kill"}
    nodes = {r["target"]["node"] for r in records if r.get("kind") != "pod-kill" and r["target"].get("node")}
    before = (section.get("placement") or {}).get("before") or []
    return {p["name"]: p["model"] for n in before for p in n["pods"] if p["name"] in killed or n["name"] in nodes}


def run_all(tb: Testbed, runs: list[tuple[str, str, dict[str, Any]]], folder: Path) -> list[dict[str, Any]]:
    env = {**os.environ, "KUBECONFIG": str(tb.paths.kubeconfig), "KILOCARD_LEDGER": str(folder / "ledger")}
    started = []
    for i, (cls, model, fault) in enumerate(runs):
        path = folder / f"{cls}-{model}-{i}.yaml"
        path.write_text(yaml.safe_dump(experiment(f"{cls} on {model}", model, fault), sort_keys=False))
        journal = folder / f"{path.stem}.json"
        proc = subprocess.Popen([sys.executable, "-m", "chaos.cli", "run", str(path), "-q", "--journal", str(journal),
                                 "--prometheus-url", tb.prometheus_url], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        started.append((cls, model, journal, proc))  # model: the run's; each sample names its pod's
        time.sleep(2)  # each run plans on the fleet before the last one's fault lands
    found = []
    for cls, model, journal, proc in started:
        out, _ = proc.communicate(timeout=BUDGET + 600)
        print(f"  {cls} on {model}: exit {proc.returncode}: {out.strip().splitlines()[-1] if out.strip() else ''}")
        if not journal.exists():
            continue
        data = json.loads(journal.read_text())
        mine = own(data)
        for r in (data.get("kilocard") or {}).get("recovery") or []:
            if "scheduled" in r and "ready" in r and r["pod"] in mine:
                found.append({"class": cls, "model": mine[r["pod"]], "run": data["kilocard"].get("run_id"), **r})
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waves", type=int, default=2)
    parser.add_argument("--port-base", type=int, default=27443)
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        tb = Testbed(TestbedConfig(port_base=args.port_base, state_dir=folder / "testbed").validate())
        tb.up(say=lambda m: print(f"  {m}"), timeout=300)
        try:
            kube = tb.kube()
            objects = timing.stamp(fleet.load("default", tb.config.card_resource), "production")
            fleet.deploy(kube, objects, timeout=300 + timing.slowest_start(objects, "production"), say=print)
            samples: list[dict[str, Any]] = []
            for i in range(args.waves):
                print(f"wave {i + 1} of {args.waves}")
                samples += run_all(tb, wave(i), folder)
                fleet.deploy(kube, objects, timeout=BUDGET, say=print)  # whole again before the next wave
            kube.close()
        finally:
            tb.down(say=lambda _m: None)
    detection: dict[str, list[float]] = {}
    startup: dict[str, list[float]] = {}
    for s in samples:
        detection.setdefault(s["class"], []).append(round(s["scheduled"], 2))
        startup.setdefault(s["model"], []).append(round(s["ready"] - s["scheduled"], 2))
    detection["network"] = list(detection.get("host", []))
    out = {"measured": time.strftime("%Y-%m-%d"), "command": "bench/recovery_phases.py "
           f"--waves {args.waves}", "timing": "production", "seconds": round(time.monotonic() - started),
           "testbed": {"node_monitor_grace_seconds": tb.config.tuning.node_monitor_grace_seconds,
                       "note": f"node loss: the testbed's {tb.config.tuning.node_monitor_grace_seconds} s node-monitor "
                               "grace period, then its 15 s not-ready and unreachable tolerations (kube-apiserver "
                               "--default-*-toleration-seconds; upstream's defaults are 40 s and 300 s); network "
                               "reads the host's samples"},
           "detection": detection, "startup": startup, "samples": samples}
    MEASURED.write_text(json.dumps(out, indent=1) + "\n")
    for part in ("detection", "startup"):
        for name, values in sorted(out[part].items()):
            print(f"{part} {name}: n={len(values)} median {statistics.median(values):.1f} s "
                  f"(min {min(values):.1f}, max {max(values):.1f})")
    print(f"wrote {MEASURED} in {out['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
