"""Device taints from the DRA driver: after an XID on a card, has the node's DRA driver tainted that
card's device in its ResourceSlice, within budget? The per-card twin of probes/remediation.py
(which judges the node): a driver that marks the failed card (KEP-5055's device taints; NVIDIA's
dra-driver-nvidia-gpu puts `gpu.nvidia.com/xid=<xid>:NoSchedule` on it) keeps new claims off that
card alone, while the rest of the node serves on.

The verdict (`judge`, pure) is per card. A card's device is the one named `gpu-<card>` in its
node's slices (NVIDIA's driver names a full GPU `gpu-<minor>`, as dra-card-isolate assumes). A
taint counts when its effect keeps claims off (NoSchedule or NoExecute: an informational one,
effect None, which NVIDIA's driver puts for the XIDs it deems application errors, is shown but
does not count) and it was added (`timeAdded`, in the API's whole seconds) in or after the second
its fault was applied. Each card is
    tainted    within the budget of its fault's apply time
    late       tainted only after its budget ran out          -> failed, named
    untainted  not tainted, its budget run out                 -> failed, named, seconds since the fault
    pending    not tainted yet, still within budget            -> not a pass (outcome "pending")
    stale      tainted only since before its fault (or at no stated time): this fault's own taint
               cannot be told                                  -> not a pass (outcome "unknown")
    reverted   not tainted now, its fault reverted before the probe looked (the driver may have
               lifted the taint with the card reset): not told  -> not a pass (outcome "unknown")
It passes only when every card is tainted; a run with no XID fault has nothing to judge (outcome
"unknown"). A pool's slices of an older generation are being replaced by its driver, and skipped.

`within` (the thin fetcher) judges until the verdict is decided: a bounded poll, not a watch, with
pauses growing from FIRST_PAUSE to MAX_PAUSE, none past the moment a pending card's budget runs out;
each round one LIST of the driver's slices per node the faults hit (field selectors on driver and
node). A taint carries its own time, so how often it is looked at changes no verdict, only how soon
one is given; and the run's follower does not follow ResourceSlices, so a watch would be one more
stream kept open for a single probe.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chaos.vocabulary import epoch
from probes.verdict import NO_DATA, Contract, Verdict, budgeted, failed, passed

if TYPE_CHECKING:
    from chaos.kube import Kube

DEVICE_NAME = "gpu-{card}"
KEEPS_OFF = ("NoSchedule", "NoExecute")
FIRST_PAUSE, MAX_PAUSE = 0.5, 5.0


@dataclass(frozen=True)
class DeviceTaint:
    """One taint of one device, as its driver's ResourceSlice lists it."""

    node: str
    device: str
    key: str
    value: str
    effect: str
    added: float | None  # timeAdded, epoch seconds (None: not stated)

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


@dataclass(frozen=True)
class XidFault:
    """An XID fault of the run, on one card."""

    node: str
    card: int
    applied_at: float  # epoch seconds
    reverted: bool = False  # reverted before the probe looked


