"""A pod's (or one container's) cgroup on this node, and freezing it: what rank-stall is made of;
the pods' parent cgroup, and capping its reads: what io-throttle (slow-weights) is made of.

Hierarchies come from /proc/self/mountinfo, never from assumed paths: nodes mount cgroup v2 alone,
v1 alone, or both (hybrid: v1 controllers under /sys/fs/cgroup/<controller>, v2 at
/sys/fs/cgroup/unified), and /sys/fs/cgroup itself may be a plain tmpfs, where a write creates a
file instead of freezing anything. The kubelet names a pod's cgroup `pod<uid>` (cgroupfs driver)
or `kubepods-<qos>-pod<uid with _>.slice` (systemd driver); a container's is a child whose name
holds its ID (`cri-containerd-<id>.scope`, `crio-<id>.scope`, `docker-<id>.scope`, or `<id>`).
Only `cgroup.freeze`, `freezer.state`, `io.max` and `blkio.throttle.read_bps_device` are ever
written, below a mounted hierarchy (and `cgroup.procs`, `cgroup.events`, `cgroup.controllers` read).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
MAX_DEPTH = 8  # kubepods/<qos>/pod<uid>/<container> sits 3-5 below a hierarchy's root


@dataclass(frozen=True)
class Cgroup:
    path: Path
    version: int  # 2: cgroup.freeze; 1: the freezer controller's freezer.state

    def procs(self) -> list[int]:
        """Every process in this cgroup and below it."""
        found: list[int] = []
        for directory, _dirs, files in os.walk(self.path):
            if "cgroup.procs" in files:
                text = (Path(directory) / "cgroup.procs").read_text()
                found += [int(pid) for pid in text.split()]
        return found

    def freeze(self, frozen: bool) -> None:
        if self.version == 2:
            (self.path / "cgroup.freeze").write_text("1" if frozen else "0")
        else:
            (self.path / "freezer.state").write_text("FROZEN" if frozen else "THAWED")

    def frozen(self) -> str:
        """'frozen', 'freezing' (v2 and v1 both settle asynchronously) or 'thawed'."""
        if self.version == 2:
            events = dict(line.split(" ", 1) for line in (self.path / "cgroup.events").read_text().splitlines())
            if events.get("frozen", "0").strip() == "1":
                return "frozen"
            return "freezing" if (self.path / "cgroup.freeze").read_text().strip() == "1" else "thawed"
        state = (self.path / "freezer.state").read_text().strip()
        return {"FROZEN": "frozen", "FREEZING": "freezing"}.get(state, "thawed")


def _cgroup_mounts(mountinfo: Path) -> list[tuple[int, Path, list[str]]]:
    """(version, mount point, a v1 hierarchy's controllers) of every cgroup mount."""
    found: list[tuple[int, Path, list[str]]] = []
    for line in mountinfo.read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, after = left.split(), right.split()
        if len(fields) < 5 or len(after) < 3 or after[0] not in ("cgroup", "cgroup2"):
            continue
        point = Path(fields[4].replace("\\040", " "))
        found.append((2, point, []) if after[0] == "cgroup2" else (1, point, after[2].split(",")))
    return found


def hierarchies(mountinfo: Path = MOUNTINFO) -> list[tuple[int, Path]]:
    """(version, mount point) of the cgroup v2 hierarchy and the v1 freezer, v2 first."""
    return sorted(((v, point) for v, point, options in _cgroup_mounts(mountinfo) if v == 2 or "freezer" in options),
                  key=lambda vp: -vp[0])


def _pod_names(pod_uid: str) -> tuple[str, str]:
    return f"pod{pod_uid}", f"pod{pod_uid.replace('-', '_')}"


def _holds(name: str, pod_uid: str) -> bool:
    return any(n in name for n in _pod_names(pod_uid))


def find(pod_uid: str, container_id: str | None, mountinfo: Path = MOUNTINFO) -> Cgroup | None:
    """The pod's cgroup (or its container's, given the ID), in the first hierarchy that has it
    (v2 before the v1 freezer); None when no hierarchy has it (gone, or not on this node)."""
    for version, root in hierarchies(mountinfo):
        pod = _search(root, lambda name: _holds(name, pod_uid))
        if pod is None or (version == 2 and not (pod / "cgroup.freeze").exists()):
            continue  # not here; or a v2 without its freezer (before Linux 5.2): the v1 freezer may have it
        if container_id is None:
            return Cgroup(pod, version)
        leaf = _search(pod, lambda name: container_id in name)
        if leaf is not None:
            return Cgroup(leaf, version)
    return None


def _search(root: Path, match: Callable[[str], bool]) -> Path | None:
    """Breadth first, at most MAX_DEPTH down: the first directory whose name matches."""
    level = [root]
    for _ in range(MAX_DEPTH):
        below: list[Path] = []
        for directory in level:
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if match(entry.name):
                        return Path(entry.path)
                    below.append(Path(entry.path))
        level = below
    return None


def signal_all(group: Cgroup, sig: signal.Signals) -> list[int]:
    """Send `sig` to every process in the cgroup; the PIDs signalled. Each is pinned by a pidfd
    and found in the cgroup again before it is signalled, so a PID the kernel gave to another
    process after it was listed is never signalled (an exited one is skipped)."""
    sent = []
    for pid in group.procs():
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            if pid in group.procs():  # still ours now that it cannot be reused
                signal.pidfd_send_signal(fd, sig)
                sent.append(pid)
        except ProcessLookupError:
            pass
        finally:
            os.close(fd)
    return sent


def stopped(pid: int) -> bool | None:
    """Is the process stopped (state T, or t when traced)? None when it has exited."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2] in "Tt"


# --- reads capped: what io-throttle (slow-weights) is made of ------------------------------------
# The kubelet's parent cgroup of every pod (cgroupfs driver, then systemd's): a cap there holds for
# every pod below it, a replacement started during the fault included.
PODS_ROOTS = ("kubepods", "kubepods.slice")


@dataclass(frozen=True)
class IoCgroup:
    """A cgroup whose reads are capped per device: v2 `io.max` (`MAJ:MIN rbps=N`) or the v1 blkio
    controller's `blkio.throttle.read_bps_device` (`MAJ:MIN N`; 0 removes the cap)."""

    path: Path
    version: int

    @property
    def _file(self) -> Path:
        return self.path / ("io.max" if self.version == 2 else "blkio.throttle.read_bps_device")

    def read_caps(self) -> dict[str, int]:
        """Each capped device's read cap, in bytes per second ("max" and absent: no cap)."""
        caps: dict[str, int] = {}
        for line in self._file.read_text().splitlines():
            device, _, rest = line.strip().partition(" ")
            if self.version == 2:
                value = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv).get("rbps", "max")
            else:
                value = rest.strip()
            if value.isdigit() and int(value) > 0:
                caps[device] = int(value)
        return caps

    def cap(self, device: str, bytes_per_second: int | None) -> None:
        """Cap the device's reads, or (None) lift the cap."""
        if self.version == 2:
            self._file.write_text(f"{device} rbps={bytes_per_second or 'max'}")
        else:
            self._file.write_text(f"{device} {bytes_per_second or 0}")


