"""Did the cold-start path meet the fault? A registry outage (image-pull-failure) rehearses
nothing when the replacement never pulls: its image already on its node (imagePullPolicy
IfNotPresent), the outage on other nodes, or another registry blocked. "Recovered within budget"
then passes having tested only an ordinary restart. This verdict says whether the replacements
really failed their pulls first.

The verdict (`judge`, pure) reads the model's pods at each moment the cluster changed from time
zero on (the run's follower's record: probes.chaostoolkit.image_pulls_failed is its thin
fetcher). A replacement is a pod (by uid: a StatefulSet's keeps its name) not there at time zero.
It failed its pull when a container of it waited in ErrImagePull or ImagePullBackOff before it
was first Ready.
"""

from __future__ import annotations

from dataclasses import dataclass

from chaos.vocabulary import FIRST_DISRUPTION
from probes.verdict import Contract, Verdict, failed, passed, unknown

PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff")

CONTRACTS = (
    Contract(
        "image_pulls_failed", "probe",
        asserts="at least one pod of the model made after time zero (a replacement) waited in ErrImagePull or "
                "ImagePullBackOff, and every replacement that became Ready did so only after such a wait: the "
                "outage was met by the cold-start path, not skipped by an image already on the node",
        time_zero=FIRST_DISRUPTION,
        interval="[time zero, the probe's call], at each moment the cluster changed, from the run's follower's "
                 "record",
        missing="without a record reaching back to time zero (no kilocard run follower) the probe cannot see the "
                "waits that passed: unknown, never ok; no replacement in the interval: failed, never ok",
        exceptions="the API not answering: error (the probe raises)",
        outcomes=(("failed_pulls", "ok: the replacements named, each with when its pull first failed"),
                  ("pulled", "failed: a replacement was Ready without ever failing its pull (its image on its "
                             "node, or the outage elsewhere), named"),
                  ("none", "failed: no replacement failed a pull or was Ready: nothing was replaced, or what "
                           "was has not reached its pull"),
                  ("unknown", "no moment recorded in the interval")),
        judge=("probes.pulls.judge", "chaos.timezero.choose")),
)


@dataclass(frozen=True)
class PodAt:
    """One pod of the model at one moment."""

    uid: str
    name: str
    ready: bool
    waiting: str | None = None  # why a container is not running yet, as the kubelet says


def judge(moments: list[tuple[float, list[PodAt]]], model: str, zero: float) -> Verdict:
    """`moments`: (epoch seconds, the model's pods then), in time order, the first at time zero."""
    if not moments:
        return unknown(f"{model}: no moment recorded from time zero", model=model)
    there = {p.uid for p in moments[0][1]}
    failed_at: dict[str, float] = {}
    ready_at: dict[str, float] = {}
    names: dict[str, str] = {}
    for at, pods in moments:
        for p in pods:
            if p.uid in there:
                continue
            names[p.uid] = p.name
            if p.waiting in PULL_FAILURES and p.uid not in ready_at:
                failed_at.setdefault(p.uid, at)
            if p.ready:
                ready_at.setdefault(p.uid, at)
    pulled = sorted(names[u] for u in ready_at if u not in failed_at)
    if pulled:
        return failed(f"{model}: {', '.join(pulled)} Ready without a failed pull: its image was on its node "
                      "(imagePullPolicy IfNotPresent) or the outage did not reach it; nothing of the cold-start "
                      "path was rehearsed", model=model, outcome="pulled", pulled=pulled)
    if not failed_at:
        return failed(f"{model}: no replacement failed a pull ({len(names)} made after time zero, none Ready)",
                      model=model, outcome="none", replacements=sorted(names.values()))
    first = {names[u]: round(at - zero, 3) for u, at in sorted(failed_at.items(), key=lambda kv: kv[1])}
    said = ", ".join(f"{n} at +{s:g} s" for n, s in first.items())
    return passed(f"{model}: the replacements failed their pulls first ({said})", model=model,
                  outcome="failed_pulls", failed_pulls=first)
