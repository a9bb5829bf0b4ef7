"""The simulator's expositions: engine metrics per replica and dcgm-exporter metrics per card.

Engine metrics go through prometheus_client, as vLLM and SGLang themselves do, with the real
names, types, buckets and labels (`model_name`, `engine`, plus `pod` and `namespace`, which a
Prometheus pod scrape adds). A replica labelled `kilocard.io/engine: sglang` exports SGLang's
names (`sglang:time_to_first_token_seconds`, `sglang:num_queue_reqs`, ...) and buckets; every
other replica vLLM V1's.
Trap (measured, shared/reference/gpu-inference-facts.md addendum): prometheus_client >= 0.23
writes `vllm:` as `vllm_` in OpenMetrics output, which Prometheus 2.x negotiates first. The
simulator serves the plain text format by default, so the documented PromQL
(`vllm:time_to_first_token_seconds_bucket`) finds the series; `negotiate=True` serves whatever
the scraper asks for, reproducing a fleet whose series land as `vllm_...`.

dcgm-exporter is a Go program whose lines prometheus_client cannot reproduce (it names counter
TYPE lines `<name>_total`), so its format is rendered here as the exporter's template does:
`NAME{gpu,UUID,pci_bus_id,device,modelName,Hostname,DCGM_FI_DRIVER_VERSION[,container,namespace,pod]}`.
The host label is `Hostname` in every release up to 4.5.3-4.8.2 and `hostname` after; both can be
served (`hostname_label`), and consumers must accept both.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from testbed.simulator import model as m
from testbed.simulator.world import World

ENGINE_LABELS = ["model_name", "engine", "namespace", "pod"]
DRIVER_VERSION = "550.54.15"
XID_MESSAGES = {0: "No Error", 48: "Double Bit ECC Error", 63: "ECC page retirement or row remapping recording event",
                64: "ECC page retirement or row remapper recording failure", 74: "NVLINK Error",
                79: "GPU has fallen off the bus", 94: "Contained ECC error", 95: "Uncontained ECC error"}


def _buckets(bounds: tuple[float, ...], counts: list[float], total: float) -> list[tuple[str, float]]:
    return [(repr(float(b)), c) for b, c in zip(bounds, counts, strict=True)] + [("+Inf", total)]


def _engine_families(e: m.Engine) -> dict[str, Metric]:
    """One engine's metric families, named as that engine names them (vLLM V1, SGLang)."""
    p = e.prefix
    return {
        "ttft": HistogramMetricFamily(f"{p}time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                                      labels=ENGINE_LABELS),
        "itl": HistogramMetricFamily(f"{p}inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                                     labels=ENGINE_LABELS),
        "e2e": HistogramMetricFamily(f"{p}e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                                     labels=ENGINE_LABELS),
        "running": GaugeMetricFamily(f"{p}{e.running}", "Number of requests in model execution batches.",
                                     labels=ENGINE_LABELS),
        "waiting": GaugeMetricFamily(f"{p}{e.waiting}", "Number of requests waiting to be processed.",
                                     labels=ENGINE_LABELS),
        "kv": GaugeMetricFamily(f"{p}{e.kv_usage}", "KV-cache usage. 1 means 100 percent usage.", labels=ENGINE_LABELS),
        "success": CounterMetricFamily(f"{p}{e.requests}", "Count of successfully processed requests.",
                                       labels=[*ENGINE_LABELS, "finished_reason"]),
        "prompt": CounterMetricFamily(f"{p}prompt_tokens", "Number of prefill tokens processed.", labels=ENGINE_LABELS),
        "generation": CounterMetricFamily(f"{p}generation_tokens", "Number of generation tokens processed.",
                                          labels=ENGINE_LABELS),
    }


class VllmCollector(Collector):
    """Every Ready replica's engine metrics (vLLM's or SGLang's names, per replica), and the
    simulated gateway's request counters."""

    def __init__(self, world: World) -> None:
        self.world = world

    def collect(self) -> Iterator[Metric]:
        w = self.world
        families = {name: _engine_families(e) for name, e in m.ENGINES.items()}
        requests = CounterMetricFamily("kilocard_sim_requests", "Requests the simulated gateway received.",
                                       labels=["model_name", "namespace"])
        failed = CounterMetricFamily("kilocard_sim_requests_failed",
                                     "Requests the simulated gateway could not serve, by reason.",
                                     labels=["model_name", "namespace", "reason"])
        with w.lock:
            for key, members in w.replicas().items():
                lead = members[0]
                s = w.series.get(key)
                if s is None or not all(p.ready for p in members) or any(p.node in w.lost for p in members):
                    continue  # an engine exports once it serves (a replacement starts from zero), and not once dead
                f, e = families[s.engine.name], s.engine
                labels = [lead.served_name, "0", lead.namespace, lead.name]
                f["ttft"].add_metric(labels, _buckets(e.ttft_buckets, s.ttft_buckets, s.ttft_count), s.ttft_sum)
                f["itl"].add_metric(labels, _buckets(e.itl_buckets, s.itl_buckets, s.itl_count), s.itl_sum)
                f["e2e"].add_metric(labels, _buckets(e.e2e_buckets, s.e2e_buckets, s.e2e_count), s.e2e_sum)
                f["running"].add_metric(labels, s.running)
                f["waiting"].add_metric(labels, s.waiting)
                f["kv"].add_metric(labels, s.kv_usage)
                f["success"].add_metric([*labels, "stop"], s.success)
                f["prompt"].add_metric(labels, s.prompt_tokens)
                f["generation"].add_metric(labels, s.generation_tokens)
            for (namespace, model), total in w.requests.items():
                requests.add_metric([w.served_names.get(model, model), namespace], total)
            for (namespace, model, reason), count in w.failed.items():
                failed.add_metric([w.served_names.get(model, model), namespace, reason], count)
        for engine in families.values():
            yield from (f for f in engine.values() if f.samples)
        yield from (requests, failed)


# (name, type, help) as in dcgm-exporter's default-counters.csv (ECC lines enabled, as a fleet
# that alerts on ECC must do), plus row-remap pending, which a remediator watches.
DCGM_FIELDS = (
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda c: round(35 + 40 * c.utilisation)),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda c: 90 + 560 * c.utilisation * c.speed),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda c: round(100 * c.utilisation)),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
     lambda c: round(72000 * (c.utilisation > 0) + 1200)),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
     lambda c: round(81559 - 72000 * (c.utilisation > 0) - 1200)),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", lambda c: c.xid),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.",
     lambda c: c.sbe_vol),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.",
     lambda c: c.dbe_vol),
    ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Total number of single-bit persistent ECC errors.",
     lambda c: c.sbe_agg),
    ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Total number of double-bit persistent ECC errors.",
     lambda c: c.dbe_agg),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors",
     lambda c: c.remapped_uncorrectable),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors",
     lambda c: c.remapped_correctable),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", lambda c: 0),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether remapping of rows is pending", lambda c: c.remap_pending),
)


