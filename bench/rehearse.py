"""`kilocard rehearse` on the testbed at 1,024 or 10,000 cards: the month's figures, the spares
curve, and the simulation's worst hour replayed on the testbed (`kilocard replay`, ten times
faster, the testbed's timing) with the observed SLO-minutes set beside the simulated ones; the
wall time of each part. The testbed's fleet runs at `--utilisation` of each replica's service
rate (the peak planned for), so the loads read, the months simulated and the replay all carry
the same traffic.

    .venv/bin/python bench/rehearse.py [--nodes 128 | --nodes 1250] [--utilisation 0.5] [--seeds 20]
        [--target 0.9999] [--port-base 30443] [--out reports/examples/rehearse-1k]

Not a test: about 10 minutes at 1,024 cards, 20 at 10,000.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from chaos.rehearsal import replay
from chaos.report import planning
from probes import slo
from testbed import fleet, timing
from testbed.cluster import Testbed
from testbed.config import TestbedConfig


def kilocard(tb: Testbed, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args, "--kubeconfig", str(tb.paths.kubeconfig),
                           "--prometheus-url", tb.prometheus_url], capture_output=True, text=True,
                          env={**os.environ, "CI": "true"}, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--utilisation", type=float, default=0.5)
    parser.add_argument("--target", default="0.9999")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--port-base", type=int, default=30443)
    parser.add_argument("--out", type=Path, default=Path("reports/examples/rehearse-1k"))
    args = parser.parse_args()
    walls: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        config = TestbedConfig(nodes=args.nodes, port_base=args.port_base, state_dir=folder / "testbed",
                               utilisation=args.utilisation).validate()
        tb = Testbed(config)
        started = time.monotonic()
        tb.up(say=lambda _m: None, timeout=600)
        try:
            kube = tb.kube()
            name = "large" if config.large else "default"
            objects = timing.stamp(fleet.load(name, config.card_resource), "default")
            fleet.deploy(kube, objects, timeout=900, say=print)
            kube.close()
            walls["testbed and fleet"] = time.monotonic() - started
            time.sleep(70)  # a rate window of served requests before the loads are read
            hour_file = args.out / "worst-hour.yaml"
            args.out.mkdir(parents=True, exist_ok=True)
            started = time.monotonic()
            done = kilocard(tb, "rehearse", "--target", args.target, "--seeds", str(args.seeds), "--window", "1m",
                            "--page", str(args.out), "--worst-hour", str(hour_file), "-o", "json")
            walls["rehearse"] = time.monotonic() - started
            if done.returncode != 0:
                raise SystemExit(f"rehearse failed ({done.returncode}): {done.stderr[-3000:]}")
            found: dict[str, Any] = json.loads(done.stdout)
            print("\n".join(line for line in done.stderr.splitlines() if line))
            hour = found.get("worst_hour")
            if hour and hour_file.exists():
                journal = folder / "replay.json"
                started = time.monotonic()
                played = kilocard(tb, "replay", str(hour_file), "-q", "--journal", str(journal))
                walls["replay of the worst hour"] = time.monotonic() - started
                print(played.stdout.strip().splitlines()[-1:] if played.stdout.strip() else played.stderr[-2000:])
                data = json.loads(journal.read_text()) if journal.exists() else {}
                times = [r["applied_at"] for r in (data.get("kilocard") or {}).get("faults") or []
                         if r.get("applied_at")]
                timeline = yaml.safe_load(hour_file.read_text())
                zero = min(times) if times else None
                prom = slo.connect(tb.prometheus_url)
                models = {}
                for key, minutes in hour["models"].items():
                    namespace, model = key.split("/", 1)
                    threshold = found["inputs"]["loads"][key]["slo_ttft_seconds"]
                    observed = None if zero is None else replay.observed_minutes(
                        prom, model, namespace, threshold, zero, zero + timeline["observe"], 10.0)
                    models[key] = {"simulated": minutes, "observed": observed}
                hour["replayed"] = {"how": f"kilocard replay {hour_file.name}, ten times faster",
                                    "verdict": f"exit {played.returncode}: "
                                               f"{(data.get('kilocard') or {}).get('reason', 'no journal')}",
                                    "models": models}
                planning.rehearse_page(found, args.out)
        finally:
            tb.down(say=lambda _m: None)
    for part, seconds in walls.items():
        print(f"wall time, {part}: {seconds:.1f} s")
    print(f"simulation: {found['seconds']}")
    print("\n".join(line for line in (hour or {}).get("replayed", {}).get("models", {}) and
                    [f"{k}: simulated {v['simulated']:g}, observed {v['observed']}" for k, v in
                     hour["replayed"]["models"].items()]))
    (args.out / "walls.json").write_text(json.dumps(walls, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
