"""A pod's cgroup made by a test, below a mounted hierarchy this machine has (from
/proc/self/mountinfo, as the agent finds it), with a real process in it that counts while it
runs; removed afterwards, thawed and killed first, so no frozen process is ever left behind."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from chaos.agent import cgroups

# Writes a tick to its file every 20 ms while it runs: frozen, the file stops growing.
TICKER = "import sys, time\nf = open(sys.argv[1], 'a')\nwhile True:\n    f.write('.'); f.flush(); time.sleep(0.02)\n"


@dataclass
class Pod:
    uid: str
    container_id: str
    leaf: Path
    version: int
    proc: subprocess.Popen[bytes]
    ticks: Path

    def target(self, container: bool = True) -> dict[str, str]:
        return {"pod_uid": self.uid, **({"container_id": self.container_id} if container else {})}

    def progressing(self, seconds: float = 0.3) -> bool:
        before = self.ticks.stat().st_size
        time.sleep(seconds)
        return self.ticks.stat().st_size > before

    def state(self) -> str:
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        return stat[stat.rindex(")") + 2]

    def frozen(self) -> bool:
        return cgroups.Cgroup(self.leaf, self.version).frozen() == "frozen"


def root(version: int) -> Path:
    found = [point for v, point in cgroups.hierarchies() if v == version]
    assert found, f"this machine mounts no cgroup v{version} hierarchy (/proc/self/mountinfo)"
    return found[0]


@contextlib.contextmanager
def pod_cgroup(tmp: Path, version: int = 2) -> Iterator[Pod]:
    """kilocard-test-<rand>/kubepods/pod<uid>/cri-containerd-<id>.scope below the v2 hierarchy (or
    the v1 freezer's), as the kubelet's cgroupfs driver lays them out, with a ticker moved in."""
    base = root(version) / f"kilocard-test-{secrets.token_hex(4)}"
    uid, cid = str(uuid.uuid4()), secrets.token_hex(32)
    leaf = base / "kubepods" / f"pod{uid}" / f"cri-containerd-{cid}.scope"
    leaf.mkdir(parents=True)
    ticks = tmp / f"ticks-{cid[:8]}"
    ticks.write_text("")
    proc = subprocess.Popen([sys.executable, "-c", TICKER, str(ticks)])
    try:
        (leaf / "cgroup.procs").write_text(str(proc.pid))
        pod = Pod(uid, cid, leaf, version, proc, ticks)
        deadline = time.monotonic() + 20  # the interpreter's start, on a busy machine
        while not ticks.stat().st_size and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pod.progressing(), "the ticker does not tick"
        yield pod
    finally:
        group = cgroups.Cgroup(leaf, version)
        with contextlib.suppress(OSError):
            group.freeze(False)
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait(timeout=10)
        for directory in (leaf, leaf.parent, leaf.parent.parent, base):
            for _ in range(50):  # a killed process leaves its cgroup a moment later
                try:
                    directory.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)
