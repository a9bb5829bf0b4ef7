"""How often each part of a fleet fails, and what its failure does: the field rates a month of
failures is drawn from, each with its source.

The defaults are Meta's counts for the 54-day Llama 3 405B pre-training snapshot on 16,384 H100
GPUs in 2,048 hosts of eight ("The Llama 3 Herd of Models", section 3.3.4, Table 5: 419
unexpected interruptions). The counts are used, not the table's percentages (its 30.1 % for 148
faulty GPUs is not 148 / 419). A training job stops on any of them; a serving fleet loses what
the failed part holds, so each cause is put on the part it names:

    gpu       faulty GPU 148, HBM3 72, SRAM 19, GPU system processor 17, silent data
              corruption 6, thermal interface and sensor 6 = 268 per 884,736 card-days
    host      unplanned host maintenance 32, NIC 7, SSD 3, power supply 3, server chassis 2,
              IO expansion board 2, CPU 2, system memory 2 = 53 per 110,592 host-days
    network   network switch or cable 35 per 110,592 host-days (the host's link)
    engine    software bug 54, NCCL watchdog timeouts 7, dependency 2 = 63 per 884,736
              card-days: training software, the closest published figure for an engine crash
              (a study of 156 high-severity LLM-serving incidents, arXiv 2511.07424, puts about
              60 % of them in the inference engine, but gives no rate)

Repair times are not in any of these sources: the defaults are assumptions, said as such, and
every one is a flag.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from chaos.errors import SpecError

LLAMA3 = "Llama 3 Herd of Models, sec. 3.3.4, Table 5 (54 days, 16,384 H100 in 2,048 hosts)"
CARD_DAYS = 16_384 * 54
HOST_DAYS = 2_048 * 54
EFFECTS = ("node", "card", "replica")


@dataclass(frozen=True)
class FailureClass:
    """A kind of failure: on what (a card or a node), how often, what it takes, for how long."""

    name: str
    per: str  # card | node: the unit whose count scales the rate
    per_day: float  # failures per unit per day
    effect: str  # node: the node is out until repaired (its replicas move); card: one card is
    #              (its pod moves, the node keeps the rest); replica: the engine restarts in place
    repair_hours: float  # mean time until the failed part serves again (exponential); 0 for replica
    source: str
    repair_source: str = "assumed: no published figure"

    def per_month(self, units: int) -> float:
        return self.per_day * units * 30


DEFAULTS = (
    FailureClass("gpu", "card", 268 / CARD_DAYS, "node", 72.0,
                 f"{LLAMA3}: faulty GPU 148, HBM3 72, SRAM 19, GPU system processor 17, silent data corruption 6, "
                 "thermal 6 = 268 per 884,736 card-days; the node is quarantined, as NVSentinel and the testbed's "
                 "remediator do"),
    FailureClass("host", "node", 53 / HOST_DAYS, "node", 24.0,
                 f"{LLAMA3}: host maintenance 32, NIC 7, SSD 3, power supply 3, chassis 2, IO board 2, CPU 2, "
                 "system memory 2 = 53 per 110,592 host-days"),
    FailureClass("network", "node", 35 / HOST_DAYS, "node", 4.0,
                 f"{LLAMA3}: network switch or cable 35 per 110,592 host-days"),
    FailureClass("engine", "card", 63 / CARD_DAYS, "replica", 0.0,
                 f"{LLAMA3}: software bug 54, NCCL watchdog 7, dependency 2 = 63 per 884,736 card-days (training "
                 "software; no serving engine's crash rate is published)", "none: the engine restarts in place"),
)


def adjusted(classes: tuple[FailureClass, ...], given: list[str]) -> tuple[FailureClass, ...]:
    """The classes with `NAME.FIELD=VALUE` settings applied (per_day, repair_hours, effect)."""
    by_name = {c.name: c for c in classes}
    for setting in given:
        target, _, value = setting.partition("=")
        name, _, field = target.partition(".")
        if name not in by_name or field not in ("per_day", "repair_hours", "effect"):
            raise SpecError(f"--rate {setting!r}: expected NAME.FIELD=VALUE, NAME one of {', '.join(by_name)}, FIELD "
                            "one of per_day, repair_hours, effect")
        if field == "effect":
            if value not in EFFECTS:
                raise SpecError(f"--rate {setting!r}: effect must be one of {', '.join(EFFECTS)}")
            by_name[name] = replace(by_name[name], effect=value)
            continue
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not 0 <= number < float("inf"):
            raise SpecError(f"--rate {setting!r}: expected a number from 0")
        if field == "per_day":
            by_name[name] = replace(by_name[name], per_day=number, source="set on the command line")
        else:
            by_name[name] = replace(by_name[name], repair_hours=number, repair_source="set on the command line")
    return tuple(by_name.values())
