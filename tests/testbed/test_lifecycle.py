"""Starting, recovering and stopping a second, one-node testbed beside the session's."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from testbed.cluster import Testbed
from testbed.config import TestbedConfig, taken_ports
from tests.testbed.conftest import PORT_BASE

pytestmark = pytest.mark.testbed


def processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_dead_component_is_noticed_restarted_and_down_leaves_nothing(tmp_path):
    tb = Testbed(TestbedConfig(nodes=1, port_base=PORT_BASE + 20, state_dir=tmp_path).validate())
    assert tb.up(say=lambda _m: None, timeout=120) is True
    try:
        kwok = next(p for p in tb.procs() if p.name == "kwok")
        os.killpg(kwok.pid, signal.SIGKILL)
        os.waitpid(kwok.pid, 0)
        assert not tb.running()
        assert not tb.status()["running"]
        # `up` clears the remains and starts anew.
        messages: list[str] = []
        assert tb.up(say=messages.append, timeout=120) is True
        assert messages[0] == "testbed partly running; stopping what is left first"
        assert tb.running() and tb.status()["nodes"] == {"total": 1, "ready": 1}
        assert processes_mentioning(str(tmp_path))
    finally:
        assert tb.down(say=lambda _m: None) is True
    assert processes_mentioning(str(tmp_path)) == []
    assert taken_ports(tb.config.ports) == []
    assert not (tmp_path / "state.json").exists()
    assert tb.down(say=lambda _m: None) is False
