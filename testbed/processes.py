"""Child processes of the testbed: each in its own process group (so a Ctrl-C in the launching
shell does not reach it and `down` can end it with all its children), output to a log file."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Proc:
    name: str
    pid: int
    binary: str
    started: int = 0  # the kernel's start time of the process, in clock ticks since boot

    def alive(self) -> bool:
        """Running, and still the process we started. Pids get reused (32768 of them wrap within
        one test run), and every testbed runs the same binaries: the binary alone would let one
        testbed's `down` stop another's apiserver that drew a dead one's pid."""
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
            state, started = _stat(self.pid)
        except OSError:
            return False
        return state != "Z" and cmdline.split(b"\0", 1)[0].decode(errors="replace") == self.binary \
            and self.started in (0, started)  # 0: a state file from before start times were kept


def _stat(pid: int) -> tuple[str, int]:
    """A process's state and start time, from /proc/PID/stat (fields 3 and 22; the command
    name before them may hold spaces and parentheses)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[0], int(fields[19])


def start(name: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> Proc:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        popen = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ, **(env or {})}, close_fds=True,
        )
    proc = Proc(name, popen.pid, argv[0], _stat(popen.pid)[1])
    _wait_exec(proc, popen)
    return proc


def _wait_exec(proc: Proc, popen: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Popen returns once the exec closed its close-on-exec pipe, before the kernel has written
    the new program's arguments: /proc/PID/cmdline reads empty for a moment (long enough on a busy
    machine and a large Go binary), and `alive` would call a starting process dead. Wait until
    the arguments are there or the process has ended."""
    deadline = time.monotonic() + timeout
    while popen.poll() is None and time.monotonic() < deadline:
        try:
            if Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                return
        except OSError:
            return
        time.sleep(0.005)


def stop(procs: list[Proc], timeout: float = 10.0) -> list[str]:
    """Stop processes one by one, in the order given (dependents first: an apiserver whose etcd
    vanished under it stalls its graceful shutdown): SIGTERM the group, SIGKILL it after
    `timeout`. Return the names still alive."""
    for p in procs:
        if not p.alive():
            continue
        _signal_group(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while p.alive() and time.monotonic() < deadline:
            _reap(p)
            time.sleep(0.05)
        if p.alive():
            _signal_group(p.pid, signal.SIGKILL)
            time.sleep(0.2)
        _reap(p)
    return [p.name for p in procs if p.alive()]


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _reap(p: Proc) -> None:
    """Collect the exit status of our own child so it does not linger as a zombie."""
    try:
        os.waitpid(p.pid, os.WNOHANG)
    except ChildProcessError:
        pass


def usage(procs: list[Proc]) -> dict[str, tuple[float, int]]:
    """CPU seconds (user+system) and resident bytes per process, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    result = {}
    for p in procs:
        try:
            fields = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
            rss_pages = int(Path(f"/proc/{p.pid}/statm").read_text().split()[1])
        except OSError:
            continue
        result[p.name] = ((int(fields[11]) + int(fields[12])) / ticks, rss_pages * page)
    return result
