"""The testbed's child processes are known by pid, binary and start time: a pid drawn again by
another process of the same binary (another testbed's apiserver) is not ours to stop."""

import dataclasses
import sys
import time
from pathlib import Path

from testbed import processes


def test_a_reused_pid_of_the_same_binary_is_not_the_process_we_started(tmp_path: Path) -> None:
    ours = processes.start("sleeper", [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "log")
    try:
        assert ours.alive() and ours.started > 0
        # What a stale record looks like once its pid is drawn again by the same program.
        stale = dataclasses.replace(ours, started=ours.started - 1)
        assert not stale.alive()
        assert processes.stop([stale], timeout=1) == []  # refuses to touch it ...
        assert ours.alive()  # ... and it runs on
        legacy = dataclasses.replace(ours, started=0)  # a state file from before start times were kept
        assert legacy.alive()
    finally:
        assert processes.stop([ours], timeout=5) == []
    assert not ours.alive()


def test_a_process_is_alive_from_the_first_look_and_one_that_exits_at_once_is_not(tmp_path: Path) -> None:
    """Popen returns before the kernel has written the new program's arguments; a look at
    /proc/PID/cmdline in that moment read empty and called a starting lws-controller dead."""
    for _ in range(20):
        started = processes.start("sleeper", [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "log")
        try:
            assert started.alive()
        finally:
            assert processes.stop([started], timeout=5) == []
    ended = processes.start("quitter", [sys.executable, "-c", "pass"], tmp_path / "log")
    deadline = time.monotonic() + 10
    while ended.alive() and time.monotonic() < deadline:  # its zombie, unreaped, is not alive either
        time.sleep(0.01)
    assert not ended.alive()
