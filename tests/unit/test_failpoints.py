"""Failpoints: a named place where the process dies by SIGKILL on its n-th visit, armed only by
KILOCARD_FAILPOINT; a misspelt one is refused at import, not silently never hit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from chaos import failpoints

VISIT = "from chaos import failpoints\nfor i in range(3):\n    print(i, flush=True)\n    failpoints.reach('fault-applied')\n"


def visit(armed: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", VISIT], env={**os.environ, "KILOCARD_FAILPOINT": armed},
                          capture_output=True, text=True, timeout=60)


def test_the_armed_point_kills_on_its_nth_visit_and_no_other_point_does():
    second = visit("fault-applied@2")
    assert second.returncode == -signal.SIGKILL and second.stdout.split() == ["0", "1"]
    assert visit("fault-applied").stdout.split() == ["0"]
    other = visit("fault-recorded")
    assert other.returncode == 0 and other.stdout.split() == ["0", "1", "2"]


@pytest.mark.parametrize("text", ["fault-aplied", "fault-applied@0", "fault-applied@x"])
def test_a_misspelt_failpoint_is_refused(text):
    with pytest.raises(ValueError, match="KILOCARD_FAILPOINT: expected one of fault-recorded"):
        failpoints._parse(text)
    assert failpoints._parse("") is None
