"""io-throttle (toolkit kind slow-weights): the weights load slowly. A replica that starts on the
node (a replacement, a scale-up) reads its 70-800 GB of weights at the capped rate, so its
start-up stretches: a congested storage backend, a noisy neighbour on the disk, a cold cache.
Engines already serving keep their weights in card memory and are untouched.

    params   rate_mbps 1..100000: the read cap per device, in MB/s (production streams about
             1500 MB/s per node from shared storage: testbed/timing.py); devices: MAJ:MIN of the
             devices the weights are read from (default: the node's disks: NVMe, SCSI/SATA,
             virtio, Xen, MD, device-mapper)
    apply    the pods' parent cgroup (kubepods, kubepods.slice, or the agent's --pods-cgroup)
             capped, each cgroup's cap in force read first and kept with the fault: on cgroup v2
             its `io.max` (`MAJ:MIN rbps=<bytes>`), which holds for every pod below it; on v1,
             whose blkio throttle holds only for a cgroup's own processes, every cgroup below it
             (`blkio.throttle.read_bps_device`, `MAJ:MIN <bytes>`), re-applied while active so a
             pod started since is capped before its container reads (its image is pulled first)
    revert   each cgroup's earlier cap restored exactly (none: lifted)
    observe  the caps read back: confirmed when every capped cgroup holds every device at the cap
Weights on a network filesystem (NFS, a FUSE mount of object storage) pass no block device: the
cap does not reach them; throttle the node's network instead (network-bandwidth).
One cap per node: a second one (any run) is refused, so each revert restores what it found.
"""

from __future__ import annotations

from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "io-throttle", "slow-weights", "host", "io", True
FIT = True  # the engines it runs keep serving: their weights are in card memory
DESCRIPTION = ("Slow the weights' storage: every pod on the nodes reads at most `rate_mbps` per device (the pods' "
               "cgroup's io.max, or blkio on cgroup v1), so a replica starting there loads its weights slowly.")
DEVICE = r"[0-9]{1,4}:[0-9]{1,7}"
MB = 1_000_000

PARAMS = {
    "rate_mbps": schema.Param("number", "the read cap per device, in MB/s", 1, 100_000, required=True, example=150),
    "devices": schema.Param("texts", "block devices as MAJ:MIN", pattern=DEVICE, example=["259:0"]),
}
EXAMPLE = {"rate_mbps": 150}


def bytes_per_second(fault: Any) -> int:
    return int(float(fault.params["rate_mbps"]) * MB)


def apply(fault: Any, host: Any) -> None:
    host.io_throttle(fault, bytes_per_second(fault))


def revert(fault: Any, host: Any) -> None:
    host.io_unthrottle(fault)


def observe(fault: Any, host: Any) -> tuple[str, str]:
    return host.io_throttled(fault, bytes_per_second(fault))
