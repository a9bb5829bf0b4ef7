"""The field account's incidents (experiments/incidents/) replayed on the testbed configurations
that show them and their fixes, each beside its negative twin; then one replayed on a twin of the
cluster (`replay --twin`). Prints one line per replay (expectation, exit code, verdict, seconds) and
keeps each journal and report under --out. Not a test: about 15 minutes on 2 cores.

    .venv/bin/python bench/incidents.py [--port-base 27443] [--out reports/incidents] [--only packed]
                                        [--replay congestion]

    default testbed (128 nodes, the default fleet, remediation on)
      ecc-one-card          reproduced: exit 0         fixed: exit 0 (the remediator drains the node)
      twin: the ECC on a node no llama-3-70b replica runs on: not reproduced, exit 1
      top-of-hour-congestion  reproduced on rack-00 (TP=16 replicas there): exit 0
      twin: the same burst on a rack with no TP=16 replica: not reproduced, exit 1
      machine-loss-every-replica  not reproduced (exit 1): the roomy fleet spreads the replicas
      replay --twin of ecc-one-card (the twin copies this testbed): reproduced, exit 0
    no remediation (3 nodes, two llama-3-70b replicas)
      ecc-one-card          reproduced: exit 0         fixed: exit 1, naming the alert that came back
      its replay's journal, recorded (record --journal) and replayed: reproduced, exit 0
    packed (2 nodes, the fragile model's two replicas piled on one, as the account found them)
      machine-loss-every-replica  reproduced: exit 0
      with required anti-affinity (the fix; replicas on both nodes): fixed, exit 0
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chaos.kube import Kube, pod_ready  # noqa: E402 - after the path: run as a script from anywhere
from testbed import fleet, timing  # noqa: E402
from testbed.cluster import Testbed  # noqa: E402
from testbed.config import TestbedConfig  # noqa: E402

INCIDENTS = ROOT / "experiments" / "incidents"
KILOCARD = [sys.executable, "-m", "chaos.cli"]
NS = fleet.DEFAULT_NAMESPACE
FRAGILE, TP8, BIG = "llama-2-7b-fragile", "llama-3-70b", "llama-3-405b"
ROWS: list[dict[str, Any]] = []
PICKED: list[str] = []  # --replay: only the replays whose name holds one of these


def replay(tb: Testbed, out: Path, name: str, timeline: Path, expect: str, wanted: int, *extra: str) -> None:
    """One `kilocard replay`; its line in the table (and whether its exit code is the one wanted)."""
    if PICKED and not any(word in name for word in PICKED):
        return
    here = out / name
    here.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    done = subprocess.run([*KILOCARD, "replay", str(timeline), "--expect", expect, "--kubeconfig",
                           str(tb.paths.kubeconfig), "--prometheus-url", tb.prometheus_url, "--ledger-dir",
                           str(here / "ledger"), "--journal", str(here / "journal.json"), "--reports",
                           str(here / "reports"), *extra], capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - started
    (here / "output.txt").write_text(done.stdout + done.stderr)
    reason = ""
    if (here / "journal.json").is_file():
        reason = json.loads((here / "journal.json").read_text())["kilocard"]["reason"]
    row = {"replay": name, "expect": expect, "exit": done.returncode, "wanted": wanted, "seconds": round(seconds),
           "reason": reason or (done.stderr.strip().splitlines() or ["?"])[-1]}
    ROWS.append(row)
    mark = "as wanted" if done.returncode == wanted else f"WANTED exit {wanted}"
    print(f"{name:<44} {expect:<11} exit {done.returncode} ({mark}) {seconds:5.0f} s  {row['reason'][:160]}",
          flush=True)


def recorded(tb: Testbed, out: Path, source: str, name: str, wanted: int) -> None:
    """A past run as an incident: `record --journal` of the replay `source` (its faults as applied,
    the alerts of its range from Prometheus), replayed as a timeline of its own."""
    if PICKED and not any(word in name for word in PICKED):
        return
    timeline = out / f"{name.replace('/', '-').replace(' ', '-')}.yaml"
    done = subprocess.run([*KILOCARD, "record", "--journal", str(out / source / "journal.json"), "--prometheus-url",
                           tb.prometheus_url, "-o", str(timeline)], capture_output=True, text=True, timeout=120)
    print(f"{name}: {(done.stdout + done.stderr).strip()}", flush=True)
    replay(tb, out, name, timeline, "reproduced", wanted)


def settle(tb: Testbed, seconds: float = 30) -> None:
    """Every pod Ready and no alert firing, then a pause: one replay's aftermath is not the next's."""
    kube = tb.kube()
    try:
        kube.wait_until("pods", lambda pods: all(pod_ready(p) for p in pods)
                        and not any(p.metadata.deletion_timestamp for p in pods), timeout=300, namespace=NS)
    finally:
        kube.close()
    from prometheus_api_client import PrometheusConnect

    prom = PrometheusConnect(tb.prometheus_url)
    deadline = time.monotonic() + 120
    while prom.custom_query('ALERTS{alertstate="firing", alertname=~"ReplicaTtftP95High|ModelUnavailable"}') \
            and time.monotonic() < deadline:
        time.sleep(2)
    time.sleep(seconds)


def variant(timeline: Path, out: Path, name: str, change: Any) -> Path:
    """A copy of a timeline with one cause changed (its negative twin)."""
    data = copy.deepcopy(yaml.safe_load(timeline.read_text()))
    change(data)
    path = out / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def nodes_running(kube: Kube, model: str) -> set[str]:
    return {p.spec.node_name for p in kube.list_pods(NS, f"kilocard.io/model={model}").items if p.spec.node_name}


def up(config: TestbedConfig, objects: list[dict[str, Any]] | None = None) -> Testbed:
    tb = Testbed(config.validate())
    tb.up(say=lambda _m: None, timeout=300)
    kube = tb.kube()
    try:
        fleet.deploy(kube, timing.stamp(objects or fleet.load("default", tb.config.card_resource), "default"),
                     timeout=300, say=lambda _m: None)
    finally:
        kube.close()
    settle(tb, 20)
    return tb


def default_testbed(args: argparse.Namespace, out: Path) -> None:
    ecc, congestion, loss = (INCIDENTS / f"{n}.yaml" for n in ("ecc-one-card", "top-of-hour-congestion",
                                                                "machine-loss-every-replica"))
    tb = up(TestbedConfig(port_base=args.port_base, state_dir=Path(tempfile.mkdtemp(prefix="incidents-"))))
    try:
        replay(tb, out, "default/ecc-one-card", ecc, "reproduced", 0)
        settle(tb)
        replay(tb, out, "default/ecc-one-card", ecc, "fixed", 0)
        settle(tb)
        kube = tb.kube()
        try:
            idle = sorted({n.metadata.name for n in kube.list_nodes()} - nodes_running(kube, TP8))[0]
            racks = {n.metadata.name: n.metadata.labels.get("kilocard.io/rack") for n in kube.list_nodes()}
            quiet = sorted(set(racks.values()) - {racks[n] for n in nodes_running(kube, BIG)})[0]
        finally:
            kube.close()

        def on_idle(data: dict[str, Any]) -> None:
            fault = data["faults"][0]["fault"]
            fault.pop("nodes_of"), fault.pop("count")
            fault["nodes"] = [idle]

        replay(tb, out, "default/ecc-on-a-node-with-no-replica (twin)", variant(ecc, out, "ecc-idle", on_idle),
               "reproduced", 1)
        settle(tb)
        replay(tb, out, "default/top-of-hour-congestion", congestion, "reproduced", 0)
        settle(tb)

        def on_quiet(data: dict[str, Any]) -> None:
            for entry in data["faults"]:
                entry["fault"].pop("nodes_of")
                entry["fault"]["node_selector"] = f"kilocard.io/rack={quiet}"

        replay(tb, out, f"default/congestion-on-{quiet}-no-tp16 (twin)", variant(congestion, out, "quiet", on_quiet),
               "reproduced", 1)
        settle(tb)
        replay(tb, out, "default/machine-loss (replicas spread: twin)", loss, "reproduced", 1)
        settle(tb, 60)
        replay(tb, out, "default/ecc-one-card --twin", ecc, "reproduced", 0, "--twin", "--twin-port-base",
               str(args.port_base + 400))
    finally:
        tb.down(say=lambda _m: None)


def no_remediation(args: argparse.Namespace, out: Path) -> None:
    ecc = INCIDENTS / "ecc-one-card.yaml"
    config = TestbedConfig(nodes=3, port_base=args.port_base + 100, remediation=False,
                           state_dir=Path(tempfile.mkdtemp(prefix="incidents-")))
    tb = up(config, fleet.scaled(fleet.only(fleet.load("default", config.card_resource), TP8), {TP8: 2}))
    try:
        replay(tb, out, "no-remediation/ecc-one-card", ecc, "reproduced", 0)
        settle(tb)
        recorded(tb, out, "no-remediation/ecc-one-card", "no-remediation/its replay's journal, recorded", 0)
        settle(tb)
        replay(tb, out, "no-remediation/ecc-one-card", ecc, "fixed", 1)
    finally:
        tb.down(say=lambda _m: None)


def packed(args: argparse.Namespace, out: Path) -> None:
    """The fragile model's replicas piled on one machine (the other cordoned while they start),
    then the fix: required anti-affinity, which spreads them over both."""
    loss = INCIDENTS / "machine-loss-every-replica.yaml"
    config = TestbedConfig(nodes=2, port_base=args.port_base + 200, state_dir=Path(tempfile.mkdtemp(prefix="inc-")))
    tb = Testbed(config.validate())
    tb.up(say=lambda _m: None, timeout=300)
    try:
        kube = tb.kube()
        try:
            first, second = sorted(n.metadata.name for n in kube.list_nodes())
            kube.patch_node(second, {"spec": {"unschedulable": True}})
            objects = fleet.scaled(fleet.only(fleet.load("default", config.card_resource), FRAGILE), {FRAGILE: 2})
            fleet.deploy(kube, timing.stamp(objects, "default"), timeout=120, say=lambda _m: None)
            kube.patch_node(second, {"spec": {"unschedulable": False}})
            print(f"packed: {FRAGILE} on {sorted(nodes_running(kube, FRAGILE))}", flush=True)
        finally:
            kube.close()
        settle(tb, 20)
        replay(tb, out, "packed/machine-loss-every-replica", loss, "reproduced", 0)
        settle(tb, 60)
        kube = tb.kube()
        try:  # its pods go first: the rule counts the old ones too, and a rolling update would wait on itself
            spread = {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"kilocard.io/model": FRAGILE}},
                "topologyKey": "kubernetes.io/hostname"}]}
            for replicas in (0, 2):
                objects = fleet.scaled(fleet.only(fleet.load("default", config.card_resource), FRAGILE),
                                       {FRAGILE: replicas})
                for o in objects:
                    if o["kind"] == "Deployment":
                        o["spec"]["template"]["spec"]["affinity"] = {"podAntiAffinity": spread}
                fleet.deploy(kube, timing.stamp(objects, "default"), timeout=180, say=lambda _m: None)
            print(f"anti-affinity: {FRAGILE} on {sorted(nodes_running(kube, FRAGILE))}", flush=True)
        finally:
            kube.close()
        settle(tb, 20)
        replay(tb, out, "packed+anti-affinity/machine-loss-every-replica", loss, "fixed", 0)
    finally:
        tb.down(say=lambda _m: None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-base", type=int, default=27443)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "incidents")
    parser.add_argument("--only", choices=("default", "no-remediation", "packed"), action="append",
                        help="only these testbeds")
    parser.add_argument("--replay", action="append", default=[], help="only the replays whose name holds this")
    args = parser.parse_args()
    PICKED.extend(args.replay)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    for name, step in (("no-remediation", no_remediation), ("packed", packed), ("default", default_testbed)):
        if not args.only or name in args.only:
            step(args, args.out)
    (args.out / "incidents.json").write_text(json.dumps(ROWS, indent=2))
    wrong = [r for r in ROWS if r["exit"] != r["wanted"]]
    print(f"{len(ROWS)} replays, {len(ROWS) - len(wrong)} as wanted, in {time.monotonic() - started:.0f} s; "
          f"table {args.out / 'incidents.json'}")
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
