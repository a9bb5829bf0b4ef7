"""rank-stall (the agent side of the toolkit kind rank-stall): freeze one TP rank's engine process,
so its pod stays Running and Ready while its whole group stops serving (a hung collective).

    target   pod_uid: the pod's UID; container_id (optional): the engine container's ID (without
             the runtime's "containerd://"); without it the whole pod is frozen
    params   method freeze|sigstop (freeze)
    apply    freeze: the container's cgroup frozen: cgroup v2 `cgroup.freeze` 1, else the v1 freezer's
             `freezer.state` FROZEN; sigstop: SIGSTOP to every process in that cgroup
    revert   thawed: `cgroup.freeze` 0 / THAWED, or SIGCONT to every process now in the cgroup (a
             process cannot fork while stopped, so that is every one stopped; each is pinned by a
             pidfd and found in the cgroup again first, so a reused PID outside it is never
             signalled); a cgroup gone (the container restarted) is reverted
    refused  a cgroup holding the agent itself (frozen, nothing would thaw it)
    observe  confirmed when the cgroup reads frozen (cgroup.events `frozen 1`, freezer.state FROZEN)
             or every process in it is stopped (state T); mismatch when it does not
The cgroup is found below the hierarchies /proc/self/mountinfo lists (nodes differ: v2, v1, hybrid),
by the kubelet's names for it (`pod<uid>` with '-' or '_', the container ID in its leaf's name).
"""

from __future__ import annotations

import re
from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "rank-stall", None, "process", "stall", False
METHODS = ("freeze", "sigstop")
POD_UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
CONTAINER_ID = re.compile(r"^[0-9a-f]{12,64}$")


PARAMS = {"method": schema.Param("choice", "how the processes are frozen", choices=METHODS, default=METHODS[0])}


def check_target(target: dict[str, Any]) -> None:
    uid = target.get("pod_uid")
    if not isinstance(uid, str) or not POD_UID.match(uid):
        raise schema.FaultError("target.pod_uid", f"expected a pod UID (lower-case UUID), got {uid!r}")
    container = target.get("container_id")
    if container is not None and not (isinstance(container, str) and CONTAINER_ID.match(container)):
        raise schema.FaultError("target.container_id", f"expected a container ID (12-64 hex digits), got {container!r}")


def apply(fault: Any, host: Any) -> None:
    host.stall(fault, stalled=True)


def revert(fault: Any, host: Any) -> None:
    host.stall(fault, stalled=False)


def observe(fault: Any, host: Any) -> tuple[str, str]:
    return host.stalled(fault)
