"""Print the default fleet's healthy P95 TTFT and ITL from the real Prometheus, with the exact
PromQL users run, against the load model's truth and the histogram bucket that holds it.

    .venv/bin/python bench/fleet_calibration.py [--port-base 26443] [--settle 70]

Starts a 128-node testbed with the default fleet in a temporary state folder, lets a full
1-minute rate window fill, queries, and stops it. Not a test.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from prometheus_api_client import PrometheusConnect

from testbed import fleet
from testbed.cluster import Testbed
from testbed.config import TestbedConfig
from testbed.simulator import model as m

TTFT = "histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[1m])))"
ITL = "histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:inter_token_latency_seconds_bucket[1m])))"


def bucket(value: float) -> str:
    lower = 0.0
    for bound in m.TTFT_BUCKETS:
        if value <= bound:
            return f"({lower:g}, {bound:g}]"
        lower = bound
    return f"({lower:g}, +Inf)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-base", type=int, default=26443)
    parser.add_argument("--settle", type=float, default=70.0, help="seconds of traffic before querying")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kilocard-calibration-") as state:
        tb = Testbed(TestbedConfig(port_base=args.port_base, state_dir=Path(state)).validate())
        tb.up(say=lambda _m: None)
        try:
            kube = tb.kube()
            fleet.deploy(kube, fleet.load("default", tb.config.card_resource), say=print)
            kube.close()
            time.sleep(args.settle)
            prom = PrometheusConnect(tb.prometheus_url)
            ttft = {r["metric"]["model_name"]: float(r["value"][1]) for r in prom.custom_query(TTFT)}
            itl = {r["metric"]["model_name"]: float(r["value"][1]) for r in prom.custom_query(ITL)}
            print(f"\n{TTFT}\n")
            print(f"{'model':<20} {'P95 TTFT (PromQL)':>18} {'model truth':>12} {'truth bucket':>14} {'P95 ITL':>8}")
            for model in sorted(ttft):
                p = m.profile_for(model)
                truth = m.ttft_p95(p.service_rate, 0.25 * p.service_rate)
                print(f"{model:<20} {ttft[model] * 1000:>15.0f} ms {truth * 1000:>9.0f} ms {bucket(truth):>14} "
                      f"{itl.get(model, float('nan')) * 1000:>5.0f} ms")
        finally:
            tb.down(say=lambda _m: None)


if __name__ == "__main__":
    main()
