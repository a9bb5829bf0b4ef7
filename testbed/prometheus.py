"""The testbed's Prometheus (Debian's `prometheus` package): its configuration and binary.

It scrapes the fleet simulator twice, as a real cluster scrapes vLLM pods and dcgm-exporter
DaemonSet pods (honouring their `pod`/`namespace` labels, as pod-scrape relabelling yields), and
the kube-apiserver's own /metrics (apiserver_request_total, for counting a tool's API calls).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from chaos.errors import KilocardError
from testbed.config import Tuning
from testbed.simulator import ascend, dcgm


def binary() -> str:
    path = shutil.which("prometheus")
    if not path:
        raise KilocardError("prometheus is not installed: 'apt-get install prometheus' (./bootstrap does it)")
    return path


# The alerts a production stack keeps on these signals (their `for:` left out: a postmortem wants
# the first moment). They are what `kilocard record` reads back as an incident's faults (the ECC and
# XID alerts) and as its symptoms (the TTFT alert, the model down), from the ALERTS series; no
# Alertmanager needed.
_TTFT = '{__name__=~"vllm:time_to_first_token_seconds_bucket|vllm_time_to_first_token_seconds_bucket"}'
ALERTS = {"groups": [{"name": "kilocard-testbed", "rules": [
    {"alert": "GpuDoubleBitEccErrors", "expr": dcgm.DBE_QUERY, "labels": {"severity": "critical"}},
    {"alert": "GpuCriticalXid", "expr": dcgm.XID_QUERY, "labels": {"severity": "critical"}},
    {"alert": "NpuChipUnhealthy", "expr": ascend.FATAL_QUERY, "labels": {"severity": "critical"}},
    {"alert": "ReplicaTtftP95High", "labels": {"severity": "page"},
     "expr": f"histogram_quantile(0.95, sum by (le, namespace, model_name, pod) (rate({_TTFT}[10s]))) > 0.5"},
    # The gateway answering a model's requests with no Ready replica to send them to (a 503 at the
    # front door): the model is down, whatever its pods say.
    {"alert": "ModelUnavailable", "labels": {"severity": "page"},
     "expr": 'sum by (namespace, model_name) (rate(kilocard_sim_requests_failed_total{reason="no_ready_replica"}'
             '[10s])) > 0'},
]}]}


def _ms(seconds: float) -> str:
    return f"{int(seconds * 1000)}ms"


def write_config(target: Path, simulator_port: int, apiserver_port: int, tuning: Tuning,
                 ca: Path, cert: Path, key: Path, exporter: str = "dcgm") -> Path:
    """`exporter`: which card exporter the fleet runs, dcgm-exporter or Ascend's npu-exporter."""
    engines, cards = _ms(tuning.engine_scrape_seconds), _ms(tuning.dcgm_scrape_seconds)
    config = {
        "global": {"scrape_interval": engines, "evaluation_interval": engines, "scrape_timeout": engines},
        "scrape_configs": [
            {"job_name": "vllm", "honor_labels": True, "metrics_path": "/metrics",
             "static_configs": [{"targets": [f"127.0.0.1:{simulator_port}"]}]},
            {"job_name": f"{exporter}-exporter", "honor_labels": True, "metrics_path": f"/{exporter}/metrics",
             "scrape_interval": cards, "scrape_timeout": cards,
             "static_configs": [{"targets": [f"127.0.0.1:{simulator_port}"]}]},
            # Large and slow-changing: every 10 s is plenty and keeps the apiserver's CPU down.
            {"job_name": "kube-apiserver", "scheme": "https", "scrape_interval": "10s", "scrape_timeout": "5s",
             "tls_config": {"ca_file": str(ca), "cert_file": str(cert), "key_file": str(key)},
             "static_configs": [{"targets": [f"127.0.0.1:{apiserver_port}"]}]},
        ],
    }
    rules = target.parent / "alerts.yml"
    rules.write_text(yaml.safe_dump(ALERTS, sort_keys=False))
    config["rule_files"] = [str(rules)]
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target