# The counters faults move and probes, the remediator and the alerts read: what a fleet of
# thousands keeps when it trims dcgm-exporter's collectors (the large testbed serves only these).
HEALTH_FIELDS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_XID_ERRORS",
                 "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ROW_REMAP_PENDING")
FIELD_SETS = {"all": tuple(name for name, *_ in DCGM_FIELDS), "health": HEALTH_FIELDS}


def _label_value(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class DcgmRenderer:
    """Every card of every node, in dcgm-exporter's text format. A card's label text changes only
    when a pod comes or goes, so it is kept between scrapes: at 10,000 cards formatting the labels
    anew was most of the simulator's CPU."""

    def __init__(self, world: World, hostname_label: str = "Hostname", fields: str = "all") -> None:
        self.world = world
        self.hostname_label = hostname_label
        self.fields = [f for f in DCGM_FIELDS if f[0] in FIELD_SETS[fields]]
        self._labels: dict[tuple[str, int], tuple[Any, str]] = {}

    def _label_text(self, node: str, index: int, card: Any) -> str:
        pod = self.world.pod_on_card(node, index)
        key = (pod.namespace, pod.name) if pod is not None else None
        cached = self._labels.get((node, index))
        if cached is not None and cached[0] == key:
            return cached[1]
        labels = {
            "gpu": str(index), "UUID": card.uuid, "pci_bus_id": f"00000000:{0x18 + 0x10 * index:02X}:00.0",
            "device": f"nvidia{index}", "modelName": self.world.product, self.hostname_label: node,
            "DCGM_FI_DRIVER_VERSION": DRIVER_VERSION,
        }
        if pod is not None:
            labels.update({"container": "vllm", "namespace": pod.namespace, "pod": pod.name})
        text = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
        self._labels[(node, index)] = (key, text)
        return text

    def render(self) -> str:
        world = self.world
        with world.lock:
            rows = [(self._label_text(node, index, card), card) for (node, index), card in sorted(world.cards.items())
                    if node not in world.lost]  # a dead node's exporter is not scraped: its series go stale
            lines = []
            for name, kind, doc, value in self.fields:
                lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]
                xid = name == "DCGM_FI_DEV_XID_ERRORS"
                for text, card in rows:
                    if xid:
                        msg = _label_value(XID_MESSAGES.get(card.xid, "Unknown Error"))
                        text = f'{text},err_code="{card.xid}",err_msg="{msg}"'
                    v = value(card)
                    lines.append(f"{name}{{{text}}} {v:.6f}" if isinstance(v, float) else f"{name}{{{text}}} {v}")
        return "\n".join(lines) + "\n"


def render_dcgm(world: World, hostname_label: str = "Hostname", fields: str = "all") -> str:
    return DcgmRenderer(world, hostname_label, fields).render()