def taints_of(slices: Iterable[dict[str, Any]]) -> list[DeviceTaint]:
    """Every device taint in ResourceSlices (plain JSON) of their pools' newest generation."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (spec.get("driver", ""), pool.get("name", ""))
        newest[key] = max(newest.get(key, 0), int(pool.get("generation", 0)))
    found = []
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        if int(pool.get("generation", 0)) < newest[(spec.get("driver", ""), pool.get("name", ""))]:
            continue
        node = spec.get("nodeName") or pool.get("name", "")
        found += [DeviceTaint(node, d["name"], t["key"], t.get("value", ""), t["effect"], epoch(t.get("timeAdded")))
                  for d in spec.get("devices") or [] for t in d.get("taints") or []]
    return found


CONTRACTS = (
    Contract(
        "devices_tainted_within", "probe",
        asserts="for every XID fault of the run, its card's device (`gpu-<card>` in its node's newest "
                "ResourceSlices) carries a NoSchedule or NoExecute taint added within `budget` s of that fault",
        time_zero="each XID fault's own apply time (ledger)",
        interval="[fault, fault + budget] per card, judged by the taint's own timeAdded (whole seconds: a taint "
                 "stamped in the fault's second is its own), polled until decided",
        missing="an informational taint (effect None) does not count; a taint from before the fault, or one of "
                "no stated time, is unknown (stale); a fault reverted before the probe saw its taint is unknown; "
                "a run with no XID fault is unknown",
        exceptions="the apiserver not answering: unknown; a 4xx or a bug: error",
        outcomes=(("tainted", "ok: every card tainted within its budget"),
                  ("not_tainted", "failed: a card tainted late, or not at all once its budget ran out"),
                  ("pending", "failed: a card not tainted yet (the probe waits this out)"),
                  ("unknown", "stale, reverted, or no XID fault")),
        judge=("probes.device_taints.judge", "probes.device_taints._card")),
)


# --- the judge (pure) -------------------------------------------------------------------------------
def judge(taints: Iterable[DeviceTaint], faults: Iterable[XidFault], budget: float, now: float) -> Verdict:
    """Passes when every card under an XID fault was tainted within `budget` s of its fault;
    fails naming each card that was not (or not yet: outcome "pending")."""
    faults = sorted(faults, key=lambda f: (f.node, f.card, f.applied_at))
    if not faults:
        return failed(f"the run has no XID fault applied: no card to judge: {NO_DATA}", outcome="unknown",
                      **budgeted(budget, None), cards=[])
    on: dict[tuple[str, str], list[DeviceTaint]] = defaultdict(list)
    for t in taints:
        on[(t.node, t.device)].append(t)
    cards = [_card(f, on[(f.node, DEVICE_NAME.format(card=f.card))], budget, now) for f in faults]
    details = {**budgeted(budget, None), "cards": cards}
    for states, outcome, say in ((("late", "untainted"), "not_tainted", f"not tainted within {budget:g} s"),
                                 (("stale", "reverted"), "unknown", f"whose own taint cannot be told: {NO_DATA}"),
                                 (("pending",), "pending", f"not tainted yet, still within {budget:g} s")):
        named = [c for c in cards if c["state"] in states]
        if named:
            return failed(f"{len(named)} of {len(cards)} cards under an XID {say}: "
                          f"{'; '.join(c['why'] for c in named)}", outcome=outcome, **details)
    slowest = max(cards, key=lambda c: c["seconds"])
    return passed(f"every card under an XID tainted within {budget:g} s ({len(cards)} judged; slowest: "
                  f"{slowest['why']})", outcome="tainted", impact_seen=True,
                  **{**details, **budgeted(budget, slowest["seconds"])})


def _card(f: XidFault, found: list[DeviceTaint], budget: float, now: float) -> dict[str, Any]:
    device = DEVICE_NAME.format(card=f.card)
    where = f"node {f.node} {device} (card {f.card})"
    keeping = [t for t in found if t.effect in KEEPS_OFF]
    # timeAdded has whole seconds: a taint stamped in the second the fault was applied is its own.
    timed = [(t.added, t) for t in keeping if t.added is not None and t.added > f.applied_at - 1.0]
    seconds, taint = now - f.applied_at, None
    if timed:
        added, taint = min(timed, key=lambda at: at[0])
        seconds = max(0.0, added - f.applied_at)
        state = "late" if seconds > budget else "tainted"
        why = f"{where} tainted {taint} {seconds:.1f} s after its XID fault"
    elif keeping:
        taint, state = keeping[0], "stale"
        why = f"{where} tainted {taint} since before its XID fault of {seconds:.1f} s ago, or at no stated time"
    elif f.reverted:
        state = "reverted"
        why = f"{where} not tainted, its XID fault reverted before this probe looked (the taint may be gone)"
    else:
        state = "pending" if seconds <= budget else "untainted"  # a taint at the budget's end is in time
        shown = f" (only {', '.join(map(str, found))})" if found else ""
        why = f"{where} not tainted {seconds:.1f} s after its XID fault{shown}"
    return {"node": f.node, "card": f.card, "device": device, "applied_at": f.applied_at, "state": state,
            "seconds": seconds, "taint": None if taint is None else str(taint), "taints": [str(t) for t in found],
            "why": why}


# --- the thin fetcher ---------------------------------------------------------------------------------
def fetch(kube: Kube, driver: str, nodes: Iterable[str]) -> list[DeviceTaint]:
    """The device taints of the driver's slices on `nodes`, one LIST each."""
    return [t for listed in kube.batch(lambda n: kube.list_resource_slices(driver, n), sorted(set(nodes)))
            for t in taints_of(listed)]


def within(kube: Kube, faults: list[XidFault], budget: float, driver: str) -> Verdict:
    """Judge the driver's taints until the verdict is decided (see the module's docstring)."""
    pause = FIRST_PAUSE
    while True:
        now = time.time()  # before the LIST: what it shows is at least as late as `now`
        verdict = judge(fetch(kube, driver, [f.node for f in faults]), faults, budget, now)
        if verdict.details.get("outcome") != "pending":
            return verdict
        decided = min(c["applied_at"] + budget for c in verdict.details["cards"] if c["state"] == "pending")
        time.sleep(min(pause, max(0.0, decided - time.time())))
        pause = min(2 * pause, MAX_PAUSE)
