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


def binary() -> str:
    path = shutil.which("prometheus")
    if not path:
        raise KilocardError("prometheus is not installed: 'apt-get install prometheus' (./bootstrap does it)")
    return path


def write_config(target: Path, simulator_port: int, apiserver_port: int, scrape_seconds: float,
                 ca: Path, cert: Path, key: Path) -> Path:
    interval = f"{int(scrape_seconds * 1000)}ms"
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": interval},
        "scrape_configs": [
            {"job_name": "vllm", "honor_labels": True, "metrics_path": "/metrics",
             "static_configs": [{"targets": [f"127.0.0.1:{simulator_port}"]}]},
            {"job_name": "dcgm-exporter", "honor_labels": True, "metrics_path": "/dcgm/metrics",
             "static_configs": [{"targets": [f"127.0.0.1:{simulator_port}"]}]},
            # Large and slow-changing: every 10 s is plenty and keeps the apiserver's CPU down.
            {"job_name": "kube-apiserver", "scheme": "https", "scrape_interval": "10s", "scrape_timeout": "5s",
             "tls_config": {"ca_file": str(ca), "cert_file": str(cert), "key_file": str(key)},
             "static_configs": [{"targets": [f"127.0.0.1:{apiserver_port}"]}]},
        ],
    }
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target
