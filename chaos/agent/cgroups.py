"""A pod's (or one container's) cgroup on this node, and freezing it: what rank-stall is made of.

Hierarchies come from /proc/self/mountinfo, never from assumed paths: nodes mount cgroup v2 alone,
v1 alone, or both (hybrid: v1 controllers under /sys/fs/cgroup/<controller>, v2 at
/sys/fs/cgroup/unified), and /sys/fs/cgroup itself may be a plain tmpfs, where a write creates a
file instead of freezing anything. The kubelet names a pod's cgroup `pod<uid>` (cgroupfs driver)
or `kubepods-<qos>-pod<uid with _>.slice` (systemd driver); a container's is a child whose name
holds its ID (`cri-containerd-<id>.scope`, `crio-<id>.scope`, `docker-<id>.scope`, or `<id>`).
Only `cgroup.freeze` and `freezer.state` are ever written, below a mounted hierarchy (and
`cgroup.procs`, `cgroup.events` read).
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


def hierarchies(mountinfo: Path = MOUNTINFO) -> list[tuple[int, Path]]:
    """(version, mount point) of the cgroup v2 hierarchy and the v1 freezer, v2 first."""
    found: list[tuple[int, Path]] = []
    for line in mountinfo.read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, after = left.split(), right.split()
        if len(fields) < 5 or len(after) < 3:
            continue
        point = Path(fields[4].replace("\\040", " "))
        if after[0] == "cgroup2":
            found.append((2, point))
        elif after[0] == "cgroup" and "freezer" in after[2].split(","):
            found.append((1, point))
    return sorted(found, key=lambda vp: -vp[0])


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
