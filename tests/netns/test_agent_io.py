"""slow-weights (io-throttle) through the real node agent on real reads: a pods' parent cgroup made
by the test below this machine's blkio hierarchy (it mounts cgroup v1; v2's io.max is the same
code with another file, and this kernel gives the v2 hierarchy no io controller), a loop device
over a file made by the test standing for the weights' disk, and `dd` with O_DIRECT reading it
from a process in a pod's cgroup below: the cap holds at the rate asked, a cap found before is
restored exactly, a second cap on the node is refused, a cap lifted by hand reads back as a
mismatch."""

from __future__ import annotations

import contextlib
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chaos.agent import cgroups

MB = 1_000_000


@dataclass
class Disk:
    device: str  # MAJ:MIN
    path: str  # /dev/loopN
    pods: Path  # the pods' parent cgroup
    pod: Path  # one pod's cgroup below it

    def read_rate(self, mb: int = 8) -> float:
        """MB/s of an O_DIRECT read of the disk by a process in the pod's cgroup."""
        script = (f"echo $$ > {self.pod}/cgroup.procs && exec dd if={self.path} of=/dev/null bs=1M count={mb} "
                  "iflag=direct")
        started = time.monotonic()
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return mb * 2**20 / MB / (time.monotonic() - started)

    def caps(self) -> str:
        return (self.pods / "blkio.throttle.read_bps_device").read_text().strip()


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Disk]:
    found = [point for version, point in cgroups.io_hierarchies() if version == 1]
    assert found, "this machine mounts no blkio hierarchy (/proc/self/mountinfo)"
    image = tmp_path / "weights.img"
    with image.open("wb") as f:
        f.truncate(64 * 2**20)
    loop = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=True)
    path = loop.stdout.strip()
    device = Path(f"/sys/block/{Path(path).name}/dev").read_text().strip()
    pods = found[0] / f"kilocard-test-{secrets.token_hex(4)}"
    pod = pods / "pod-test"
    pod.mkdir(parents=True)
    try:
        yield Disk(device, path, pods, pod)
    finally:
        for directory in (pod, pods):
            for _ in range(50):  # the reader leaves its cgroup a moment after it exits
                with contextlib.suppress(OSError):
                    directory.rmdir()
                    break
                time.sleep(0.05)
        subprocess.run(["losetup", "-d", path], check=False)


def throttle(a, ttl: float = 60, **params):
    return a.call("POST", "/v1/faults", {"kind": "io-throttle", "target": {}, "params": params, "ttl_seconds": ttl,
                                         "run_id": "io-test"})


def test_a_read_cap_holds_at_its_rate_and_its_revert_restores_the_cap_found_before(agent, disk):
    a = agent(None, "--pods-cgroup", disk.pods.name)
    assert disk.read_rate() > 40  # a loop device over a file in the page cache: hundreds of MB/s
    (disk.pods / "blkio.throttle.read_bps_device").write_text(f"{disk.device} {16 * MB}")  # someone's own cap
    status, fault = throttle(a, rate_mbps=4, devices=[disk.device])
    assert status == 201, fault
    seen = a.call("GET", f"/v1/faults/{fault['id']}/effect")[1]
    assert seen["status"] == "confirmed" and f"reads of {disk.device} held at {4 * MB} B/s" in seen["evidence"], seen
    rate = disk.read_rate()
    assert 2.5 <= rate <= 5, rate  # 4 MB/s, within the throttle's slice
    # A pod started during the fault (a replacement) is capped before it reads: v1 holds a cap
    # for a cgroup's own processes only, and the agent re-applies while active.
    late = Disk(disk.device, disk.path, disk.pods, disk.pods / "pod-late")
    late.pod.mkdir()
    try:
        deadline = time.monotonic() + 5
        while f"{disk.device} {4 * MB}" not in (late.pod / "blkio.throttle.read_bps_device").read_text():
            assert time.monotonic() < deadline, "the late pod's cgroup was never capped"
            time.sleep(0.1)
        assert 2.5 <= late.read_rate() <= 5
    finally:
        for _ in range(50):
            with contextlib.suppress(OSError):
                late.pod.rmdir()
                break
            time.sleep(0.05)
    assert a.call("POST", "/v1/faults", {"kind": "io-throttle", "target": {}, "params": {"rate_mbps": 8},
                                         "ttl_seconds": 60, "run_id": "other"})[0] == 409  # one cap per node
    assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200
    assert disk.caps() == f"{disk.device} {16 * MB}"  # restored exactly, not lifted
    (disk.pods / "blkio.throttle.read_bps_device").write_text(f"{disk.device} 0")
    assert disk.caps() == "" and disk.read_rate() > 40


def test_a_cap_lifted_by_hand_reads_back_as_a_mismatch_and_ttl_expiry_lifts_it(agent, disk):
    a = agent(None, "--pods-cgroup", disk.pods.name)
    status, fault = throttle(a, rate_mbps=4, devices=[disk.device])
    assert status == 201, fault
    (disk.pods / "blkio.throttle.read_bps_device").write_text(f"{disk.device} 0")  # someone lifts it
    seen = a.call("GET", f"/v1/faults/{fault['id']}/effect")[1]
    assert seen["status"] == "mismatch" and "uncapped" in seen["evidence"], seen
    assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200 and disk.caps() == ""
    status, fault = throttle(a, ttl=2, rate_mbps=4, devices=[disk.device])
    assert status == 201 and disk.caps() == f"{disk.device} {4 * MB}"
    deadline = time.monotonic() + 10
    while disk.caps() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert disk.caps() == "" and a.call("GET", "/v1/faults")[1] == {"faults": []}


def test_a_node_without_the_pods_cgroup_refuses_with_a_501_and_devices_are_checked(agent, disk):
    a = agent(None, "--pods-cgroup", f"no-such-{secrets.token_hex(4)}")
    status, body = throttle(a, rate_mbps=4, devices=[disk.device])
    assert status == 501 and "no pods' cgroup" in body["error"], body
    status, body = throttle(a, rate_mbps=4, devices=["sda"])
    assert status == 400 and body["field"] == "params.devices" and re.search("MAJ:MIN", body["error"]), body
