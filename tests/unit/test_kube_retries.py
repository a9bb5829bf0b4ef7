"""The one Kubernetes client retries what is worth retrying and counts each retry by cause, for
the journal; urllib3 is kept from retrying 429s unseen (and from retrying a PDB's 429 at all)."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from chaos import kube
from chaos.errors import TooManyRequests
from chaos.kube import connection


def refusal(status: int, retry_after: str | None = None) -> ApiException:
    exc = ApiException(status=status, reason="no")
    exc.headers = {"Retry-After": retry_after} if retry_after else {}
    return exc


def flaky(*failures: BaseException):
    left = list(failures)

    def call() -> str:
        if left:
            raise left.pop(0)
        return "ok"
    return call


def test_each_retry_is_counted_by_cause():
    k = kube.Kube(client.ApiClient(client.Configuration()), retry_seconds=5)
    before = kube.retries()
    assert k._call("get x", flaky(refusal(429, "0"), refusal(503), ConnectionError("reset"))) == "ok"
    after = kube.retries()
    assert {c: after.get(c, 0) - before.get(c, 0) for c in ("429", "5xx", "connection")} == {
        "429": 1, "5xx": 1, "connection": 1}


def test_a_429_the_caller_must_decide_on_is_neither_retried_nor_counted():
    k = kube.Kube(client.ApiClient(client.Configuration()), retry_seconds=5)
    before = kube.retries().get("429", 0)
    with pytest.raises(TooManyRequests):
        k._call("evict x", flaky(refusal(429, "0")), retry_429=False)
    assert kube.retries().get("429", 0) == before


def test_urllib3_leaves_429s_to_the_client():
    tuned = connection.tuned(client.Configuration(), 8)
    assert tuned.connection_pool_maxsize == 8
    assert tuned.retries.respect_retry_after_header is False and tuned.retries.total == 3
