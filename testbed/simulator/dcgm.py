"""The simulator's dcgm-exporter: metrics per card, and the queries consumers make of them.

dcgm-exporter is a Go program whose lines prometheus_client cannot reproduce (it names counter
TYPE lines `<name>_total`), so its format is rendered here as the exporter's template does:
`NAME{gpu,UUID,pci_bus_id,device,modelName,Hostname,DCGM_FI_DRIVER_VERSION[,container,namespace,pod]}`.
The host label is `Hostname` in every release up to 4.5.3-4.8.2 and `hostname` after; both can be
served (`hostname_label`), and consumers must accept both.
"""

from __future__ import annotations

from typing import Any

from testbed.simulator.world import World

DRIVER_VERSION = "550.54.15"
XID_MESSAGES = {0: "No Error", 48: "Double Bit ECC Error", 63: "ECC page retirement or row remapping recording event",
                64: "ECC page retirement or row remapper recording failure", 74: "NVLINK Error",
                79: "GPU has fallen off the bus", 94: "Contained ECC error", 95: "Uncontained ECC error"}


MAX_SM_CLOCK, IDLE_SM_CLOCK = 1980, 345  # MHz: an H100 SXM's boost clock, and its idle clock
# NVML's clock event (throttle) reasons, as DCGM reports them: the bits a slow card shows.
SW_POWER_CAP, APPLICATIONS_CLOCKS_SETTING = 0x4, 0x2


def sm_clock(card: Any) -> int:
    """Boost clock under load, slowed to the card's pace; the idle clock when it serves nothing."""
    return round(MAX_SM_CLOCK * card.pace()) if card.utilisation > 0 else IDLE_SM_CLOCK


def throttle_reasons(card: Any) -> int:
    via = card.throttled_via()
    return (SW_POWER_CAP if "power" in via else 0) | (APPLICATIONS_CLOCKS_SETTING if "clocks" in via else 0)


# (name, type, help) as in dcgm-exporter's default-counters.csv (ECC and clock throttle reason lines
# enabled, as a fleet that alerts on them must do), plus row-remap pending, which a remediator watches.
DCGM_FIELDS = (
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda c: round(35 + 40 * c.utilisation)),
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", lambda c: sm_clock(c)),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda c: 90 + 560 * c.utilisation * c.pace()),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons.", lambda c: throttle_reasons(c)),
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


# What consumers of these counters ask (the reference remediator, the testbed's alerts): DCGM's
# health checks fail on these XIDs. The host label is `Hostname` up to 4.5.3-4.8.2, `hostname` after.
CRITICAL_XIDS = (48, 64, 74, 79, 95, 119, 120, 140)
_CRITICAL_XID = f'DCGM_FI_DEV_XID_ERRORS{{err_code=~"{"|".join(map(str, CRITICAL_XIDS))}"}}'
DBE_QUERY = "max by (Hostname, hostname, gpu) (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL) > 0"
XID_QUERY = f"max by (Hostname, hostname, gpu, err_code) ({_CRITICAL_XID}) > 0"
FATAL_QUERY = f"{DBE_QUERY} or max by (Hostname, hostname, gpu) ({_CRITICAL_XID})"
# A slow card: held back while serving by a power or thermal reason (any bit from SW power cap,
# 0x4, to HW power brake, 0x80; PromQL has no bitwise and: a low byte of 4 or more has one), not
# by idling (0x1) or a clock setting someone chose (0x2).
HELD_QUERY = "max by (Hostname, hostname, gpu) ((DCGM_FI_DEV_CLOCK_THROTTLE_REASONS % 256) >= 4)"
# ... while it serves: an idle card's reasons say nothing of its speed.
SLOW_QUERY = f"{HELD_QUERY} and on (Hostname, hostname, gpu) DCGM_FI_DEV_GPU_UTIL > 0"
# The health conditions NVIDIA NVSentinel's monitors and platform connector write on a node for
# these (the remediator writes them as it does): (query, condition type, error code, text, action).
HEALTH_CHECKS = ((DBE_QUERY, "GpuMemWatch", "DCGM_FR_VOLATILE_DBE_DETECTED", "volatile double-bit ECC errors",
                  "RESTART_VM"),
                 (XID_QUERY, "SysLogsXIDError", "{err_code}", "XID {err_code}", "RESTART_BM"))


# The counters faults move and probes, the remediator and the alerts read: what a fleet of
# thousands keeps when it trims dcgm-exporter's collectors (the large testbed serves only these).
HEALTH_FIELDS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_XID_ERRORS",
                 "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ROW_REMAP_PENDING",
                 "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
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
