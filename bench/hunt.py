"""`kilocard hunt` on the default testbed, then on the same fleet made fragile on purpose, each
with its five weakest domains confirmed on twins: the ranking, and predicted against observed.

Made fragile: llama-2-7b-fragile's eight replicas pinned to one machine (a nodeSelector on its
hostname). That machine must rank first among the nodes. (A rack with no room is the unit
tests' case: tests/unit/test_hunt.py.)

    .venv/bin/python bench/hunt.py [--confirm 5] [--port-base 28443] [--out reports/examples/hunt]

Not a test: about 20 minutes (a fresh twin for each confirmation).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from chaos.kube import Kube
from probes import snapshot as snap
from testbed import fleet, timing
from testbed.cluster import Testbed
from testbed.config import TestbedConfig

NS = fleet.DEFAULT_NAMESPACE
FRAGILE = "llama-2-7b-fragile"


def hunt(tb: Testbed, out: Path, confirm: int, twin_port: int) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "hunt", "--kubeconfig", str(tb.paths.kubeconfig),
                           "--prometheus-url", tb.prometheus_url, "--window", "1m", "--confirm", str(confirm),
                           "--twin-port-base", str(twin_port), "--page", str(out), "-o", "json"],
                          capture_output=True, text=True, env={**os.environ, "CI": "true"}, check=False)
    if done.returncode != 0:
        raise SystemExit(f"hunt failed ({done.returncode}): {done.stderr[-2000:]}")
    found: dict[str, Any] = json.loads(done.stdout)  # -o json: stdout is the JSON alone
    found["wall_seconds"] = round(time.monotonic() - started, 1)
    return found


def show(title: str, found: dict[str, Any]) -> None:
    print(f"\n{title}: {found['domains']}; predicted in {found['seconds']} s, with confirmations "
          f"{found['wall_seconds']} s")
    for i, d in enumerate([d for d in found["ranked"] if d["severity"] != "none"][:10], 1):
        models = "; ".join(f"{m['model']} {m['lost']}/{m['replicas']} lost, {m['nowhere']} for good, SLO {m['slo']}"
                           for m in d["models"])
        print(f"{i:>3}. {d['domain']} [{d['severity']}] {models}")
        if "confirmed" in d:
            print(f"       twin: {d['confirmed']['summary']}")


def fragile(kube: Kube, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fleet with the fragile model's replicas all on one machine."""
    free = [n.name for n in snap.fetch(kube).nodes if n.cards_free >= 8]
    shared = sorted(free)[-1]
    made = copy.deepcopy(objects)
    for o in made:
        if o["kind"] == "Deployment" and o["metadata"]["name"] == FRAGILE:
            o["spec"]["template"]["spec"].setdefault("nodeSelector", {})["kubernetes.io/hostname"] = shared
    print(f"made fragile: {FRAGILE}'s replicas pinned to {shared}")
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--confirm", type=int, default=5)
    parser.add_argument("--port-base", type=int, default=28443)
    parser.add_argument("--out", type=Path, default=Path("reports/examples/hunt"))
    parser.add_argument("--skip-default", action="store_true", help="the fragile fleet's hunt alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tb = Testbed(TestbedConfig(port_base=args.port_base, state_dir=Path(d)).validate())
        tb.up(say=lambda _m: None, timeout=300)
        try:
            kube = tb.kube()
            objects = timing.stamp(fleet.load("default", tb.config.card_resource), "default")
            fleet.deploy(kube, objects, timeout=300, say=print, prometheus=tb.prometheus_url)
            if not args.skip_default:
                time.sleep(70)  # a rate window of served requests before the loads are read
                show("default testbed", hunt(tb, args.out / "default", args.confirm, args.port_base + 1000))
            fleet.deploy(kube, fragile(kube, objects), timeout=300, say=print)
            time.sleep(70)
            show("fragile testbed", made := hunt(tb, args.out / "fragile", args.confirm, args.port_base + 1000))
            kube.close()
        finally:
            tb.down(say=lambda _m: None)
    first = [d for d in made["ranked"] if d["kind"] == "node"][0]
    print(f"\nfirst node of the fragile fleet: {first['domain']} [{first['severity']}]; pages in {args.out}")
    return 0 if first["severity"] == "outage" else 1


if __name__ == "__main__":
    raise SystemExit(main())