def io_hierarchies(mountinfo: Path = MOUNTINFO) -> list[tuple[int, Path]]:
    """(version, mount point) of the hierarchies that can cap reads: v2 (with its io controller)
    before the v1 blkio controller."""
    return sorted(((v, point) for v, point, options in _cgroup_mounts(mountinfo)
                   if (v == 2 and "io" in _controllers(point)) or "blkio" in options), key=lambda vp: -vp[0])


def _controllers(point: Path) -> list[str]:
    try:
        return (point / "cgroup.controllers").read_text().split()
    except OSError:
        return []


def pods_root(names: tuple[str, ...] = PODS_ROOTS, mountinfo: Path = MOUNTINFO) -> IoCgroup | None:
    """The pods' parent cgroup (the first of `names` directly below a hierarchy that caps reads)."""
    for version, point in io_hierarchies(mountinfo):
        for name in names:
            if (point / name).is_dir():
                return IoCgroup(point / name, version)
    return None


def disks(sys_block: Path = Path("/sys/block")) -> list[str]:
    """MAJ:MIN of the node's disks (NVMe, SCSI/SATA, virtio, Xen, MD, device-mapper): where weights
    are read from; not loop, RAM or optical devices."""
    found = []
    for entry in sorted(sys_block.iterdir()) if sys_block.is_dir() else []:
        if entry.name.startswith(("loop", "ram", "zram", "sr", "fd")):
            continue
        try:
            found.append((entry / "dev").read_text().strip())
        except OSError:
            continue
    return found
