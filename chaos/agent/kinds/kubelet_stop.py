"""kubelet-stop (toolkit kind node-kubelet-stop): the node's kubelet dies while the machine stays
up, which is what the control plane sees of a lost machine: the node's Lease lapses, the
controller manager marks it Unknown and taints it unreachable, its pods are evicted but nothing
confirms their end, so they stay Terminating (a StatefulSet rank is not recreated until the node
is out of service or deleted). Engines on a real node keep running until the node controller
marks their pods NotReady; the testbed plays a whole machine lost (its engines stop too).

    params   none
    apply    systemctl stop kubelet
    revert   systemctl start kubelet (the kubelet comes back, reports, and finishes its pods)
    observe  `systemctl is-active kubelet.service` says it is not active
One stop per node: a second one (any run) is refused.
"""

from __future__ import annotations

from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "kubelet-stop", "node-kubelet-stop", "host", "kubelet", False
DESCRIPTION = ("Stop nodes' kubelets while the machines stay up: to the control plane, lost machines (Lease lapses, "
               "pods stuck Terminating).")
EVICTS = "node"  # the node controller evicts every pod of a lost node


PARAMS: dict[str, schema.Param] = {}
EXAMPLE: dict[str, object] = {}


def apply(fault: Any, host: Any) -> None:
    host.kubelet("stop")


def revert(fault: Any, host: Any) -> None:
    host.kubelet("start")


def observe(fault: Any, host: Any) -> tuple[str, str]:
    return host.kubelet_stopped()
