"""Retries of the API's calls, and the errors kilocard raises for what is not retried: 5xx,
dropped connections, and 429 from the server's rate limiting (honouring Retry-After). A 429 from
the Eviction API means "blocked by a PodDisruptionBudget" and is never retried here: the caller
decides. Every retry is counted, by cause, for the run's journal (kilocard.api_retries)."""

from __future__ import annotations

import json
import threading
from collections import Counter

import urllib3
from kubernetes.client.exceptions import ApiException
from tenacity import RetryCallState, wait_exponential_jitter

from chaos.errors import Conflict, KubeError, NotFound, TooManyRequests

# Every retry this process made, by cause (429, 5xx, connection): a run's journal says how hard
# the cluster pushed back (kilocard.api_retries).
_retried: Counter[str] = Counter()
_retried_lock = threading.Lock()
_STATUS_ERRORS: dict[int, type[KubeError]] = {404: NotFound, 409: Conflict, 429: TooManyRequests}


def kube_error(exc: Exception, what: str) -> KubeError:
    if isinstance(exc, ApiException):
        reason = exc.reason or ""
        message = reason
        if exc.body:
            try:
                message = json.loads(exc.body).get("message", reason)
            except (ValueError, AttributeError):
                message = str(exc.body)[:300]
        kind = _STATUS_ERRORS.get(exc.status or 0, KubeError)
        return kind(f"{what}: {exc.status} {message}", status=exc.status or 0, reason=reason)
    return KubeError(f"{what}: {exc}")


def retryable(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        status = exc.status or 0
        return status >= 500 or (status == 429 and not getattr(exc, "_kilocard_no_retry", False))
    return isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError))


def cause(exc: BaseException | None) -> str:
    status = (exc.status or 0) if isinstance(exc, ApiException) else 0
    return "429" if status == 429 else "5xx" if status else "connection"


def count_retry(state: RetryCallState) -> None:
    counted(cause(state.outcome.exception() if state.outcome else None))


def counted(cause: str) -> None:
    with _retried_lock:
        _retried[cause] += 1


def retries() -> dict[str, int]:
    """The retries this process has made so far, by cause."""
    with _retried_lock:
        return dict(_retried)


def retry_after(exc: BaseException | None) -> float | None:
    """The server's Retry-After, in seconds (header names are case-insensitive: HTTP/2 sends them
    in lower case)."""
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value else None
    except ValueError:
        return None


def wait(state: RetryCallState) -> float:
    after = retry_after(state.outcome.exception() if state.outcome else None)
    return after if after is not None else float(wait_exponential_jitter(multiplier=0.2, max=5)(state))
