"""The errors kilocard raises on purpose.

    KilocardError                 anything kilocard reports as a one-line message
    ├── SpecError                 bad input: names the file/flag and field, nothing was applied
    └── KubeError                 the Kubernetes API refused or failed a call
        ├── NotFound              404
        ├── Conflict              409 (already exists, resourceVersion clash)
        └── TooManyRequests       429 (rate limit, or an eviction blocked by a PodDisruptionBudget)

The CLI prints `kilocard: <message>` and exits non-zero for every KilocardError; anything else
is a bug and keeps its traceback.
"""

from __future__ import annotations


class KilocardError(Exception):
    """An error with a message meant for the user."""


class SpecError(KilocardError):
    """Invalid input. The message names where (file, flag) and which field."""


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
