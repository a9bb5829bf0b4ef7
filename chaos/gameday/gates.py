"""Who says go, and who says stop: a game day's approval gates and its abort-all switch.

A gate is listened to in slices: `listen(seconds)` waits at most that long and returns the answer,
or None; between slices the run looks at the abort-all switch (chaos/gameday/day.py).

- `via: terminal`: a line typed at the terminal; "y" or "yes" approves, anything else refuses,
  and so does the end of input (no one is there to answer).
- `via: configmap`: annotations on the gate's ConfigMap, followed by a watch:

      kilocard.io/waiting: step-3      the runner's, while gate step-3 is open (removed when it closes)
      kilocard.io/approved: step-3     the facilitator's: approves gate step-3. Cleared when a gate
                                       opens, so an approval left from an earlier game day approves nothing.
      kilocard.io/approved-by: <who>   optional, kept in the journal

- abort-all: `kilocard.io/abort: "true"` on the plan's `control` ConfigMap. A control that cannot
  be read counts as thrown: a game day that cannot be stopped from the cluster does not go on.
"""

from __future__ import annotations

import getpass
import math
import select
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Protocol

from chaos.errors import Aborted, KubeError
from chaos.gameday.plan import ApproveStep, ConfigMapRef

APPROVED = "kilocard.io/approved"
APPROVED_BY = "kilocard.io/approved-by"
WAITING = "kilocard.io/waiting"
ABORT = "kilocard.io/abort"
# A watch that ends this way has only ended early (a dropped connection, a resourceVersion the
# apiserver no longer keeps): the next slice reads the ConfigMap again. Anything else (403) is reported.
_ENDED_EARLY = (0, 410)


@dataclass(frozen=True)
class Answer:
    approved: bool
    by: str  # who answered, and how


Listen = Callable[[float], Answer | None]
ReadLine = Callable[[float], str | None]  # a line typed within that many seconds ("" at end of input), else None


class ConfigMaps(Protocol):
    """What the gates and the switch need of chaos.kube.Kube."""

    def read_config_map(self, namespace: str, name: str) -> dict[str, Any]: ...

    def watch_config_map(self, namespace: str, name: str, resource_version: str,
                         timeout_seconds: int) -> Iterator[tuple[str, dict[str, Any]]]: ...

    def patch_config_map(self, namespace: str, name: str, patch: dict[str, Any]) -> Any: ...


def stdin_line(seconds: float) -> str | None:
    ready, _, _ = select.select([sys.stdin], [], [], seconds)
    return sys.stdin.readline() if ready else None


def instructions(step: ApproveStep) -> str:
    """How the facilitator answers the gate."""
    ref = step.config_map
    if ref is None:
        return "answer y or n here"
    return (f"kubectl annotate configmap -n {ref.namespace} {ref.name} --overwrite {APPROVED}={step.id} "
            f"{APPROVED_BY}=<who>")


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a container's uid without a passwd entry, and no $USER
        return "someone"


@contextmanager
def terminal(read_line: ReadLine) -> Iterator[Listen]:
    def listen(seconds: float) -> Answer | None:
        line = read_line(seconds)
        if line is None:
            return None
        if not line:
            return Answer(False, "nobody: the terminal's input ended")
        said = line.strip()
        if said.lower() in ("y", "yes"):
            return Answer(True, f"{_user()} at the terminal")
        return Answer(False, f"{_user()} at the terminal (answered {said!r})")

    yield listen


def _annotations(config_map: dict[str, Any]) -> dict[str, str]:
    return dict((config_map.get("metadata") or {}).get("annotations") or {})


def _follow(kube: ConfigMaps, ref: ConfigMapRef, seconds: float,
            found: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    """The ConfigMap once `found(it)` holds, read now or seen by a watch within `seconds`; None if
    not."""
    current = kube.read_config_map(ref.namespace, ref.name)
    if found(current):
        return current
    try:
        for kind, obj in kube.watch_config_map(ref.namespace, ref.name, current["metadata"]["resourceVersion"],
                                               max(1, math.ceil(seconds))):
            if kind in ("ADDED", "MODIFIED") and found(obj):
                return obj
    except KubeError as exc:
        if exc.status not in _ENDED_EARLY:
            raise
    return None


@contextmanager
def config_map(kube: ConfigMaps, step: ApproveStep) -> Iterator[Listen]:
    """Gate `step` on its ConfigMap: marked waiting while open, approved by its id."""
    ref = step.config_map
    assert ref is not None  # via: configmap (chaos.gameday.plan)
    try:
        kube.patch_config_map(ref.namespace, ref.name, {"metadata": {"annotations": {WAITING: step.id,
                                                                                     APPROVED: None}}})
    except KubeError as exc:
        raise Aborted(f"cannot open the gate on configmap {ref}: {exc}") from None

    def listen(seconds: float) -> Answer | None:
        try:
            approved = _follow(kube, ref, seconds, lambda cm: _annotations(cm).get(APPROVED) == step.id)
        except KubeError as exc:
            raise Aborted(f"cannot read the gate's configmap {ref}: {exc}") from None
        if approved is None:
            return None
        who = _annotations(approved).get(APPROVED_BY) or "someone (no kilocard.io/approved-by)"
        return Answer(True, f"{who} via configmap {ref}")

    try:
        yield listen
    finally:
        # The gate is over either way; a 'waiting' left behind names a gate that has closed.
        with suppress(KubeError):
            kube.patch_config_map(ref.namespace, ref.name, {"metadata": {"annotations": {WAITING: None}}})


class Control:
    """The plan's abort-all switch on a ConfigMap."""

    def __init__(self, kube: ConfigMaps, ref: ConfigMapRef) -> None:
        self.kube = kube
        self.ref = ref

    def _thrown(self, config_map: dict[str, Any]) -> bool:
        return _annotations(config_map).get(ABORT) == "true"

    def aborted(self) -> str | None:
        """Why the rest must not run (the switch is thrown, or cannot be read); None: go on."""
        try:
            thrown = self._thrown(self.kube.read_config_map(self.ref.namespace, self.ref.name))
        except KubeError as exc:
            return f"the control configmap {self.ref} cannot be read ({exc}): a game day that cannot be stopped " \
                   "from the cluster does not go on"
        return f'abort-all: configmap {self.ref} has {ABORT}: "true"' if thrown else None

    def wait(self, seconds: float) -> None:
        """Wait up to `seconds`, less if the switch is thrown (or cannot be read: `aborted` then says why)."""
        with suppress(KubeError):
            _follow(self.kube, self.ref, seconds, self._thrown)
