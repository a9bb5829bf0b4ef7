"""The errors kilocard raises on purpose, and the exit codes they map to. One root: every error
meant for the user is a KilocardError, wherever its class lives (beside the code that raises it).

    KilocardError                 anything kilocard reports as a one-line message
    ├── SpecError                 bad input: names the file/flag, entry and field; nothing was applied (exit 2)
    │   ├── TargetConflict        the target is held by another open run that this kind cannot stack with
    │   └── GuardRefused          a blast-radius guard refused the plan (chaos.guards)
    ├── Aborted                   a stop condition or a signal ended the run early (exit 3)
    ├── KubeError                 the Kubernetes API refused or failed a call
    │   ├── NotFound              404
    │   ├── Conflict              409 (already exists, resourceVersion clash)
    │   └── TooManyRequests       429 (rate limit, or an eviction blocked by a PodDisruptionBudget)
    ├── BlockedByPDB              an eviction still refused at its deadline (chaos.faults.pod_kill)
    ├── AgentError                a node agent refused or failed a request (chaos.agent.client)
    ├── ProbeError                a probe could not reach a verdict: never a pass (probes.errors)
    │   ├── NoData                its source did not answer: the verdict is "unknown"
    │   ├── MetricNotFound        no engine's spelling of the metric has a series (probes.metric_names)
    │   └── SloError              a bad SLO argument or query (probes.slo)
    ├── TestbedError              the local testbed could not start or answer (testbed.cluster)
    └── BuildError                a testbed binary could not be built (testbed.build)

The node agent's FaultError (chaos.agent.schema) is not in the tree: the agent is a program of its
own that imports nothing of kilocard, and its client turns the refusal into a SpecError or an
AgentError at the boundary.

The CLI prints `kilocard: <message>` and exits with `exit_code(error)`; anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """Exit codes of every kilocard command (a run, a fault, a recover)."""

    PASSED = 0
    FAILED = 1  # a hypothesis deviated, a probe failed, or a fault could not be applied
    INVALID = 2  # invalid input: nothing was applied
    ABORTED = 3  # a stop condition (or a signal) ended the run; its faults were reverted
    REVERT_INCOMPLETE = 4  # some fault is still in place: run `kilocard recover`


class KilocardError(Exception):
    """An error with a message meant for the user."""

    exit = Exit.FAILED


class SpecError(KilocardError):
    """Invalid input. The message names where (file, flag, entry) and which field."""

    exit = Exit.INVALID


class TargetConflict(SpecError):
    """Another open run holds the target in a way this fault cannot share."""


class Aborted(KilocardError):
    exit = Exit.ABORTED


class KubeError(KilocardError):
    """A Kubernetes API call failed; `status` is the HTTP status (0 when no answer came)."""

    def __init__(self, message: str, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    pass


class TooManyRequests(KubeError):
    pass


def exit_code(error: KilocardError) -> int:
    return int(error.exit)
